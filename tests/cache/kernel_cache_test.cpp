// KernelCache: memory and disk hits, corrupt and truncated entries rebuilt with a warning, FIFOs, links and
// directories in an entry's place, read-only and unusable directories, single-flight builds across threads
// and forked processes, list, and clear (which waits for builds in progress).
#include <catch2/catch.hpp>

#include "cache/kernel_cache.hpp"
#include "coda/error.hpp"
#include "support/temp_dir.hpp"
#include "util/log.hpp"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <spdlog/sinks/ostream_sink.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

namespace fs = std::filesystem;

namespace {

// Collects what the "coda.cache" logger prints at warn and above while it lives.
class WarningCapture {
public:
    WarningCapture() : log_(coda::logger("coda.cache")), level_(log_->level()) {
        sink_ = std::make_shared<spdlog::sinks::ostream_sink_mt>(text_);
        sink_->set_level(spdlog::level::warn);
        log_->sinks().push_back(sink_);
        log_->set_level(spdlog::level::warn);
    }
    ~WarningCapture() {
        auto& sinks = log_->sinks();
        sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
        log_->set_level(level_);
    }
    std::string text() const { return text_.str(); }
    std::size_t count() const {
        const std::string t = text();
        return static_cast<std::size_t>(std::count(t.begin(), t.end(), '\n'));
    }

private:
    std::shared_ptr<spdlog::logger> log_;
    spdlog::level::level_enum level_;
    std::ostringstream text_;
    std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

coda::CacheEntry make_entry(const std::string& tag) {
    coda::CacheEntry e;
    e.cubin = std::string("\x7f" "ELF\0\0", 6) + "cubin of " + tag;
    e.kernel_name = "_Z6kernel_" + tag;
    e.resources = {{e.kernel_name, 42, 0, 0, 0, 256}};
    e.description = "graph " + tag + " sm_90a portable";
    e.source = "// source of " + tag + "\n";
    return e;
}

std::string key_of(char c) { return std::string(64, c); }

std::string read_bytes(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void write_bytes(const fs::path& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
}

// A failing test of blocking behaviour would otherwise wait forever: SIGALRM ends the test binary instead.
class Deadline {
public:
    explicit Deadline(unsigned seconds) { ::alarm(seconds); }
    ~Deadline() { ::alarm(0); }
};

std::size_t files_with_suffix(const fs::path& dir, const std::string& suffix) {
    std::size_t n = 0;
    for (const auto& f : fs::directory_iterator(dir)) {
        const std::string name = f.path().filename().string();
        if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) ++n;
    }
    return n;
}

}  // namespace

TEST_CASE("miss builds once, then memory, then disk in a new cache", "[cache]") {
    coda::test::TempDir tmp("coda-cache");
    const fs::path dir = tmp.path() / "kernels";
    int builds = 0;
    auto build = [&] {
        ++builds;
        return make_entry("one");
    };
    coda::KernelCache cache(dir, true);
    REQUIRE(cache.disk_enabled());
    CHECK(cache.directory() == dir);

    const coda::CacheResult first = cache.get_or_build(key_of('1'), build);
    CHECK(first.hit == coda::CacheHit::Built);
    CHECK(builds == 1);
    CHECK(fs::exists(dir / (key_of('1') + ".kernel")));

    const coda::CacheResult second = cache.get_or_build(key_of('1'), build);
    CHECK(second.hit == coda::CacheHit::Memory);
    CHECK(second.entry == first.entry);
    CHECK(builds == 1);

    coda::KernelCache fresh(dir, true);
    const coda::CacheResult third = fresh.get_or_build(key_of('1'), build);
    CHECK(third.hit == coda::CacheHit::Disk);
    CHECK(builds == 1);
    CHECK(third.entry->cubin == first.entry->cubin);
    CHECK(third.entry->kernel_name == first.entry->kernel_name);
    CHECK(third.entry->description == first.entry->description);
    CHECK(third.entry->source == first.entry->source);
    REQUIRE(third.entry->resources.size() == 1);
    CHECK(third.entry->resources[0].registers == 42);
    CHECK(third.entry->resources[0].shared_bytes == 256);
    CHECK(files_with_suffix(dir, ".tmp") == 0);  // the temporary file was renamed, not left behind
}

TEST_CASE("a corrupt or truncated entry is rebuilt, with a warning naming the file", "[cache]") {
    coda::test::TempDir tmp("coda-cache");
    const fs::path dir = tmp.path();
    const fs::path file = dir / (key_of('c') + ".kernel");
    int builds = 0;
    auto build = [&] {
        ++builds;
        return make_entry("corruptible");
    };
    coda::KernelCache(dir, true).get_or_build(key_of('c'), build);
    const std::string good = read_bytes(file);
    REQUIRE(good.size() > 100);

    const std::string damage = GENERATE(std::string("flip"), std::string("truncate"), std::string("empty"));
    std::string bad = good;
    if (damage == "flip") bad[bad.size() / 2] = static_cast<char>(bad[bad.size() / 2] ^ 1);
    if (damage == "truncate") bad.resize(bad.size() - 10);
    if (damage == "empty") bad.clear();
    write_bytes(file, bad);

    WarningCapture warnings;
    const coda::CacheResult rebuilt = coda::KernelCache(dir, true).get_or_build(key_of('c'), build);
    INFO(damage);
    CHECK(rebuilt.hit == coda::CacheHit::Built);
    CHECK(builds == 2);
    CHECK(warnings.text().find(file.string()) != std::string::npos);
    CHECK(warnings.count() == 1);

    CHECK(read_bytes(file) == good);  // overwritten with a valid entry
    const coda::CacheResult again = coda::KernelCache(dir, true).get_or_build(key_of('c'), build);
    CHECK(again.hit == coda::CacheHit::Disk);
    CHECK(again.entry->cubin == make_entry("corruptible").cubin);
    CHECK(builds == 2);
}

TEST_CASE("an uncreatable directory falls back to memory with one warning", "[cache]") {
    coda::test::TempDir tmp("coda-cache");
    const fs::path blocker = tmp.path() / "a-regular-file";
    write_bytes(blocker, "not a directory");
    WarningCapture warnings;
    coda::KernelCache cache(blocker / "cache", true);
    CHECK_FALSE(cache.disk_enabled());
    CHECK(warnings.count() == 1);
    CHECK(warnings.text().find((blocker / "cache").string()) != std::string::npos);

    int builds = 0;
    auto build = [&] {
        ++builds;
        return make_entry("memory");
    };
    CHECK(cache.get_or_build(key_of('m'), build).hit == coda::CacheHit::Built);
    CHECK(cache.get_or_build(key_of('m'), build).hit == coda::CacheHit::Memory);
    CHECK(builds == 1);
    CHECK(warnings.count() == 1);
    CHECK(cache.list().empty());
}

TEST_CASE("without disk nothing is written", "[cache]") {
    coda::test::TempDir tmp("coda-cache");
    WarningCapture warnings;
    coda::KernelCache cache(tmp.path(), false);
    CHECK_FALSE(cache.disk_enabled());
    int builds = 0;
    auto build = [&] {
        ++builds;
        return make_entry("nodisk");
    };
    CHECK(cache.get_or_build(key_of('n'), build).hit == coda::CacheHit::Built);
    CHECK(cache.get_or_build(key_of('n'), build).hit == coda::CacheHit::Memory);
    CHECK(builds == 1);
    CHECK(fs::is_empty(tmp.path()));
    CHECK(warnings.count() == 0);
}

TEST_CASE("threads asking for one key build it once", "[cache]") {
    coda::test::TempDir tmp("coda-cache");
    coda::KernelCache cache(tmp.path(), true);
    std::atomic<int> builds{0};
    std::vector<coda::CacheResult> results(8);
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < results.size(); ++i)
        threads.emplace_back([&, i] {
            results[i] = cache.get_or_build(key_of('t'), [&] {
                ++builds;
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
                return make_entry("threads");
            });
        });
    for (auto& t : threads) t.join();
    CHECK(builds == 1);
    CHECK(std::count_if(results.begin(), results.end(),
                        [](const auto& r) { return r.hit == coda::CacheHit::Built; }) == 1);
    for (const auto& r : results) CHECK(r.entry == results[0].entry);
}

TEST_CASE("a failing build reaches the caller and caches nothing", "[cache]") {
    coda::test::TempDir tmp("coda-cache");
    coda::KernelCache cache(tmp.path(), true);
    CHECK_THROWS_AS(cache.get_or_build(key_of('f'), []() -> coda::CacheEntry { throw coda::Error("nvrtc said no"); }),
                    coda::Error);
    CHECK_FALSE(fs::exists(tmp.path() / (key_of('f') + ".kernel")));
    CHECK(cache.get_or_build(key_of('f'), [] { return make_entry("second try"); }).hit == coda::CacheHit::Built);
}

TEST_CASE("keys that are not plain file names are rejected", "[cache]") {
    coda::test::TempDir tmp("coda-cache");
    coda::KernelCache cache(tmp.path(), true);
    for (const char* key : {"", "../escape", "a/b", "with space"})
        CHECK_THROWS_AS(cache.get_or_build(key, [] { return make_entry("never"); }), coda::InternalError);
}

TEST_CASE("eight processes building one key: one compiles, all get the same entry", "[cache]") {
    coda::test::TempDir tmp("coda-cache");
    const fs::path dir = tmp.path() / "shared";
    const fs::path marker = tmp.path() / "builds.log";
    const std::string key = key_of('p');
    constexpr int kProcesses = 8;

    int gate[2];
    REQUIRE(::pipe(gate) == 0);
    std::vector<pid_t> children;
    for (int i = 0; i < kProcesses; ++i) {
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            // Child: wait for the gate to open so that all start together, then race for the key.
            ::close(gate[1]);
            char c;
            while (::read(gate[0], &c, 1) > 0) {
            }
            int status = 1;
            try {
                coda::KernelCache cache(dir, true);
                const coda::CacheResult r = cache.get_or_build(key, [&] {
                    const int fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
                    const std::string line = std::to_string(::getpid()) + "\n";
                    if (fd >= 0 && ::write(fd, line.data(), line.size()) > 0) ::close(fd);
                    std::this_thread::sleep_for(std::chrono::milliseconds(300));
                    return make_entry("shared");
                });
                std::ofstream out(tmp.path() / ("result-" + std::to_string(i)), std::ios::binary);
                const char* hit = r.hit == coda::CacheHit::Built  ? "built\n"
                                  : r.hit == coda::CacheHit::Disk ? "disk\n"
                                                                  : "memory\n";
                out << hit << r.entry->kernel_name << "\n" << r.entry->cubin;
                status = out ? 0 : 2;
            } catch (...) {
                status = 3;
            }
            ::_exit(status);
        }
        children.push_back(pid);
    }
    ::close(gate[0]);
    ::close(gate[1]);  // opens the gate

    for (pid_t pid : children) {
        int status = 0;
        REQUIRE(::waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
    }
    const std::string builds = read_bytes(marker);
    CHECK(std::count(builds.begin(), builds.end(), '\n') == 1);

    int built = 0;
    const std::string expected = make_entry("shared").kernel_name + "\n" + make_entry("shared").cubin;
    for (int i = 0; i < kProcesses; ++i) {
        const std::string result = read_bytes(tmp.path() / ("result-" + std::to_string(i)));
        const std::size_t eol = result.find('\n');
        REQUIRE(eol != std::string::npos);
        if (result.substr(0, eol) == "built") ++built;
        else CHECK(result.substr(0, eol) == "disk");
        CHECK(result.substr(eol + 1) == expected);
    }
    CHECK(built == 1);
    CHECK(files_with_suffix(dir, ".kernel") == 1);
    CHECK(files_with_suffix(dir, ".tmp") == 0);
}

TEST_CASE("list shows every entry and clear removes them all", "[cache]") {
    coda::test::TempDir tmp("coda-cache");
    coda::KernelCache cache(tmp.path(), true);
    for (char c : {'3', '1', '2'}) cache.get_or_build(key_of(c), [&] { return make_entry(std::string(1, c)); });
    write_bytes(tmp.path() / "unrelated.txt", "left alone");

    auto listed = cache.list();
    REQUIRE(listed.size() == 3);
    CHECK(listed[0].key == key_of('1'));
    CHECK(listed[2].key == key_of('3'));
    CHECK(listed[0].description == make_entry("1").description);
    CHECK(listed[0].path == tmp.path() / (key_of('1') + ".kernel"));
    CHECK(listed[0].bytes == fs::file_size(listed[0].path));

    write_bytes(listed[1].path, "garbage");
    listed = cache.list();
    REQUIRE(listed.size() == 3);
    CHECK(listed[1].description.find("corrupt") != std::string::npos);

    CHECK(cache.clear() == 3);
    CHECK(cache.list().empty());
    CHECK(files_with_suffix(tmp.path(), ".kernel") == 0);
    CHECK(files_with_suffix(tmp.path(), ".lock") == 0);
    CHECK(fs::exists(tmp.path() / "unrelated.txt"));
    int builds = 0;
    cache.get_or_build(key_of('1'), [&] {
        ++builds;
        return make_entry("1");
    });
    CHECK(builds == 1);  // the memory map was cleared too
    CHECK(cache.clear() == 1);
}

TEST_CASE("a FIFO where an entry should be is reported and replaced without hanging", "[cache]") {
    Deadline deadline(20);
    coda::test::TempDir tmp("coda-cache");
    const fs::path fifo = tmp.path() / (key_of('f') + ".kernel");
    REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
    int builds = 0;
    auto build = [&] {
        ++builds;
        return make_entry("fifo");
    };
    WarningCapture warnings;
    CHECK(coda::KernelCache(tmp.path(), true).get_or_build(key_of('f'), build).hit == coda::CacheHit::Built);
    CHECK_THAT(warnings.text(), Catch::Contains(fifo.string() + " is a FIFO, not a cache entry"));
    CHECK(warnings.count() == 1);
    CHECK(fs::is_regular_file(fs::symlink_status(fifo)));
    CHECK(coda::KernelCache(tmp.path(), true).get_or_build(key_of('f'), build).hit == coda::CacheHit::Disk);
    CHECK(builds == 1);
}

TEST_CASE("a symbolic link where an entry should be is replaced and its target left alone", "[cache]") {
    coda::test::TempDir tmp("coda-cache");
    const fs::path dir = tmp.path() / "cache";
    const fs::path outside = tmp.path() / "precious.txt";
    write_bytes(outside, "not the cache's to touch");
    fs::create_directory(dir);
    const fs::path link = dir / (key_of('s') + ".kernel");
    fs::create_symlink(outside, link);

    WarningCapture warnings;
    CHECK(coda::KernelCache(dir, true).get_or_build(key_of('s'), [] { return make_entry("link"); }).hit ==
          coda::CacheHit::Built);
    CHECK_THAT(warnings.text(), Catch::Contains(link.string() + " is a symbolic link, not a cache entry"));
    CHECK(fs::is_regular_file(fs::symlink_status(link)));
    CHECK(read_bytes(outside) == "not the cache's to touch");

    fs::remove(link);
    fs::create_symlink(outside, link);
    CHECK(coda::KernelCache(dir, true).clear() == 1);
    CHECK_FALSE(fs::exists(fs::symlink_status(link)));
    CHECK(read_bytes(outside) == "not the cache's to touch");
}

TEST_CASE("a directory where an entry should be is left alone and only that kernel stays in memory", "[cache]") {
    coda::test::TempDir tmp("coda-cache");
    const fs::path in_the_way = tmp.path() / (key_of('d') + ".kernel");
    fs::create_directories(in_the_way / "something");
    int builds = 0;
    auto build = [&] {
        ++builds;
        return make_entry("dir");
    };
    WarningCapture warnings;
    coda::KernelCache cache(tmp.path(), true);
    CHECK(cache.get_or_build(key_of('d'), build).hit == coda::CacheHit::Built);
    CHECK_THAT(warnings.text(), Catch::Contains(in_the_way.string() + " is a directory, not a cache entry"));
    CHECK(warnings.count() == 1);
    CHECK(fs::is_directory(in_the_way / "something"));

    // The rest of the cache still works.
    CHECK(cache.get_or_build(key_of('e'), build).hit == coda::CacheHit::Built);
    CHECK(fs::is_regular_file(tmp.path() / (key_of('e') + ".kernel")));
    CHECK(warnings.count() == 1);
    CHECK(builds == 2);
}

TEST_CASE("a lock path that is not a regular file keeps only that kernel in memory", "[cache]") {
    Deadline deadline(20);
    coda::test::TempDir tmp("coda-cache");
    const fs::path lock_dir = tmp.path() / (key_of('l') + ".lock");
    const fs::path lock_fifo = tmp.path() / (key_of('m') + ".lock");
    fs::create_directory(lock_dir);
    REQUIRE(::mkfifo(lock_fifo.c_str(), 0644) == 0);
    WarningCapture warnings;
    coda::KernelCache cache(tmp.path(), true);
    CHECK(cache.get_or_build(key_of('l'), [] { return make_entry("l"); }).hit == coda::CacheHit::Built);
    CHECK(cache.get_or_build(key_of('m'), [] { return make_entry("m"); }).hit == coda::CacheHit::Built);
    CHECK_THAT(warnings.text(), Catch::Contains(lock_dir.string() + " (is a directory, not a lock file)") &&
                                    Catch::Contains(lock_fifo.string() + " (is a FIFO, not a lock file)"));
    CHECK(warnings.count() == 2);
    CHECK(cache.get_or_build(key_of('n'), [] { return make_entry("n"); }).hit == coda::CacheHit::Built);
    CHECK(fs::is_regular_file(tmp.path() / (key_of('n') + ".kernel")));
}

TEST_CASE("list names what stands where an entry should be without hanging", "[cache]") {
    Deadline deadline(20);
    coda::test::TempDir tmp("coda-cache");
    coda::KernelCache cache(tmp.path(), true);
    cache.get_or_build(key_of('1'), [] { return make_entry("1"); });
    REQUIRE(::mkfifo((tmp.path() / (key_of('2') + ".kernel")).c_str(), 0644) == 0);
    fs::create_directory(tmp.path() / (key_of('3') + ".kernel"));
    fs::create_symlink(tmp.path() / (key_of('1') + ".kernel"), tmp.path() / (key_of('4') + ".kernel"));

    const auto listed = cache.list();
    REQUIRE(listed.size() == 4);
    CHECK(listed[0].description == make_entry("1").description);
    CHECK(listed[1].description == "(is a FIFO, not a cache entry)");
    CHECK(listed[2].description == "(is a directory, not a cache entry)");
    CHECK(listed[3].description == "(is a symbolic link, not a cache entry)");
}

namespace {

// Runs `body` in a forked child and returns what it reports (empty: all is well). When the tests run as
// root, for whom permission bits stop no write, the child first becomes `nobody`, so that a read-only
// directory really is read-only to it.
std::string as_unprivileged_user(const std::function<std::string()>& body) {
    const struct passwd* nobody = ::getpwnam("nobody");
    const uid_t uid = nobody ? nobody->pw_uid : 65534;
    const gid_t gid = nobody ? nobody->pw_gid : 65534;
    int report[2];
    REQUIRE(::pipe(report) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::close(report[0]);
        ::alarm(20);
        std::string text;
        if (::geteuid() == 0 && (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0))
            text = "cannot become an unprivileged user";
        if (text.empty()) {
            try {
                text = body();
            } catch (const std::exception& e) {
                text = std::string("exception: ") + e.what();
            }
        }
        for (std::size_t put = 0; put < text.size();) {
            const ssize_t n = ::write(report[1], text.data() + put, text.size() - put);
            if (n <= 0) break;
            put += static_cast<std::size_t>(n);
        }
        ::_exit(0);
    }
    ::close(report[1]);
    std::string text;
    char buffer[512];
    for (ssize_t n; (n = ::read(report[0], buffer, sizeof buffer)) > 0;)
        text.append(buffer, static_cast<std::size_t>(n));
    ::close(report[0]);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status)) text += "the child process died (signal " + std::to_string(WTERMSIG(status)) + ")";
    return text;
}

}  // namespace

TEST_CASE("a read-only cache serves its entries and builds misses into memory with one warning", "[cache]") {
    coda::test::TempDir tmp("coda-cache");
    const fs::path dir = tmp.path() / "prewarmed";
    coda::KernelCache(dir, true).get_or_build(key_of('r'), [] { return make_entry("prewarmed"); });
    fs::permissions(tmp.path(), fs::perms(0755));  // mkdtemp's 0700 would keep the other user out altogether
    fs::permissions(dir, fs::perms(0555));
    std::vector<fs::path> before;
    for (const auto& f : fs::directory_iterator(dir)) before.push_back(f.path());

    const std::string problems = as_unprivileged_user([&] {
        std::string found;
        auto expect = [&](bool ok, const std::string& what) {
            if (!ok) found += what + "\n";
        };
        WarningCapture warnings;
        coda::KernelCache cache(dir, true);
        expect(cache.disk_enabled(), "the read-only directory is not used at all");
        expect(::access(dir.c_str(), W_OK) != 0, "the directory is writable to this user: the test proves nothing");
        int builds = 0;
        auto build = [&] {
            ++builds;
            return make_entry("missing");
        };
        const coda::CacheResult hit = cache.get_or_build(key_of('r'), build);
        expect(hit.hit == coda::CacheHit::Disk, "the pre-warmed entry was not read from disk");
        expect(hit.entry->cubin == make_entry("prewarmed").cubin, "the pre-warmed entry came back wrong");
        expect(warnings.count() == 0, "a hit warned: " + warnings.text());
        expect(cache.get_or_build(key_of('x'), build).hit == coda::CacheHit::Built, "a miss was not built");
        expect(cache.get_or_build(key_of('y'), build).hit == coda::CacheHit::Built, "a miss was not built");
        expect(cache.get_or_build(key_of('x'), build).hit == coda::CacheHit::Memory, "a built miss was not kept");
        expect(builds == 2, "expected 2 builds, got " + std::to_string(builds));
        expect(warnings.count() == 1, "expected one warning for the misses, got: " + warnings.text());
        expect(warnings.text().find("read-only") != std::string::npos &&
                   warnings.text().find(dir.string()) != std::string::npos,
               "the warning does not say the cache is read-only: " + warnings.text());
        return found;
    });
    INFO(problems);
    CHECK(problems.empty());
    std::vector<fs::path> after;
    for (const auto& f : fs::directory_iterator(dir)) after.push_back(f.path());
    CHECK(after.size() == before.size());  // no lock file, temp file or entry was added
    fs::permissions(dir, fs::perms(0755));
}

TEST_CASE("clear waits for a build in progress elsewhere so that a key is never built twice at once", "[cache]") {
    Deadline deadline(60);
    coda::test::TempDir tmp("coda-cache");
    const fs::path dir = tmp.path();
    const std::string key = key_of('w');
    const fs::path lock_file = dir / (key + ".lock");
    const fs::path marker = tmp.path() / "second-build";

    // The compiler: a process in the middle of building the key, holding its lock until told to finish.
    int compiling[2], finish[2];
    REQUIRE(::pipe(compiling) == 0);
    REQUIRE(::pipe(finish) == 0);
    const pid_t compiler = ::fork();
    REQUIRE(compiler >= 0);
    if (compiler == 0) {
        ::alarm(30);
        ::close(compiling[0]);
        ::close(finish[1]);
        coda::KernelCache(dir, true).get_or_build(key, [&] {
            char c = 'c';
            if (::write(compiling[1], &c, 1) != 1 || ::read(finish[0], &c, 1) < 0) ::_exit(2);
            return make_entry("waited");
        });
        ::_exit(0);
    }
    ::close(compiling[1]);
    ::close(finish[0]);
    char c = 0;
    REQUIRE(::read(compiling[0], &c, 1) == 1);

    // A second process that will ask for the key once clear has started. It is forked before the clearing
    // thread opens any lock file: a child sharing that open file would share its flock too.
    int go[2];
    REQUIRE(::pipe(go) == 0);
    const pid_t second = ::fork();
    REQUIRE(second >= 0);
    if (second == 0) {
        ::alarm(30);
        ::close(finish[1]);  // only the parent may tell the compiler to finish
        ::close(go[1]);
        if (::read(go[0], &c, 1) != 1) ::_exit(2);
        coda::KernelCache(dir, true).get_or_build(key, [&] {
            write_bytes(marker, "built");
            return make_entry("waited");
        });
        ::_exit(0);
    }
    ::close(go[0]);

    coda::KernelCache cache(dir, true);
    std::atomic<bool> cleared{false};
    std::size_t removed = 0;
    std::thread clearer([&] {
        removed = cache.clear();
        cleared = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    // The second process must wait for the compiler too, clear or no clear.
    CHECK(::write(go[1], "g", 1) == 1);
    ::close(go[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    int status = 0;
    CHECK_FALSE(cleared);
    CHECK(fs::exists(lock_file));
    CHECK(::waitpid(second, &status, WNOHANG) == 0);
    CHECK_FALSE(fs::exists(marker));

    CHECK(::write(finish[1], "f", 1) == 1);  // the compiler publishes and lets go
    ::close(finish[1]);
    CHECK(::waitpid(compiler, &status, 0) == compiler);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    clearer.join();
    CHECK(::waitpid(second, &status, 0) == second);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    CHECK(removed == 1);  // the compiler's entry, removed after it was published
    ::close(compiling[0]);
}
