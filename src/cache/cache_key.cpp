// Serializes the key parts with a label and a length before each value, then hashes the result.
// Lengths make the text unambiguous: "ab"+"c" and "a"+"bc" serialize differently.
#include "cache/cache_key.hpp"

#include "compile/embedded_templates.hpp"
#include "util/sha256.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

namespace coda {
namespace {

void append_field(std::string& out, const char* label, const std::string& value) {
    fmt::format_to(std::back_inserter(out), "{}={}:{}\n", label, value.size(), value);
}

}  // namespace

std::string templates_digest() {
    static const std::string digest = [] {
        std::vector<const EmbeddedTemplate*> sorted;
        for (const EmbeddedTemplate& t : embedded_templates()) sorted.push_back(&t);
        std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->path < b->path; });
        std::string text = fmt::format("coda-templates count={}\n", sorted.size());
        for (const EmbeddedTemplate* t : sorted) {
            append_field(text, "path", t->path);
            append_field(text, "content", t->content);
        }
        return sha256_hex(text);
    }();
    return digest;
}

std::string cache_key(const CacheKeyParts& parts) {
    std::string text = fmt::format("coda-kernel-key format={}\n", kCacheFormatVersion);
    append_field(text, "source", parts.source_digest);
    append_field(text, "templates", parts.template_digest);
    append_field(text, "nvrtc", parts.nvrtc_version);
    append_field(text, "arch", parts.arch);
    fmt::format_to(std::back_inserter(text), "flags={}\n", parts.flags.size());
    for (const std::string& flag : parts.flags) append_field(text, "flag", flag);
    return sha256_hex(text);
}

}  // namespace coda
