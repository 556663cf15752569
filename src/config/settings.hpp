// Settings: every CODA_* environment variable, parsed in this one place, once per process.
// Other stages read settings() and never call getenv, so docs/CLI.md's table and this file are the whole story.
#pragma once

#include <filesystem>
#include <string>

namespace coda {

// When Hopper kernels share the last rounds of tiles by k-tiles (stream-K, src/mainloop/stream_k_workspace.hpp):
// where it measured faster (Auto), never, or wherever the kernel can (Always: tests and A/B timing).
enum class StreamK { Auto, Never, Always };

struct Settings {
    std::filesystem::path cache_dir;  // CODA_CACHE_DIR; default $XDG_CACHE_HOME/coda, else $HOME/.cache/coda
    bool disk_cache = true;           // CODA_DISK_CACHE=0 keeps the cache in memory only
    std::string log_level = "warn";   // CODA_LOG_LEVEL: trace|debug|info|warn|error|off
    std::filesystem::path dump_dir;   // CODA_DUMP_DIR: if set, every generated source is also written here
    std::string arch;                 // CODA_ARCH: compile for this arch instead of the current device's
    std::filesystem::path tuning_file;  // CODA_TUNING_FILE: `coda tune`'s records; default <cache_dir>/tuning.tsv
    std::filesystem::path record_dir;   // CODA_RECORD: if set, every graph built is appended to a .coda file here
    StreamK stream_k = StreamK::Auto;   // CODA_STREAM_K: auto (default), 0 or 1
    int finalize_strands = 0;           // CODA_FINALIZE_STRANDS: 0 for auto (default), else 1, 2, 4, ..., 32

    // Reads the environment now. An invalid value throws coda::Error naming the variable, the value given
    // and the values accepted.
    static Settings from_environment();
};

// Settings::from_environment() of the first call, shared by the whole process (thread-safe). If that first
// parse throws, the next call parses again, so a fixed environment is picked up.
const Settings& settings();

}  // namespace coda
