// cache_key and templates_digest: deterministic, sensitive to every part, unambiguous, and free of anything
// that depends on where the process runs (paths, working directory, cache directory).
#include <catch2/catch.hpp>

#include "cache/cache_key.hpp"
#include "compile/nvrtc_compiler.hpp"
#include "support/temp_dir.hpp"

#include <regex>
#include <set>

namespace {

coda::CacheKeyParts base_parts() {
    coda::CacheKeyParts p;
    p.source_digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    p.template_digest = coda::templates_digest();
    p.nvrtc_version = coda::nvrtc_version();
    p.arch = "sm_90a";
    p.flags = coda::compile_flags("sm_90a");
    return p;
}

bool is_hex64(const std::string& s) { return std::regex_match(s, std::regex("[0-9a-f]{64}")); }

}  // namespace

TEST_CASE("templates_digest is a stable sha256", "[cache]") {
    const std::string digest = coda::templates_digest();
    CHECK(is_hex64(digest));
    CHECK(coda::templates_digest() == digest);
}

TEST_CASE("cache_key is deterministic and changes with every part", "[cache]") {
    const coda::CacheKeyParts base = base_parts();
    const std::string key = coda::cache_key(base);
    CHECK(is_hex64(key));
    CHECK(coda::cache_key(base_parts()) == key);

    std::set<std::string> keys{key};
    auto changed = [&](auto mutate) {
        coda::CacheKeyParts p = base;
        mutate(p);
        const std::string k = coda::cache_key(p);
        keys.insert(k);
        return k != key;
    };
    CHECK(changed([](auto& p) { p.template_digest[0] = p.template_digest[0] == '0' ? '1' : '0'; }));
    CHECK(changed([](auto& p) { p.nvrtc_version = "12.9"; }));
    CHECK(changed([](auto& p) { p.arch = "sm_80"; }));
    CHECK(changed([](auto& p) { p.flags.push_back("-lineinfo"); }));
    CHECK(changed([](auto& p) { std::swap(p.flags.front(), p.flags.back()); }));
    CHECK(changed([](auto& p) { p.flags.clear(); }));
    CHECK(changed([](auto& p) { p.source_digest = "0123"; }));
    CHECK(keys.size() == 8);  // and all the changed keys differ from one another
}

TEST_CASE("cache_key cannot be fooled by moving text between parts", "[cache]") {
    coda::CacheKeyParts a = base_parts();
    coda::CacheKeyParts b = a;
    a.source_digest = "ab";
    a.template_digest = "c";
    b.source_digest = "a";
    b.template_digest = "bc";
    CHECK(coda::cache_key(a) != coda::cache_key(b));

    coda::CacheKeyParts c = base_parts();
    coda::CacheKeyParts d = c;
    c.flags = {"-a", "-b"};
    d.flags = {"-a -b"};
    CHECK(coda::cache_key(c) != coda::cache_key(d));
}

TEST_CASE("cache_key does not depend on the working directory or any path", "[cache]") {
    const std::string key = coda::cache_key(base_parts());
    const std::string digest = coda::templates_digest();
    const auto cwd = std::filesystem::current_path();
    {
        coda::test::TempDir elsewhere("coda-key-cwd");
        std::filesystem::current_path(elsewhere.path());
        CHECK(coda::cache_key(base_parts()) == key);
        CHECK(coda::templates_digest() == digest);
        std::filesystem::current_path(cwd);
    }
    for (const std::string& flag : coda::compile_flags("sm_90a")) CHECK(flag.find('/') == std::string::npos);
}
