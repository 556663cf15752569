// flock()-based exclusive lock. flock locks belong to the open file description, so the lock is released
// when the process dies, and a crashed compiler never blocks the others forever.
#include "cache/file_lock.hpp"

#include "cache/cache_file.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

namespace coda {
namespace {

// Each retry means another process unlinked the lock file in the short time between this one's open and
// its flock; only `coda cache clear` does that, once per key, so a handful of retries is already unusual.
constexpr int kMaxAttempts = 100;

}  // namespace

std::optional<FileLock> FileLock::acquire(const std::filesystem::path& path, std::string& error) {
    for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
        // Read-only is enough for flock, so a lock file created by another user sharing the cache still works.
        RegularFile file = open_regular_file(path, O_RDONLY | O_CREAT);
        if (!file.fd) {
            error = file.wrong_kind ? file.problem + ", not a lock file" : file.problem;
            return std::nullopt;
        }
        int rc = 0;
        while ((rc = ::flock(file.fd.get(), LOCK_EX)) != 0 && errno == EINTR) {
        }
        struct stat held {};
        if (rc != 0 || ::fstat(file.fd.get(), &held) != 0) {
            error = std::strerror(errno);
            return std::nullopt;
        }
        struct stat now {};
        if (::lstat(path.c_str(), &now) == 0) {
            if (now.st_dev == held.st_dev && now.st_ino == held.st_ino) return FileLock(std::move(file.fd), path);
        } else if (errno != ENOENT) {
            error = std::strerror(errno);
            return std::nullopt;
        }
        // The locked file was unlinked while this process waited (`coda cache clear` does that, holding the
        // lock): locking it would exclude nobody, so lock the file now at `path` instead.
    }
    error = "the lock file was replaced too often while waiting for it";
    return std::nullopt;
}

bool FileLock::remove_file(std::string& error) {
    if (::unlink(path_.c_str()) == 0 || errno == ENOENT) return true;
    error = std::strerror(errno);
    return false;
}

}  // namespace coda
