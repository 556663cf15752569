// CODA_RECORD: a process records every graph it builds with its arch and config, and `coda warm` of the recorded
// files on another machine builds exactly the same kernels (the same cache keys).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "support/run_cli.hpp"
#include "support/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;

// The 64-character keys `coda cache list` prints.
std::set<std::string> keys_of(const std::string& listing) {
    std::set<std::string> keys;
    const std::regex key("^([0-9a-f]{64})  ");
    std::istringstream lines(listing);
    for (std::string line; std::getline(lines, line);)
        if (std::smatch m; std::regex_search(line, m, key)) keys.insert(m[1]);
    return keys;
}

std::string read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

TEST_CASE("CODA_RECORD's files make coda warm build the kernels a process built, for its arch and config", "[tools]") {
    coda::test::TempDir tmp("coda-record");
    const fs::path record = tmp.path() / "record", job = tmp.path() / "job-cache", build = tmp.path() / "build-cache";
    const std::string env = "CODA_RECORD='" + record.string() + "' ";
    // The "training job": two finalizers for sm_90a, and out-proj with a config it chose, for sm_80 and sm_90a.
    const auto job_run = [&](const std::string& args) {
        const coda::test::CliRun r = coda::test::run_cli(args, job.string(), env);
        INFO(r.output);
        REQUIRE(r.status == 0);
    };
    job_run("warm --arch sm_90a tools/graphs/rms_finalize.coda tools/graphs/ce_finalize.coda");
    job_run("warm --arch sm_90a --config 'hopper bm=128 bn=256 cooperative' tools/graphs/out_proj.coda");
    job_run("warm --arch sm_80 tools/graphs/out_proj.coda");
    job_run("warm --arch sm_90a tools/graphs/rms_finalize.coda");  // a graph built again is recorded once

    std::vector<fs::path> files;
    for (const auto& f : fs::directory_iterator(record)) files.push_back(f.path());
    REQUIRE(files.size() == 4);  // one file per process
    std::string all;
    for (const fs::path& f : files) all += read(f);
    CHECK_THAT(all, Catch::Contains("target arch=sm_90a config=hopper bm=128 bn=256 bk=64 stages=6 cooperative "
                                    "cluster=1\n") &&
                        Catch::Contains("target arch=sm_80 config=portable bm=128 bn=128 bk=32 wm=2 wn=2 stages=4\n") &&
                        Catch::Contains("graph rms_finalize finalize\n") && Catch::Contains("target arch=sm_90a\n"));

    // On the build machine: warm the recorded files into an empty cache; the keys are the job's.
    std::string args = "warm -j 2";
    for (const fs::path& f : files) args += " " + f.string();
    const coda::test::CliRun warmed = coda::test::run_cli(args, build.string());
    INFO(warmed.output);
    REQUIRE(warmed.status == 0);
    CHECK_THAT(warmed.output, Catch::Contains("5 kernels for sm_80, sm_90a: 4 compiled"));
    const std::set<std::string> job_keys = keys_of(coda::test::run_cli("cache list", job.string()).output);
    CHECK(job_keys.size() == 4);
    CHECK(keys_of(coda::test::run_cli("cache list", build.string()).output) == job_keys);
}

TEST_CASE("a bad target line is an error with the file and line", "[tools]") {
    coda::test::TempDir tmp("coda-record-bad");
    const fs::path file = tmp.path() / "bad.coda";
    std::ofstream(file) << "graph r finalize\n%p = partials sum\n%o = store f32 %p\ntarget arch=sm_90a config=hopper "
                           "bm=abc\n";
    const coda::test::CliRun r = coda::test::run_cli("warm " + file.string(), (tmp.path() / "c").string());
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Catch::Contains(file.string() + ":4:") && Catch::Contains("kernel config 'hopper bm=abc'"));
}
