// KernelCache: memory and disk hits, corrupt and truncated entries rebuilt with a warning, fallback to memory
// for an unusable directory, single-flight builds across threads and across forked processes, list and clear.
#include <catch2/catch.hpp>

#include "cache/kernel_cache.hpp"
#include "coda/error.hpp"
#include "support/temp_dir.hpp"
#include "util/log.hpp"

#include <fcntl.h>
#include <spdlog/sinks/ostream_sink.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
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
