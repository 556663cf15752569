// Opening and reading files in the cache directory without trusting what is there: a FIFO, socket, device,
// directory or symbolic link where an entry or lock file should be must not hang, crash or lead outside it.
#pragma once

#include <filesystem>
#include <string>

#include "cache/unique_fd.hpp"

namespace coda {

struct RegularFile {
    UniqueFd fd;           // open when `path` named a regular file (or O_CREAT made one)
    bool missing = false;  // nothing was at `path` (and O_CREAT was not given)
    bool wrong_kind = false;  // something other than a regular file is there: problem says what ("is a FIFO")
    bool directory = false;   // that something is a directory (nothing can be renamed over it)
    std::string problem;      // why there is no fd: "is a directory", or the system's reason ("Permission denied")
};

// Opens `path` with `flags` (O_RDONLY, optionally O_CREAT) if it is a regular file. A final symbolic link is
// not followed, and nothing but a regular file is opened for use: a FIFO would block the open until a
// writer came, a directory reads as an error, a link could point anywhere.
RegularFile open_regular_file(const std::filesystem::path& path, int flags, unsigned create_mode = 0644);

struct CacheFileRead {
    bool exists = false;
    std::string bytes;
    bool directory = false;  // a directory is where the file should be
    std::string problem;     // set when something is there but is not a readable regular file
};

// The bytes of the regular file at `path`, at most its size when opened (a file that grows meanwhile reads
// as truncated). `problem` reads "is a directory, not a cache entry", "unreadable: <reason>", ...
CacheFileRead read_cache_file(const std::filesystem::path& path);

}  // namespace coda
