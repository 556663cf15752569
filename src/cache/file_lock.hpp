// An exclusive flock() on a lock file, held for the lifetime of the object: how processes sharing a cache
// directory agree that exactly one of them compiles a given key, and that `coda cache clear` waits for it.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "cache/unique_fd.hpp"

namespace coda {

class FileLock {
public:
    // Opens (creating if needed) the regular file `path` and blocks until the exclusive lock is held on the
    // file that `path` names at that moment: if the file was unlinked (and perhaps recreated) while this
    // process waited, it locks the file now at `path` instead. Returns nullopt, with `error` set, if the file
    // cannot be created or locked (e.g. an unwritable directory) or `path` is not a regular file ("is a
    // directory, not a lock file"); it never follows a symbolic link there.
    static std::optional<FileLock> acquire(const std::filesystem::path& path, std::string& error);

    // Unlinks the lock file while the lock is still held. Waiters holding a descriptor of it then find that
    // `path` names another file (or none) once they get the lock, and lock that one: at no moment do two
    // processes hold locks they both take for the key's. Returns false, with `error` set, on failure.
    bool remove_file(std::string& error);

    FileLock(FileLock&&) noexcept = default;
    FileLock& operator=(FileLock&&) noexcept = default;
    ~FileLock() = default;  // closing the descriptor releases the lock

private:
    FileLock(UniqueFd fd, std::filesystem::path path) : fd_(std::move(fd)), path_(std::move(path)) {}
    UniqueFd fd_;
    std::filesystem::path path_;
};

}  // namespace coda
