// An exclusive flock() on a lock file, held for the lifetime of the object: how processes sharing a cache
// directory agree that exactly one of them compiles a given key.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace coda {

class FileLock {
public:
    // Opens (creating if needed) `path` and blocks until the exclusive lock is held. Returns nullopt, with
    // `error` set, if the file cannot be opened or locked (e.g. an unwritable directory).
    static std::optional<FileLock> acquire(const std::filesystem::path& path, std::string& error);

    FileLock(FileLock&& other) noexcept;
    FileLock& operator=(FileLock&& other) noexcept;
    FileLock(const FileLock&) = delete;
    FileLock& operator=(const FileLock&) = delete;
    ~FileLock();  // closing the descriptor releases the lock

private:
    explicit FileLock(int fd) : fd_(fd) {}
    int fd_ = -1;
};

}  // namespace coda
