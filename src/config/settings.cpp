// Parses the CODA_* environment variables into Settings, validating each one so that a typo fails loudly
// at start-up instead of silently falling back to a default.
#include "config/settings.hpp"

#include "coda/error.hpp"
#include "util/arch.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <unistd.h>

namespace coda {
namespace {

// An unset variable and an empty one both mean "use the default": `CODA_X= cmd` is how shells unset a value.
std::optional<std::string> read_env(const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
}

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

bool parse_bool(const char* name, const std::string& value) {
    const std::string v = lower(value);
    if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
    if (v == "0" || v == "false" || v == "no" || v == "off") return false;
    throw Error(fmt::format("{}='{}' is not a boolean: expected 1/0, true/false, yes/no or on/off", name, value));
}

bool parse_stream_k_bool(const char* name, const std::string& value) {
    try {
        return parse_bool(name, value);
    } catch (const Error&) {
        throw Error(fmt::format("{}='{}' is not auto or a boolean: expected auto, 1/0, true/false, yes/no or on/off",
                                name, value));
    }
}

// Threads per element of a finalizer (FinalizeProblem::strands): auto (0), or a power of two up to a warp.
int parse_finalize_strands(const char* name, const std::string& value) {
    if (lower(value) == "auto") return 0;
    for (int g = 1; g <= 32; g *= 2)
        if (value == std::to_string(g)) return g;
    throw Error(fmt::format("{}='{}' is not auto or a number of threads per element: expected auto, 1, 2, 4, 8, "
                            "16 or 32", name, value));
}

std::string parse_log_level(const char* name, const std::string& value) {
    static constexpr std::array<std::string_view, 6> kLevels{"trace", "debug", "info", "warn", "error", "off"};
    const std::string v = lower(value);
    if (std::find(kLevels.begin(), kLevels.end(), v) != kLevels.end()) return v;
    throw Error(fmt::format("{}='{}' is not a log level: expected one of trace, debug, info, warn, error, off",
                            name, value));
}

// The arch goes into --gpu-architecture and must name real SASS (sm_, not compute_) so that NVRTC yields a
// cubin: "sm_" then two or three digits, then optionally the 'a' (arch-specific) or 'f' (family) suffix.
std::string parse_arch(const char* name, const std::string& value) {
    if (sm_number(value)) return value;
    throw Error(fmt::format("{}='{}' is not a GPU architecture: expected sm_<major><minor> with an optional "
                            "'a' or 'f' suffix, e.g. sm_80, sm_90a or sm_100a",
                            name, value));
}

// Relative paths are resolved against the working directory at start-up, so a later chdir() by the
// application does not move the cache.
std::filesystem::path parse_dir(const char* name, const std::string& value) {
    std::error_code ec;
    std::filesystem::path p = std::filesystem::absolute(value, ec);
    if (ec) throw Error(fmt::format("{}='{}' cannot be made an absolute path: {}", name, value, ec.message()));
    return p.lexically_normal();
}

// XDG says a relative XDG_CACHE_HOME is invalid and must be ignored. Without HOME either, a per-user folder
// under the temp dir keeps users of one machine apart.
std::filesystem::path default_cache_dir() {
    if (auto xdg = read_env("XDG_CACHE_HOME"); xdg && std::filesystem::path(*xdg).is_absolute())
        return std::filesystem::path(*xdg) / "coda";
    if (auto home = read_env("HOME"); home && std::filesystem::path(*home).is_absolute())
        return std::filesystem::path(*home) / ".cache" / "coda";
    return std::filesystem::temp_directory_path() / fmt::format("coda-cache-{}", static_cast<long>(getuid()));
}

}  // namespace

Settings Settings::from_environment() {
    Settings s;
    if (auto v = read_env("CODA_CACHE_DIR")) s.cache_dir = parse_dir("CODA_CACHE_DIR", *v);
    else s.cache_dir = default_cache_dir();
    if (auto v = read_env("CODA_DISK_CACHE")) s.disk_cache = parse_bool("CODA_DISK_CACHE", *v);
    if (auto v = read_env("CODA_STREAM_K"))
        s.stream_k = lower(*v) == "auto"                ? StreamK::Auto
                     : parse_stream_k_bool("CODA_STREAM_K", *v) ? StreamK::Always
                                                         : StreamK::Never;
    if (auto v = read_env("CODA_FINALIZE_STRANDS"))
        s.finalize_strands = parse_finalize_strands("CODA_FINALIZE_STRANDS", *v);
    if (auto v = read_env("CODA_LOG_LEVEL")) s.log_level = parse_log_level("CODA_LOG_LEVEL", *v);
    if (auto v = read_env("CODA_DUMP_DIR")) s.dump_dir = parse_dir("CODA_DUMP_DIR", *v);
    if (auto v = read_env("CODA_RECORD")) s.record_dir = parse_dir("CODA_RECORD", *v);
    if (auto v = read_env("CODA_ARCH")) s.arch = parse_arch("CODA_ARCH", *v);
    if (auto v = read_env("CODA_TUNING_FILE")) s.tuning_file = parse_dir("CODA_TUNING_FILE", *v);
    else s.tuning_file = s.cache_dir / "tuning.tsv";
    return s;
}

const Settings& settings() {
    static const Settings parsed = Settings::from_environment();
    return parsed;
}

}  // namespace coda
