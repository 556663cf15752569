// Classifies a path with lstat before opening it, opens with O_NOFOLLOW | O_NONBLOCK, and checks the opened
// file again with fstat, so a file swapped in between the two calls is caught too.
#include "cache/cache_file.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>

namespace coda {
namespace {

// What a non-regular file is, in the words `ls -l` users know.
std::string kind_of(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISLNK(mode)) return "a symbolic link";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    return "something other than a regular file";
}

void set_wrong_kind(RegularFile& r, mode_t mode) {
    r.wrong_kind = true;
    r.directory = S_ISDIR(mode);
    r.problem = "is " + kind_of(mode);
}

}  // namespace

RegularFile open_regular_file(const std::filesystem::path& path, int flags, unsigned create_mode) {
    RegularFile r;
    // lstat first, so that a device or FIFO is never opened at all (opening some devices has effects).
    struct stat before {};
    if (::lstat(path.c_str(), &before) == 0) {
        if (!S_ISREG(before.st_mode)) {
            set_wrong_kind(r, before.st_mode);
            return r;
        }
    } else if (errno != ENOENT) {
        r.problem = std::strerror(errno);
        return r;
    }
    // O_NONBLOCK: if a FIFO appeared since the lstat, the open returns at once instead of waiting for a
    // writer; reads and writes of a regular file ignore the flag.
    const int fd = ::open(path.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, create_mode);
    if (fd < 0) {
        const int error = errno;
        struct stat now {};
        if (error == ENOENT) r.missing = true;
        else if (error == ELOOP && ::lstat(path.c_str(), &now) == 0 && S_ISLNK(now.st_mode))
            set_wrong_kind(r, now.st_mode);  // a link appeared since the lstat
        else
            r.problem = std::strerror(error);
        return r;
    }
    UniqueFd owned(fd);
    struct stat opened {};
    if (::fstat(fd, &opened) != 0) {
        r.problem = std::strerror(errno);
        return r;
    }
    if (!S_ISREG(opened.st_mode)) {
        set_wrong_kind(r, opened.st_mode);
        return r;
    }
    r.fd = std::move(owned);
    return r;
}

CacheFileRead read_cache_file(const std::filesystem::path& path) {
    CacheFileRead r;
    RegularFile file = open_regular_file(path, O_RDONLY);
    if (file.missing) return r;
    r.exists = true;
    if (!file.fd) {
        r.directory = file.directory;
        r.problem = file.wrong_kind ? file.problem + ", not a cache entry" : "unreadable: " + file.problem;
        return r;
    }
    struct stat st {};
    if (::fstat(file.fd.get(), &st) != 0) {
        r.problem = fmt::format("unreadable: {}", std::strerror(errno));
        return r;
    }
    r.bytes.resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (got < r.bytes.size()) {
        const ssize_t n = ::read(file.fd.get(), r.bytes.data() + got, r.bytes.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            r.problem = fmt::format("unreadable: {}", std::strerror(errno));
            return r;
        }
        if (n == 0) break;
        got += static_cast<std::size_t>(n);
    }
    r.bytes.resize(got);
    return r;
}

}  // namespace coda
