// coda cache list|clear: the on-disk kernel cache is a directory of files you can also inspect by hand.
#include <cstdio>

#include "cache/kernel_cache.hpp"
#include "coda/cli.hpp"
#include "coda/error.hpp"
#include "config/settings.hpp"

namespace coda::cli {
namespace {

const char* entry_word(std::size_t n) { return n == 1 ? "entry" : "entries"; }

}  // namespace

int cmd_cache(Arguments args) {
    const auto rest = args.positional();
    if (rest.size() != 1 || (rest[0] != "list" && rest[0] != "clear"))
        throw Error("usage: coda cache list | coda cache clear");
    KernelCache cache(settings().cache_dir, true);
    if (rest[0] == "list") {
        const auto entries = cache.list();
        std::printf("cache directory: %s\n", cache.directory().string().c_str());
        std::uintmax_t total = 0;
        for (const auto& e : entries) {
            // The whole key: it is the file's name, so a user can find, copy or remove that entry by hand.
            std::printf("%s  %9ju bytes  %s\n", e.key.c_str(), e.bytes, e.description.c_str());
            total += e.bytes;
        }
        std::printf("%zu %s, %ju bytes\n", entries.size(), entry_word(entries.size()), total);
    } else {
        const std::size_t removed = cache.clear();
        std::printf("removed %zu %s from %s\n", removed, entry_word(removed), cache.directory().string().c_str());
    }
    return 0;
}

}  // namespace coda::cli
