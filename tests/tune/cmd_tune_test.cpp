// coda tune as a user runs it: argument and name errors (no GPU needed), the clear error without a GPU, and
// with a GPU a one-shape run that records its winner in a private tuning file.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <vector>

#include "driver/cuda_driver.hpp"
#include "support/run_cli.hpp"
#include "support/temp_dir.hpp"
#include "tune/tuning_db.hpp"

namespace {

using Run = coda::test::CliRun;

Run run_tune(const std::string& arguments, const std::string& cache_dir) {
    return coda::test::run_cli("tune " + arguments, cache_dir, "CODA_TUNING_FILE= ");
}

}  // namespace

TEST_CASE("coda tune rejects bad arguments and names before it needs a GPU", "[tune][tools]") {
    coda::test::TempDir cache("coda-cli-tune");
    const std::string dir = cache.path().string();
    // Each: the arguments, and what the error must say. All fail with status 1.
    struct BadRun {
        const char* arguments;
        std::vector<const char*> says;
    };
    const std::vector<BadRun> cases = {
        {"", {"at least one block name or .coda file", "out_proj"}},
        {"frobnicate", {"'frobnicate' is neither a .coda file nor a block name", "gate_up_swiglu"}},
        {"rope_backward tools/graphs/rms_finalize.coda",
         {"skipping rope_backward", "skipping rms_finalize", "none of the given graphs is a GEMM epilogue"}},
        {"--m 4096 out_proj", {"--m, --n and --k go together", "N=0"}},
        {"--iters 0 out_proj", {"--iters"}},
        {"missing.coda", {"cannot read graph file 'missing.coda'"}},
        // --config texts are read before anything needs a GPU, and a graph after one stays a graph.
        {"--config 'hopper bm=128 pingpong' --config 'hopper bm=256 cooperativ' out_proj",
         {"kernel config 'hopper bm=256 cooperativ'", "'cooperativ' is not a field=value pair"}},
        {"--config 'hopper bm=128 pingpong' frobnicate", {"'frobnicate' is neither a .coda file nor a block name"}},
    };
    for (const BadRun& c : cases) {
        const Run r = run_tune(c.arguments, dir);
        INFO("coda tune " << c.arguments << "\n" << r.output);
        CHECK(r.status == 1);
        for (const char* text : c.says) CHECK_THAT(r.output, Catch::Contains(text));
    }
}

TEST_CASE("coda tune needs a GPU, and with one it records the fastest config", "[tune][tools]") {
    coda::test::TempDir cache("coda-cli-tune");
    const Run r = run_tune("--m 256 --n 512 --k 128 --iters 3 tools/graphs/out_proj.coda", cache.path().string());
    INFO(r.output);
    coda::Driver& driver = coda::Driver::instance();
    if (!driver.available()) {
        CHECK(r.status == 1);
        CHECK_THAT(r.output, Catch::Contains("coda tune needs a GPU"));
        return;
    }
    REQUIRE(r.status == 0);
    CHECK_THAT(r.output, Catch::Contains("out_proj  M=256 N=512 K=128  (shape class m256 n512 k128)") &&
                             Catch::Contains("<- fastest"));
    driver.ensure_context();
    const coda::TuningDb db = coda::TuningDb::load(cache.path() / "tuning.tsv");
    if (driver.current_device().arch == "sm_90a") {
        CHECK_THAT(r.output, Catch::Contains("recorded 1 tuned config"));
        REQUIRE(db.records().size() == 1);
        CHECK(db.records()[0].gpu == driver.current_device().name);
        CHECK(db.records()[0].shape_class == "m256 n512 k128");
    } else {
        CHECK_THAT(r.output, Catch::Contains("tuning has one candidate"));
        CHECK(db.records().empty());
    }
}

TEST_CASE("coda tune --config times the given configs, side by side or each alone (--solo), and records nothing",
          "[tune][tools]") {
    struct Mode {
        const char* flag;
        const char* says;
    };
    for (const Mode& mode : {Mode{"", "configs timed side by side in interleaved rounds of 3 launches"},
                             Mode{"--solo ", "each config timed alone, settled, twice in opposite orders (--solo)"}}) {
        INFO("mode: '" << mode.flag << "'");
        coda::test::TempDir cache("coda-cli-tune");
        const Run r = run_tune(std::string(mode.flag) +
                                   "--m 256 --n 512 --k 128 --iters 3 --config 'hopper bm=128 bn=128 pingpong' "
                                   "--config 'hopper bm=256 bn=128 stages=4 cooperative cluster_n=2' "
                                   "tools/graphs/out_proj.coda",
                               cache.path().string());
        INFO(r.output);
        coda::Driver& driver = coda::Driver::instance();
        if (!driver.available()) {
            CHECK(r.status == 1);
            CHECK_THAT(r.output, Catch::Contains("coda tune needs a GPU"));
            continue;
        }
        driver.ensure_context();
        if (driver.current_device().arch != "sm_90a") {
            // Hopper configs do not build for another arch: both are reported skipped, and nothing ran.
            CHECK(r.status == 1);
            CHECK_THAT(r.output, Catch::Contains("SKIPPED") && Catch::Contains("no candidate ran"));
            continue;
        }
        REQUIRE(r.status == 0);
        CHECK_THAT(r.output, Catch::Contains("timing the 2 given configs; recording nothing") &&
                                 Catch::Contains(mode.says) &&
                                 Catch::Contains("hopper bm=128 bn=128 bk=64 stages=6 pingpong cluster=1") &&
                                 Catch::Contains("hopper bm=256 bn=128 bk=64 stages=4 cooperative cluster=1 cluster_n=2") &&
                                 Catch::Contains("<- fastest"));
        CHECK_THAT(r.output, !Catch::Contains("recorded"));
        CHECK(coda::TuningDb::load(cache.path() / "tuning.tsv").records().empty());
    }
}
