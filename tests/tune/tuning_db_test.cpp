// The tuning database: shape classes, the file's round trip (write, reload, replace), corrupt lines skipped with
// a warning, concurrent writers, the in-memory copy that follows the file, and CODA_TUNING_FILE.
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "coda/error.hpp"
#include "config/settings.hpp"
#include "support/temp_dir.hpp"
#include "tune/tuning_db.hpp"

namespace {

using coda::TuningDb;
using coda::TuningRecord;

const coda::KernelConfig kBig = coda::HopperConfig{128, 256, 4, coda::Schedule::Cooperative, 1};
const coda::KernelConfig kSmall = coda::HopperConfig{128, 128, 6, coda::Schedule::Cooperative, 1};

TuningRecord record(const std::string& gpu, const std::string& hash, const std::string& cls,
                    const coda::KernelConfig& config, double ms = 1.5) {
    return TuningRecord{gpu, hash, cls, config, ms};
}

std::string read_all(const std::filesystem::path& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// Captures what the "coda.tune" logger prints while it lives; afterwards coda creates its default logger again.
class CapturedLog {
public:
    CapturedLog() {
        spdlog::drop("coda.tune");
        auto logger = std::make_shared<spdlog::logger>("coda.tune", std::make_shared<spdlog::sinks::ostream_sink_mt>(out_));
        logger->set_level(spdlog::level::warn);
        spdlog::register_logger(logger);
    }
    ~CapturedLog() { spdlog::drop("coda.tune"); }
    std::string text() const { return out_.str(); }

private:
    std::ostringstream out_;
};

}  // namespace

TEST_CASE("shape_class rounds each dimension up to a power of two, and unknown shapes are 'any'", "[tune]") {
    CHECK(coda::shape_class({16384, 4096, 4096}) == "m16384 n4096 k4096");
    CHECK(coda::shape_class({4096, 6144, 4096}) == "m4096 n8192 k4096");
    CHECK(coda::shape_class({4096, 14336, 4096}) == "m4096 n16384 k4096");
    CHECK(coda::shape_class({4097, 2050, 72}) == "m8192 n4096 k128");
    CHECK(coda::shape_class({1, 2, 3}) == "m1 n2 k4");
    CHECK(coda::shape_class({}) == "any");
    CHECK(coda::shape_class({0, 4096, 4096}) == "any");
    CHECK(coda::shape_class({4096, 4096, -1}) == "any");
}

TEST_CASE("tuning records round-trip through the file, and a later record for a key replaces the earlier", "[tune]") {
    coda::test::TempDir dir("coda-tune-db");
    const auto path = dir.path() / "nested" / "tuning.tsv";  // the directory is created on the first write
    CHECK(TuningDb::load(path).records().empty());

    coda::record_tuning(path, record("NVIDIA H200", "0123456789abcdef", "m4096 n4096 k4096", kBig, 0.25));
    coda::record_tuning(path, record("NVIDIA H200", "0123456789abcdef", "m16384 n4096 k4096", kSmall, 0.75));
    coda::record_tuning(path, record("NVIDIA H100 80GB HBM3", "0123456789abcdef", "m4096 n4096 k4096", kSmall));
    TuningDb db = TuningDb::load(path);
    REQUIRE(db.records().size() == 3);
    const TuningRecord* r = db.find("NVIDIA H200", "0123456789abcdef", "m4096 n4096 k4096");
    REQUIRE(r != nullptr);
    CHECK(r->config == kBig);
    CHECK(r->median_ms == Approx(0.25));
    CHECK(db.find("NVIDIA H200", "0123456789abcdef", "m16384 n4096 k4096")->config == kSmall);
    CHECK(db.find("NVIDIA H200", "fedcba9876543210", "m4096 n4096 k4096") == nullptr);
    CHECK(db.has("NVIDIA H200", "m16384 n4096 k4096"));
    CHECK_FALSE(db.has("NVIDIA H200", "m2048 n2048 k2048"));

    coda::record_tuning(path, record("NVIDIA H200", "0123456789abcdef", "m4096 n4096 k4096", kSmall, 0.2));
    db = TuningDb::load(path);
    CHECK(db.records().size() == 3);
    CHECK(db.find("NVIDIA H200", "0123456789abcdef", "m4096 n4096 k4096")->config == kSmall);
    CHECK(db.records()[0].shape_class == "m4096 n4096 k4096");  // replaced in place
    const std::string text = read_all(path);
    CHECK_THAT(text, Catch::StartsWith("# coda tuning database"));
    CHECK_THAT(text, Catch::Contains("NVIDIA H200\t0123456789abcdef\tm4096 n4096 k4096\thopper bm=128 bn=128 bk=64 "
                                     "stages=6 cooperative cluster=1\t0.2\n"));
    CHECK_FALSE(std::filesystem::exists(path.parent_path() / (".tuning.tsv." + std::to_string(::getpid()) + ".tmp")));

    // In a file edited by hand, the last line for a key wins.
    const TuningDb parsed = TuningDb::parse(
        coda::format_tuning_line(record("G", "0123456789abcdef", "any", kBig)) + "\n" +
            coda::format_tuning_line(record("G", "0123456789abcdef", "any", coda::KernelConfig(coda::PortableConfig{}))) + "\r\n",
        "hand.tsv");
    REQUIRE(parsed.records().size() == 1);
    CHECK(parsed.records()[0].config == coda::KernelConfig(coda::PortableConfig{}));
}

TEST_CASE("corrupt tuning lines are skipped with a warning naming the file and line", "[tune]") {
    coda::test::TempDir dir("coda-tune-db");
    const auto path = dir.path() / "tuning.tsv";
    const std::string good = coda::format_tuning_line(record("NVIDIA H200", "0123456789abcdef", "any", kBig));
    std::ofstream(path) << "# comment\n\n"
                        << good << "\n"
                        << "NVIDIA H200\t0123456789abcdef\tany\n"                                      // line 4
                        << "NVIDIA H200\tnot-a-hash\tany\tbm=128 bn=128 bk=32 wm=2 wn=2 stages=4\t1\n"  // line 5
                        << "NVIDIA H200\t0123456789abcdef\tany\thopper bm=128 bn=256 frob=1\t1\n"        // line 6
                        << "NVIDIA H200\t0123456789abcdef\tany\thopper bm=96 bn=96 bk=64 stages=3 pingpong cluster=1\t1\n"
                        << "NVIDIA H200\t0123456789abcdef\tm4096 n4096\tbm=128 bn=128 bk=32 wm=2 wn=2 stages=4\t1\n"
                        << "NVIDIA H200\t0123456789abcdef\tm3000 n4096 k4096\tbm=128 bn=128 bk=32 wm=2 wn=2 stages=4\t1\n"
                        << "NVIDIA H200\t0123456789abcdef\tany\tbm=128 bn=128 bk=32 wm=2 wn=2 stages=4\tfast\n"
                        << "\t0123456789abcdef\tany\tbm=128 bn=128 bk=32 wm=2 wn=2 stages=4\t1\n"
                        << "\x01\x02\xff garbage";
    std::string warnings;
    {
        CapturedLog log;
        const TuningDb db = TuningDb::load(path);
        REQUIRE(db.records().size() == 1);
        CHECK(db.records()[0].config == kBig);
        warnings = log.text();
    }
    INFO(warnings);
    CHECK_THAT(warnings, Catch::Contains(path.string() + ":4: skipping a corrupt tuning record: 3 tab-separated fields"));
    CHECK_THAT(warnings, Catch::Contains(":5:") && Catch::Contains("not-a-hash"));
    CHECK_THAT(warnings, Catch::Contains(":6:") && Catch::Contains("frob"));
    CHECK_THAT(warnings, Catch::Contains(":7:") && Catch::Contains("not one that coda tune times"));
    CHECK_THAT(warnings, Catch::Contains(":8:") && Catch::Contains("'m4096 n4096'"));
    CHECK_THAT(warnings, Catch::Contains("skipped 4 more corrupt tuning records"));

    // The next write keeps the good record and drops the corrupt lines.
    {
        CapturedLog quiet;
        coda::record_tuning(path, record("NVIDIA H200", "0123456789abcdef", "m4096 n4096 k4096", kSmall));
    }
    const TuningDb rewritten = TuningDb::load(path);
    CHECK(rewritten.records().size() == 2);
    CHECK_THAT(read_all(path), !Catch::Contains("garbage"));
}

TEST_CASE("a tuning file that cannot be written is a coda::Error naming it", "[tune]") {
    coda::test::TempDir dir("coda-tune-db");
    std::ofstream(dir.path() / "plain-file") << "x";
    const auto path = dir.path() / "plain-file" / "tuning.tsv";
    CHECK_THROWS_AS(coda::record_tuning(path, record("G", "0123456789abcdef", "any", kBig)), coda::Error);
    CHECK_THROWS_WITH(coda::record_tuning(path, record("G", "0123456789abcdef", "any", kBig)),
                      Catch::Contains(path.string()) && Catch::Contains("CODA_TUNING_FILE"));
}

TEST_CASE("concurrent writers of one tuning file lose no record", "[tune]") {
    coda::test::TempDir dir("coda-tune-db");
    const auto path = dir.path() / "tuning.tsv";
    constexpr int kWriters = 6, kEach = 5;
    std::vector<std::thread> threads;
    for (int w = 0; w < kWriters; ++w)
        threads.emplace_back([&, w] {
            for (int i = 0; i < kEach; ++i)
                coda::record_tuning(path, record("GPU " + std::to_string(w), "0123456789abcdef",
                                                 coda::shape_class({1LL << i, 4096, 4096}), kBig));
        });
    for (auto& t : threads) t.join();
    CHECK(TuningDb::load(path).records().size() == kWriters * kEach);
}

TEST_CASE("the watched tuning database reloads when its file changes, and only looks at it now and then", "[tune]") {
    coda::test::TempDir dir("coda-tune-db");
    const auto path = dir.path() / "tuning.tsv";
    coda::TuningDbWatcher always(path, std::chrono::seconds(0));
    coda::TuningDbWatcher hourly(path, std::chrono::hours(1));
    CHECK(always.current()->records().empty());
    CHECK(hourly.current()->records().empty());
    const auto before = always.current();
    CHECK(always.current() == before);  // unchanged file: the same object, nothing re-read

    coda::record_tuning(path, record("G", "0123456789abcdef", "any", kBig));
    REQUIRE(always.current()->records().size() == 1);
    CHECK(hourly.current()->records().empty());  // not looked at again within the interval

    coda::record_tuning(path, record("G", "0123456789abcdef", "any", kSmall));
    REQUIRE(always.current()->find("G", "0123456789abcdef", "any") != nullptr);
    CHECK(always.current()->find("G", "0123456789abcdef", "any")->config == kSmall);

    std::filesystem::remove(path);
    CHECK(always.current()->records().empty());
}

TEST_CASE("CODA_TUNING_FILE names the tuning file, which by default lives in the cache directory", "[tune][config]") {
    std::map<std::string, std::optional<std::string>> saved;
    for (const char* name : {"CODA_CACHE_DIR", "CODA_TUNING_FILE"}) {
        const char* v = ::getenv(name);
        saved[name] = v ? std::optional<std::string>(v) : std::nullopt;
    }
    ::setenv("CODA_CACHE_DIR", "/some/cache", 1);
    ::unsetenv("CODA_TUNING_FILE");
    CHECK(coda::Settings::from_environment().tuning_file == std::filesystem::path("/some/cache/tuning.tsv"));
    ::setenv("CODA_TUNING_FILE", "/elsewhere/tuned.tsv", 1);
    CHECK(coda::Settings::from_environment().tuning_file == std::filesystem::path("/elsewhere/tuned.tsv"));
    ::setenv("CODA_TUNING_FILE", "relative.tsv", 1);
    CHECK(coda::Settings::from_environment().tuning_file == std::filesystem::current_path() / "relative.tsv");
    for (const auto& [name, value] : saved) {
        if (value) ::setenv(name.c_str(), value->c_str(), 1);
        else ::unsetenv(name.c_str());
    }
}
