// KernelCache: memory map, single-flight builds within the process, flock-serialized builds across
// processes, and atomic publish (unique temp file in the same directory, then rename).
#include "cache/kernel_cache.hpp"

#include "cache/file_lock.hpp"
#include "cache/kernel_file.hpp"
#include "coda/error.hpp"
#include "util/log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <random>
#include <set>
#include <sys/stat.h>
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

struct FileRead {
    bool exists = false;
    std::string bytes;
    std::string error;  // set when the file exists but could not be read
};

// Reads at most the file's size as reported by fstat; a file that grows meanwhile is read as truncated.
FileRead read_file(const fs::path& path) {
    FileRead r;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT) {
            r.exists = true;
            r.error = std::strerror(errno);
        }
        return r;
    }
    r.exists = true;
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        r.error = std::strerror(errno);
        ::close(fd);
        return r;
    }
    r.bytes.resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (got < r.bytes.size()) {
        const ssize_t n = ::read(fd, r.bytes.data() + got, r.bytes.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += static_cast<std::size_t>(n);
    }
    r.bytes.resize(got);
    ::close(fd);
    return r;
}

// Writes `bytes` to a new file with a name no other writer uses; returns its path, or an empty path with
// `error` set.
fs::path write_temp_file(const fs::path& dir, const std::string& key, const std::string& bytes,
                         std::string& error) {
    static thread_local std::mt19937_64 random(std::random_device{}() ^ (std::uint64_t(::getpid()) << 32));
    for (int attempt = 0; attempt < 8; ++attempt) {
        const fs::path path = dir / fmt::format(".{}.{}-{:016x}{}", key, ::getpid(), random(), kTempSuffix);
        const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno == EEXIST) continue;
        if (fd < 0) {
            error = std::strerror(errno);
            return {};
        }
        std::size_t put = 0;
        while (put < bytes.size()) {
            const ssize_t n = ::write(fd, bytes.data() + put, bytes.size() - put);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            put += static_cast<std::size_t>(n);
        }
        const bool complete = put == bytes.size();
        if (!complete) error = std::strerror(errno);
        if (::close(fd) != 0 && complete) error = std::strerror(errno);
        if (complete && error.empty()) return path;
        ::unlink(path.c_str());
        return {};
    }
    error = "no unused temporary file name";
    return {};
}

}  // namespace

KernelCache::KernelCache(fs::path dir, bool use_disk) : dir_(std::move(dir)), disk_(use_disk) {
    if (!use_disk) return;
    if (dir_.empty()) {
        disable_disk("no cache directory was given");
        return;
    }
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec) disable_disk(fmt::format("cannot create {}: {}", dir_.string(), ec.message()));
    else if (::access(dir_.c_str(), W_OK | X_OK) != 0)
        disable_disk(fmt::format("cannot write to {}: {}", dir_.string(), std::strerror(errno)));
}

bool KernelCache::disk_enabled() const { return disk_.load(); }

const fs::path& KernelCache::directory() const { return dir_; }

void KernelCache::disable_disk(const std::string& why) {
    if (!disk_.exchange(false)) return;  // the first failure warns; later ones add nothing new
    logger("coda.cache")->warn("kernel cache: {}; kernels are cached in memory only from now on. Point "
                               "CODA_CACHE_DIR at a writable directory, or set CODA_DISK_CACHE=0 to silence this.",
                               why);
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
    if (disk_enabled()) {
        // Published files are complete (rename is atomic), so a valid file needs no lock.
        if (SharedEntry entry = try_load(key, false)) return {entry, CacheHit::Disk};
        std::string error;
        const fs::path lock_path = dir_ / (key + std::string(kLockSuffix));
        if (std::optional<FileLock> lock = FileLock::acquire(lock_path, error)) {
            // Another process may have published the entry while this one waited for the lock.
            if (SharedEntry entry = try_load(key, true)) return {entry, CacheHit::Disk};
            auto entry = std::make_shared<const CacheEntry>(build());
            publish(key, *entry);
            return {entry, CacheHit::Built};
        }
        disable_disk(fmt::format("cannot lock {}: {}", lock_path.string(), error));
    }
    return {std::make_shared<const CacheEntry>(build()), CacheHit::Built};
}

KernelCache::SharedEntry KernelCache::try_load(const std::string& key, bool report_corrupt) const {
    const fs::path path = dir_ / (key + std::string(kEntrySuffix));
    FileRead file = read_file(path);
    if (!file.exists) return nullptr;
    std::string problem = file.error;
    if (problem.empty()) {
        auto decoded = decode_kernel_file(file.bytes, key);
        if (auto* entry = std::get_if<CacheEntry>(&decoded))
            return std::make_shared<const CacheEntry>(std::move(*entry));
        problem = std::get<std::string>(decoded);
    }
    if (report_corrupt)
        logger("coda.cache")->warn("corrupt kernel cache entry {} ({}); rebuilding it", path.string(), problem);
    return nullptr;
}

void KernelCache::publish(const std::string& key, const CacheEntry& entry) {
    const fs::path path = dir_ / (key + std::string(kEntrySuffix));
    std::string error;
    const fs::path temp = write_temp_file(dir_, key, encode_kernel_file(key, entry), error);
    if (temp.empty()) return disable_disk(fmt::format("cannot write a new entry in {}: {}", dir_.string(), error));
    if (::rename(temp.c_str(), path.c_str()) != 0) {
        error = std::strerror(errno);
        ::unlink(temp.c_str());
        return disable_disk(fmt::format("cannot publish {}: {}", path.string(), error));
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
        FileRead read = read_file(file.path());
        if (!read.exists) continue;  // removed since the directory was read
        std::string description = read.error.empty() ? std::string() : "(unreadable: " + read.error + ")";
        if (read.error.empty()) {
            auto decoded = decode_kernel_file(read.bytes, key);
            if (auto* entry = std::get_if<CacheEntry>(&decoded)) description = entry->description;
            else description = "(corrupt: " + std::get<std::string>(decoded) + ")";
        }
        entries.push_back(DiskEntryInfo{key, file.path(), read.bytes.size(), std::move(description)});
    }
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
    return entries;
}

std::size_t KernelCache::clear() {
    std::set<std::string> removed;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const auto& [key, entry] : memory_) removed.insert(key);
        memory_.clear();
    }
    std::error_code ec;
    const auto now = fs::file_time_type::clock::now();
    for (const fs::directory_entry& file : fs::directory_iterator(dir_, ec)) {
        const std::string name = file.path().filename().string();
        std::error_code ignored;
        if (ends_with(name, kEntrySuffix)) {
            if (fs::remove(file.path(), ignored)) removed.insert(name.substr(0, name.size() - kEntrySuffix.size()));
        } else if (ends_with(name, kLockSuffix)) {
            fs::remove(file.path(), ignored);
        } else if (ends_with(name, kTempSuffix) && name.front() == '.') {
            const auto written = fs::last_write_time(file.path(), ignored);
            if (!ignored && now - written > kStaleTempAge) fs::remove(file.path(), ignored);
        }
    }
    logger("coda.cache")->info("cleared {} kernel cache entries from {}", removed.size(), dir_.string());
    return removed.size();
}

}  // namespace coda
