// Settings::from_environment: every CODA_* variable parsed, defaults derived from XDG_CACHE_HOME / HOME, and
// invalid values rejected with an error that names the variable.
#include <catch2/catch.hpp>

#include "coda/error.hpp"
#include "config/settings.hpp"

#include <stdlib.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>

namespace {

// Sets variables for one test and restores the previous environment afterwards.
class ScopedEnv {
public:
    ScopedEnv() {
        for (const char* name : {"CODA_CACHE_DIR", "CODA_DISK_CACHE", "CODA_LOG_LEVEL", "CODA_DUMP_DIR", "CODA_ARCH",
                                 "CODA_RECORD", "CODA_FINALIZE_STRANDS", "XDG_CACHE_HOME", "HOME"}) {
            const char* value = ::getenv(name);
            saved_[name] = value ? std::optional<std::string>(value) : std::nullopt;
            ::unsetenv(name);
        }
    }
    ~ScopedEnv() {
        for (const auto& [name, value] : saved_) {
            if (value) ::setenv(name.c_str(), value->c_str(), 1);
            else ::unsetenv(name.c_str());
        }
    }
    void set(const char* name, const char* value) { ::setenv(name, value, 1); }

private:
    std::map<std::string, std::optional<std::string>> saved_;
};

std::string error_of(const ScopedEnv&) {
    try {
        coda::Settings::from_environment();
    } catch (const coda::Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("settings defaults follow XDG_CACHE_HOME, then HOME", "[config]") {
    ScopedEnv env;
    env.set("HOME", "/home/someone");
    coda::Settings s = coda::Settings::from_environment();
    CHECK(s.cache_dir == std::filesystem::path("/home/someone/.cache/coda"));
    CHECK(s.disk_cache);
    CHECK(s.log_level == "warn");
    CHECK(s.dump_dir.empty());
    CHECK(s.arch.empty());
    CHECK(s.finalize_strands == 0);  // auto

    env.set("XDG_CACHE_HOME", "/var/cache/xdg");
    CHECK(coda::Settings::from_environment().cache_dir == std::filesystem::path("/var/cache/xdg/coda"));

    env.set("XDG_CACHE_HOME", "relative/ignored");  // the XDG spec says relative values are invalid
    CHECK(coda::Settings::from_environment().cache_dir == std::filesystem::path("/home/someone/.cache/coda"));

    ::unsetenv("XDG_CACHE_HOME");
    ::unsetenv("HOME");
    const auto fallback = coda::Settings::from_environment().cache_dir;
    CHECK(fallback.is_absolute());
    CHECK(fallback.parent_path() == std::filesystem::temp_directory_path());
}

TEST_CASE("each CODA_ variable is parsed", "[config]") {
    ScopedEnv env;
    env.set("CODA_CACHE_DIR", "/data/kernels/");
    env.set("CODA_DISK_CACHE", "0");
    env.set("CODA_LOG_LEVEL", "DEBUG");
    env.set("CODA_DUMP_DIR", "/tmp/coda-dumps");
    env.set("CODA_ARCH", "sm_90a");
    env.set("CODA_RECORD", "/tmp/coda-record");
    coda::Settings s = coda::Settings::from_environment();
    CHECK(s.record_dir == std::filesystem::path("/tmp/coda-record"));
    CHECK(s.cache_dir == std::filesystem::path("/data/kernels/"));
    CHECK_FALSE(s.disk_cache);
    CHECK(s.log_level == "debug");
    CHECK(s.dump_dir == std::filesystem::path("/tmp/coda-dumps"));
    CHECK(s.arch == "sm_90a");

    for (const char* yes : {"1", "true", "ON", "yes"}) {
        env.set("CODA_DISK_CACHE", yes);
        CHECK(coda::Settings::from_environment().disk_cache);
    }
    for (const char* no : {"0", "false", "Off", "no"}) {
        env.set("CODA_DISK_CACHE", no);
        CHECK_FALSE(coda::Settings::from_environment().disk_cache);
    }
    for (const char* level : {"trace", "debug", "info", "warn", "error", "off"}) {
        env.set("CODA_LOG_LEVEL", level);
        CHECK(coda::Settings::from_environment().log_level == level);
    }
    for (const char* arch : {"sm_80", "sm_86", "sm_89", "sm_90a", "sm_100a", "sm_120f"}) {
        env.set("CODA_ARCH", arch);
        CHECK(coda::Settings::from_environment().arch == arch);
    }
    for (int strands = 1; strands <= 32; strands *= 2) {
        env.set("CODA_FINALIZE_STRANDS", std::to_string(strands).c_str());
        CHECK(coda::Settings::from_environment().finalize_strands == strands);
    }
    env.set("CODA_FINALIZE_STRANDS", "Auto");
    CHECK(coda::Settings::from_environment().finalize_strands == 0);
}

TEST_CASE("relative directories are made absolute once", "[config]") {
    ScopedEnv env;
    env.set("CODA_CACHE_DIR", "rel/cache");
    env.set("CODA_DUMP_DIR", "./dumps");
    coda::Settings s = coda::Settings::from_environment();
    CHECK(s.cache_dir == std::filesystem::current_path() / "rel" / "cache");
    CHECK(s.dump_dir == std::filesystem::current_path() / "dumps");
}

TEST_CASE("an empty variable means the default", "[config]") {
    ScopedEnv env;
    env.set("HOME", "/home/someone");
    env.set("CODA_CACHE_DIR", "");
    env.set("CODA_DISK_CACHE", "");
    env.set("CODA_ARCH", "");
    coda::Settings s = coda::Settings::from_environment();
    CHECK(s.cache_dir == std::filesystem::path("/home/someone/.cache/coda"));
    CHECK(s.disk_cache);
    CHECK(s.arch.empty());
}

TEST_CASE("invalid values throw an error naming the variable and the value", "[config]") {
    ScopedEnv env;
    env.set("CODA_DISK_CACHE", "maybe");
    std::string message = error_of(env);
    CHECK(message.find("CODA_DISK_CACHE") != std::string::npos);
    CHECK(message.find("maybe") != std::string::npos);
    ::unsetenv("CODA_DISK_CACHE");

    env.set("CODA_LOG_LEVEL", "loud");
    message = error_of(env);
    CHECK(message.find("CODA_LOG_LEVEL") != std::string::npos);
    CHECK(message.find("loud") != std::string::npos);
    CHECK(message.find("trace") != std::string::npos);  // lists what is accepted
    ::unsetenv("CODA_LOG_LEVEL");

    for (const char* arch : {"compute_90", "sm9", "sm_9", "sm_90x", "sm_", "90a", "sm_1000"}) {
        env.set("CODA_ARCH", arch);
        message = error_of(env);
        INFO(arch);
        CHECK(message.find("CODA_ARCH") != std::string::npos);
        CHECK(message.find(arch) != std::string::npos);
    }
    ::unsetenv("CODA_ARCH");

    // Threads per element: a power of two up to a warp, written plainly.
    for (const char* strands : {"0", "3", "64", "08", "+4", "many"}) {
        env.set("CODA_FINALIZE_STRANDS", strands);
        message = error_of(env);
        INFO(strands);
        CHECK(message.find("CODA_FINALIZE_STRANDS") != std::string::npos);
        CHECK(message.find(std::string("'") + strands + "'") != std::string::npos);
        CHECK(message.find("1, 2, 4, 8, 16 or 32") != std::string::npos);
    }
}

TEST_CASE("settings() parses once and returns the same object", "[config]") {
    const coda::Settings& a = coda::settings();
    const coda::Settings& b = coda::settings();
    CHECK(&a == &b);
    CHECK_FALSE(a.cache_dir.empty());
}
