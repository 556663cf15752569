// A temporary directory that removes itself: cache and CLI tests each get a private one.
#pragma once

#include <filesystem>
#include <string>

namespace coda::test {

class TempDir {
public:
    explicit TempDir(const std::string& prefix = "coda-test");
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

}  // namespace coda::test
