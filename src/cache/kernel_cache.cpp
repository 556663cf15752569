// KernelCache: memory map, single-flight builds within the process, flock-serialized builds across
// processes, atomic publish (unique temp file in the same directory, then rename), read-only directories.
#include "cache/kernel_cache.hpp"

#include "cache/cache_file.hpp"
#include "cache/file_lock.hpp"
#include "cache/kernel_file.hpp"
#include "cache/unique_fd.hpp"
#include "coda/error.hpp"
#include "util/log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <random>
#include <set>
#include <unistd.h>

namespace coda {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kEntrySuffix = ".kernel";
constexpr std::string_view kLockSuffix = ".lock";
constexpr std::string_view kTempSuffix = ".tmp";
// A temp file this old belongs to a process that died while publishing; younger ones may still be renamed.
constexpr auto kStaleTempAge = std::chrono::hours(1);

bool is_valid_key(std::string_view key) {
    return !key.empty() && key.size() <= 128 && std::all_of(key.begin(), key.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
    });
}

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Whether this process (its effective ids, as open() checks them) may create files in `dir`.
bool may_write(const fs::path& dir) { return ::faccessat(AT_FDCWD, dir.c_str(), W_OK | X_OK, AT_EACCESS) == 0; }

// Writes `bytes` to a new file with a name no other writer uses; returns its path, or an empty path with
// `error` set.
fs::path write_temp_file(const fs::path& dir, const std::string& key, const std::string& bytes,
                         std::string& error) {
    static thread_local std::mt19937_64 random(std::random_device{}() ^ (std::uint64_t(::getpid()) << 32));
    for (int attempt = 0; attempt < 8; ++attempt) {
        const fs::path path = dir / fmt::format(".{}.{}-{:016x}{}", key, ::getpid(), random(), kTempSuffix);
        UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
        if (!fd && errno == EEXIST) continue;
        if (!fd) {
            error = std::strerror(errno);
            return {};
        }
        std::size_t put = 0;
        while (put < bytes.size()) {
            const ssize_t n = ::write(fd.get(), bytes.data() + put, bytes.size() - put);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            put += static_cast<std::size_t>(n);
        }
        const bool complete = put == bytes.size();
        if (!complete) error = std::strerror(errno);
        if (fd.close() != 0 && complete) error = std::strerror(errno);
        if (complete && error.empty()) return path;
        ::unlink(path.c_str());
        return {};
    }
    error = "no unused temporary file name";
    return {};
}

}  // namespace

KernelCache::KernelCache(fs::path dir, bool use_disk) : dir_(std::move(dir)) {
    if (!use_disk) return;
    // disable_disk warns only when leaving another mode: start from the one a usable directory would have.
    mode_ = DiskMode::ReadWrite;
    std::error_code ec;
    if (dir_.empty()) {
        disable_disk("no cache directory was given");
    } else if (fs::create_directories(dir_, ec); ec) {
        disable_disk(fmt::format("cannot create {}: {}", dir_.string(), ec.message()));
    } else if (::faccessat(AT_FDCWD, dir_.c_str(), R_OK | X_OK, AT_EACCESS) != 0) {
        disable_disk(fmt::format("cannot read {}: {}", dir_.string(), std::strerror(errno)));
    } else if (!may_write(dir_)) {
        // A pre-warmed cache copied to a training machine is often read-only: it still serves every entry it
        // holds, and warns only if a kernel is missing from it (warn_read_only_miss).
        mode_ = DiskMode::ReadOnly;
    }
}

bool KernelCache::disk_enabled() const { return mode_.load() != DiskMode::Off; }

bool KernelCache::disk_writable() const { return mode_.load() == DiskMode::ReadWrite; }

const fs::path& KernelCache::directory() const { return dir_; }

fs::path KernelCache::entry_path(const std::string& key) const { return dir_ / (key + std::string(kEntrySuffix)); }

fs::path KernelCache::lock_path(const std::string& key) const { return dir_ / (key + std::string(kLockSuffix)); }

void KernelCache::disable_disk(const std::string& why) {
    if (mode_.exchange(DiskMode::Off) == DiskMode::Off) return;  // the first failure warns; later ones add nothing
    logger("coda.cache")->warn("kernel cache: {}; kernels are cached in memory only from now on. Point "
                               "CODA_CACHE_DIR at a writable directory, or set CODA_DISK_CACHE=0 to silence this.",
                               why);
}

void KernelCache::use_read_only(const std::string& why) {
    DiskMode writable = DiskMode::ReadWrite;
    mode_.compare_exchange_strong(writable, DiskMode::ReadOnly);
    if (warned_read_only_.exchange(true)) return;
    logger("coda.cache")->warn("kernel cache: {}; from now on its entries are only read, and kernels missing from "
                               "it are cached in memory only. Point CODA_CACHE_DIR at a writable directory to keep "
                               "them.",
                               why);
}

void KernelCache::warn_read_only_miss() {
    if (warned_read_only_.exchange(true)) return;
    logger("coda.cache")->warn("kernel cache {} is read-only for this process: its entries are used, but kernels "
                               "missing from it are compiled and cached in memory only. Warm it (`coda warm`) as a "
                               "user who may write it, or point CODA_CACHE_DIR at a writable directory.",
                               dir_.string());
}

CacheResult KernelCache::get_or_build(const std::string& key, const std::function<CacheEntry()>& build) {
    if (!is_valid_key(key)) throw InternalError(fmt::format("invalid kernel cache key '{}'", key));
    std::promise<SharedEntry> promise;
    std::shared_future<SharedEntry> other_builder;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (auto it = memory_.find(key); it != memory_.end()) return {it->second, CacheHit::Memory};
        if (auto it = building_.find(key); it != building_.end()) other_builder = it->second;
        else building_.emplace(key, promise.get_future().share());
    }
    if (other_builder.valid()) return {other_builder.get(), CacheHit::Memory};

    try {
        CacheResult result = load_or_build(key, build);
        {
            std::lock_guard<std::mutex> lock(mutex_);
            memory_[key] = result.entry;
            building_.erase(key);
        }
        promise.set_value(result.entry);
        return result;
    } catch (...) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            building_.erase(key);
        }
        promise.set_exception(std::current_exception());
        throw;
    }
}

CacheResult KernelCache::load_or_build(const std::string& key, const std::function<CacheEntry()>& build) {
    auto built = [&] { return CacheResult{std::make_shared<const CacheEntry>(build()), CacheHit::Built}; };
    if (!disk_enabled()) return built();
    auto warn_unusable = [&](const Load& load, const char* action) {
        logger("coda.cache")->warn("kernel cache entry {} {}; {}", entry_path(key).string(), load.problem, action);
    };
    // Published files are complete (rename is atomic) and checksummed, so reading one needs no lock.
    const Load first = try_load(key);
    if (first.entry) return {first.entry, CacheHit::Disk};
    if (disk_writable()) {
        std::string error;
        if (std::optional<FileLock> lock = FileLock::acquire(lock_path(key), error)) {
            // Another process may have published the entry while this one waited for the lock.
            const Load locked = try_load(key);
            if (locked.entry) return {locked.entry, CacheHit::Disk};
            if (!locked.replaceable) {
                warn_unusable(locked, "this kernel is cached in memory only until it is removed");
                return built();
            }
            if (!locked.problem.empty()) warn_unusable(locked, "rebuilding it");
            CacheResult result = built();
            publish(key, *result.entry);
            return result;
        }
        if (!may_write(dir_)) {
            use_read_only(fmt::format("cannot create {}: {}", lock_path(key).string(), error));
        } else {
            logger("coda.cache")->warn("kernel cache: cannot lock {} ({}); this kernel is cached in memory only",
                                       lock_path(key).string(), error);
        }
    } else {
        if (!first.problem.empty()) warn_unusable(first, "compiling it into memory (the cache is read-only)");
        warn_read_only_miss();
    }
    return built();
}

KernelCache::Load KernelCache::try_load(const std::string& key) const {
    Load load;
    CacheFileRead file = read_cache_file(entry_path(key));
    if (!file.exists) return load;
    if (!file.problem.empty()) {
        load.problem = file.problem.rfind("is ", 0) == 0 ? file.problem : "is " + file.problem;
        load.replaceable = !file.directory;
        return load;
    }
    auto decoded = decode_kernel_file(file.bytes, key);
    if (auto* entry = std::get_if<CacheEntry>(&decoded))
        load.entry = std::make_shared<const CacheEntry>(std::move(*entry));
    else
        load.problem = "is corrupt (" + std::get<std::string>(decoded) + ")";
    return load;
}

void KernelCache::publish(const std::string& key, const CacheEntry& entry) {
    const fs::path path = entry_path(key);
    std::string error;
    const fs::path temp = write_temp_file(dir_, key, encode_kernel_file(key, entry), error);
    if (temp.empty()) return use_read_only(fmt::format("cannot write a new entry in {}: {}", dir_.string(), error));
    // rename replaces whatever name was at `path` (a corrupt file, a FIFO, a symbolic link) and never what a
    // link points to.
    if (::rename(temp.c_str(), path.c_str()) != 0) {
        const int rename_error = errno;
        ::unlink(temp.c_str());
        if (rename_error == EISDIR || rename_error == ENOTEMPTY || rename_error == EEXIST) {
            // A directory appeared there since try_load: it is not ours to remove, and the rest still works.
            logger("coda.cache")->warn("kernel cache: cannot replace {}: {}; this kernel is cached in memory only",
                                       path.string(), std::strerror(rename_error));
            return;
        }
        return use_read_only(fmt::format("cannot publish {}: {}", path.string(), std::strerror(rename_error)));
    }
    logger("coda.cache")->debug("published {} ({})", path.string(), entry.description);
}

std::vector<DiskEntryInfo> KernelCache::list() const {
    std::vector<DiskEntryInfo> entries;
    std::error_code ec;
    for (const fs::directory_entry& file : fs::directory_iterator(dir_, ec)) {
        const std::string name = file.path().filename().string();
        if (!ends_with(name, kEntrySuffix)) continue;
        const std::string key = name.substr(0, name.size() - kEntrySuffix.size());
        if (!is_valid_key(key)) continue;
        CacheFileRead read = read_cache_file(file.path());
        if (!read.exists) continue;  // removed since the directory was read
        std::string description = read.problem.empty() ? std::string() : "(" + read.problem + ")";
        if (read.problem.empty()) {
            auto decoded = decode_kernel_file(read.bytes, key);
            if (auto* entry = std::get_if<CacheEntry>(&decoded)) description = entry->description;
            else description = "(corrupt: " + std::get<std::string>(decoded) + ")";
        }
        entries.push_back(DiskEntryInfo{key, file.path(), read.bytes.size(), std::move(description)});
    }
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
    return entries;
}

bool KernelCache::remove_key(const std::string& key) {
    const auto log = logger("coda.cache");
    std::string error;
    // Holding the key's lock: a build of it in another process finishes (and publishes) first, and one that
    // starts meanwhile waits, then finds the lock file gone and locks the new one (see FileLock::remove_file).
    std::optional<FileLock> lock = FileLock::acquire(lock_path(key), error);
    if (!lock) {
        log->warn("kernel cache: cannot lock {} ({}); left {} in place", lock_path(key).string(), error,
                  entry_path(key).string());
        return false;
    }
    // std::remove unlinks a file or link (never its target) and removes only an empty directory.
    const bool removed = std::remove(entry_path(key).c_str()) == 0;
    if (!removed && errno != ENOENT)
        log->warn("kernel cache: cannot remove {}: {}", entry_path(key).string(), std::strerror(errno));
    if (!lock->remove_file(error)) log->warn("kernel cache: cannot remove {}: {}", lock_path(key).string(), error);
    return removed;
}

std::size_t KernelCache::clear() {
    if (::faccessat(AT_FDCWD, dir_.c_str(), W_OK | X_OK, AT_EACCESS) != 0 && errno != ENOENT)
        throw Error(fmt::format("cannot clear the kernel cache {}: {}; only a user who may write the directory "
                                "can remove its entries",
                                dir_.string(), std::strerror(errno)));
    std::set<std::string> removed;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const auto& [key, entry] : memory_) removed.insert(key);
        memory_.clear();
    }
    std::set<std::string> keys;
    std::error_code ec;
    const auto now = fs::file_time_type::clock::now();
    for (const fs::directory_entry& file : fs::directory_iterator(dir_, ec)) {
        const std::string name = file.path().filename().string();
        for (std::string_view suffix : {kEntrySuffix, kLockSuffix})
            if (ends_with(name, suffix)) {
                const std::string key = name.substr(0, name.size() - suffix.size());
                if (is_valid_key(key)) keys.insert(key);
            }
        if (ends_with(name, kTempSuffix) && name.front() == '.') {
            std::error_code ignored;
            const auto written = fs::last_write_time(file.path(), ignored);
            if (!ignored && now - written > kStaleTempAge) fs::remove(file.path(), ignored);
        }
    }
    for (const std::string& key : keys)
        if (remove_key(key)) removed.insert(key);
    logger("coda.cache")->info("cleared {} kernel cache entries from {}", removed.size(), dir_.string());
    return removed.size();
}

}  // namespace coda
