// coda cache list|clear: the on-disk kernel cache is a directory of files you can also inspect by hand.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "cache/kernel_cache.hpp"
#include "coda/cli.hpp"
#include "config/settings.hpp"

namespace coda::cli {
namespace {

// action: "list" or "clear".
int cache_command(const std::string& action) {
    KernelCache cache(settings().cache_dir, true);
    if (action == "list") {
        const auto entries = cache.list();
        std::printf("cache directory: %s\n", cache.directory().string().c_str());
        std::uintmax_t total = 0;
        for (const auto& e : entries) {
            // The whole key: it is the file's name, so a user can find, copy or remove that entry by hand.
            std::printf("%s  %9ju bytes  %s\n", e.key.c_str(), e.bytes, e.description.c_str());
            total += e.bytes;
        }
        std::printf("%s, %ju bytes\n", counted(entries.size(), "entry", "entries").c_str(), total);
    } else {
        std::printf("removed %s from %s\n", counted(cache.clear(), "entry", "entries").c_str(),
                    cache.directory().string().c_str());
    }
    return 0;
}

}  // namespace

void add_cache(Commands& commands, CLI::App& coda) {
    CLI::App& cache = *coda.add_subcommand("cache", "show or empty the on-disk kernel cache ($CODA_CACHE_DIR)");
    cache.require_subcommand(1);
    commands.add(cache, "list", "list the cache's entries", [] { return cache_command("list"); });
    commands.add(cache, "clear", "remove every entry", [] { return cache_command("clear"); });
}

}  // namespace coda::cli
