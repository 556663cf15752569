// The kernel cache: an in-memory map in front of an on-disk directory of <key>.kernel files. Safe for many
// threads of one process and many processes sharing one directory (one compiles, the others wait and read).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cache/cache_entry.hpp"
#include "cache/cache_key.hpp"

namespace coda {

enum class CacheHit { Memory, Disk, Built };

struct CacheResult {
    std::shared_ptr<const CacheEntry> entry;
    CacheHit hit;
};

struct DiskEntryInfo {
    std::string key;
    std::filesystem::path path;
    std::uintmax_t bytes;
    // The entry's description, "(corrupt: <reason>)", or "(is a directory, not a cache entry)" and the like.
    std::string description;
};

class KernelCache {
public:
    // With use_disk, creates `dir` if needed. A directory this process may read but not write is used
    // read-only: its entries are served, and kernels missing from it are built into memory (one warning, at
    // the first such miss). A directory that cannot be created or read gives one warning and memory only.
    KernelCache(std::filesystem::path dir, bool use_disk);
    KernelCache(const KernelCache&) = delete;
    KernelCache& operator=(const KernelCache&) = delete;

    // Memory first, then disk (checksum verified), else build() and publish. Thread-safe; concurrent callers
    // of one key in this process build once (the others get the result as a Memory hit, or build()'s
    // exception). Across processes, a per-key flock makes exactly one compile; the others wait, then read
    // its entry. Reading a published entry takes no lock. A corrupt or truncated file, or anything that is
    // not a regular file (FIFO, symbolic link, ...), is reported (warning naming it), rebuilt and replaced;
    // a directory in an entry's place is left alone and that kernel kept in memory.
    // Keys must be non-empty and made of [A-Za-z0-9_-] (cache_key() gives hex); else InternalError.
    CacheResult get_or_build(const std::string& key, const std::function<CacheEntry()>& build);

    // The entries in the directory, sorted by key (whether or not this cache uses the disk). Never blocks.
    std::vector<DiskEntryInfo> list() const;

    // Removes every entry file and lock file of the directory, and the memory map; returns how many distinct
    // keys were removed. Each key's entry and lock file are removed holding its lock, so clear waits for a
    // build of that key running in another process, and never lets a second one start beside it. What
    // cannot be removed is left in place with a warning; a directory this process may not write is an Error.
    std::size_t clear();

    bool disk_enabled() const;  // false when built without disk, or after falling back to memory
    const std::filesystem::path& directory() const;

private:
    enum class DiskMode { Off, ReadOnly, ReadWrite };
    using SharedEntry = std::shared_ptr<const CacheEntry>;
    struct Load {
        SharedEntry entry;
        std::string problem;       // why a file at the entry's path is unusable (empty: valid or missing)
        bool replaceable = true;   // false for a directory: renaming an entry over it would fail
    };

    bool disk_writable() const;  // disk_enabled() and new entries can be published
    CacheResult load_or_build(const std::string& key, const std::function<CacheEntry()>& build);
    Load try_load(const std::string& key) const;
    void publish(const std::string& key, const CacheEntry& entry);
    std::filesystem::path entry_path(const std::string& key) const;
    std::filesystem::path lock_path(const std::string& key) const;
    bool remove_key(const std::string& key);
    void disable_disk(const std::string& why);
    void use_read_only(const std::string& why);
    void warn_read_only_miss();

    std::filesystem::path dir_;
    std::atomic<DiskMode> mode_{DiskMode::Off};
    std::atomic<bool> warned_read_only_{false};  // the read-only warning is given once per cache
    std::mutex mutex_;
    std::map<std::string, SharedEntry> memory_;
    std::map<std::string, std::shared_future<SharedEntry>> building_;  // keys being built by this process
};

}  // namespace coda
