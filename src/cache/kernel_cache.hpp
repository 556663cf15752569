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
    std::string description;  // the entry's description, or "(corrupt: <reason>)"
};

class KernelCache {
public:
    // With use_disk, creates `dir` if needed; if it cannot be created or written, logs one warning and
    // keeps entries in memory only (disk_enabled() == false).
    KernelCache(std::filesystem::path dir, bool use_disk);
    KernelCache(const KernelCache&) = delete;
    KernelCache& operator=(const KernelCache&) = delete;

    // Memory first, then disk (checksum verified), else build() and publish. Thread-safe; concurrent callers
    // of one key in this process build once (the others get the result as a Memory hit, or build()'s
    // exception). Across processes, a per-key flock makes exactly one compile; the others wait, then read
    // its entry. A corrupt or truncated file is reported (warning naming it), rebuilt and overwritten.
    // Keys must be non-empty and made of [A-Za-z0-9_-] (cache_key() gives hex); else InternalError.
    CacheResult get_or_build(const std::string& key, const std::function<CacheEntry()>& build);

    // The entries in the directory, sorted by key (whether or not this cache uses the disk).
    std::vector<DiskEntryInfo> list() const;

    // Removes every entry file and lock file of the directory, and the memory map. Returns how many distinct
    // keys were removed. Meant for maintenance: a build running meanwhile in another process may then be
    // repeated once by a third, which stays correct.
    std::size_t clear();

    bool disk_enabled() const;  // false when built without disk, or after falling back to memory
    const std::filesystem::path& directory() const;

private:
    using SharedEntry = std::shared_ptr<const CacheEntry>;
    CacheResult load_or_build(const std::string& key, const std::function<CacheEntry()>& build);
    SharedEntry try_load(const std::string& key, bool report_corrupt) const;
    void publish(const std::string& key, const CacheEntry& entry);
    void disable_disk(const std::string& why);

    std::filesystem::path dir_;
    std::atomic<bool> disk_;
    std::mutex mutex_;
    std::map<std::string, SharedEntry> memory_;
    std::map<std::string, std::shared_future<SharedEntry>> building_;  // keys being built by this process
};

}  // namespace coda
