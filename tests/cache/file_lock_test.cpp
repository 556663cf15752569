// FileLock: exclusive across open file descriptions, correct when the lock file is unlinked under a waiter
// (the flock-then-unlink race of `coda cache clear`), and never waiting on what is not a regular file.
#include <catch2/catch.hpp>

#include "cache/file_lock.hpp"
#include "support/temp_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace fs = std::filesystem;

namespace {

// A failing lock test would otherwise wait forever: SIGALRM ends the test binary instead.
class Deadline {
public:
    explicit Deadline(unsigned seconds) { ::alarm(seconds); }
    ~Deadline() { ::alarm(0); }
};

// Whether someone holds a lock on the file now at `path` (a probe that never waits; it creates the file if
// it is missing, as a new FileLock::acquire would).
bool held_by_someone(const fs::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    const bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    ::close(fd);
    return held;
}

}  // namespace

TEST_CASE("a file lock excludes other holders until it is released", "[cache]") {
    coda::test::TempDir tmp("coda-lock");
    const fs::path path = tmp.path() / "k.lock";
    std::string error;
    {
        std::optional<coda::FileLock> lock = coda::FileLock::acquire(path, error);
        REQUIRE(lock);
        CHECK(held_by_someone(path));
    }
    CHECK_FALSE(held_by_someone(path));
}

TEST_CASE("a waiter whose lock file is unlinked meanwhile locks the file now at the path", "[cache]") {
    Deadline deadline(20);
    coda::test::TempDir tmp("coda-lock");
    const fs::path path = tmp.path() / "k.lock";
    std::string error;
    std::optional<coda::FileLock> first = coda::FileLock::acquire(path, error);
    REQUIRE(first);

    std::atomic<bool> second_holds{false};
    std::atomic<bool> release_second{false};
    std::thread waiter([&] {
        std::string waiter_error;
        std::optional<coda::FileLock> second = coda::FileLock::acquire(path, waiter_error);
        second_holds = second.has_value();
        while (!release_second) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    });
    // Let the waiter open the lock file and block in flock, then unlink that file holding it, as clear does.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK_FALSE(second_holds);
    REQUIRE(fs::remove(path));
    first.reset();
    while (!second_holds) std::this_thread::sleep_for(std::chrono::milliseconds(5));

    // The waiter must hold the file a newcomer would open: a lock on the unlinked one excludes nobody.
    CHECK(fs::exists(path));
    CHECK(held_by_someone(path));
    release_second = true;
    waiter.join();
    CHECK_FALSE(held_by_someone(path));
}

TEST_CASE("a lock path that is a directory or FIFO or symbolic link is refused at once", "[cache]") {
    Deadline deadline(20);
    coda::test::TempDir tmp("coda-lock");
    const fs::path dir = tmp.path() / "dir.lock";
    const fs::path fifo = tmp.path() / "fifo.lock";
    const fs::path link = tmp.path() / "link.lock";
    const fs::path outside = tmp.path() / "outside";
    fs::create_directory(dir);
    REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
    fs::create_symlink(outside, link);

    std::string error;
    CHECK_FALSE(coda::FileLock::acquire(dir, error));
    CHECK(error == "is a directory, not a lock file");
    CHECK_FALSE(coda::FileLock::acquire(fifo, error));
    CHECK(error == "is a FIFO, not a lock file");
    CHECK_FALSE(coda::FileLock::acquire(link, error));
    CHECK(error == "is a symbolic link, not a lock file");
    CHECK_FALSE(fs::exists(outside));  // the dangling link's target was not created
}
