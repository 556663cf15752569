// coda tune as a user runs it: argument and name errors (no GPU needed), the clear error without a GPU, and
// with a GPU a one-shape run that records its winner in a private tuning file.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>

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

    Run r = run_tune("", dir);
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Catch::Contains("at least one block name or .coda file") && Catch::Contains("out_proj"));

    r = run_tune("frobnicate", dir);
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Catch::Contains("'frobnicate' is neither a .coda file nor a block name") &&
                             Catch::Contains("gate_up_swiglu"));

    r = run_tune("rope_backward tools/graphs/rms_finalize.coda", dir);
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Catch::Contains("skipping rope_backward") && Catch::Contains("skipping rms_finalize") &&
                             Catch::Contains("none of the given graphs is a GEMM epilogue"));

    r = run_tune("--m 4096 out_proj", dir);
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Catch::Contains("--m, --n and --k go together") && Catch::Contains("N=0"));

    r = run_tune("--iters 0 out_proj", dir);
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Catch::Contains("--iters"));

    r = run_tune("missing.coda", dir);
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Catch::Contains("cannot read graph file 'missing.coda'"));

    // --config texts are read before anything needs a GPU, and a graph after one stays a graph.
    r = run_tune("--config 'hopper bm=128 pingpong' --config 'hopper bm=256 cooperativ' out_proj", dir);
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Catch::Contains("kernel config 'hopper bm=256 cooperativ'") &&
                             Catch::Contains("'cooperativ' is not a field=value pair"));
    r = run_tune("--config 'hopper bm=128 pingpong' frobnicate", dir);
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Catch::Contains("'frobnicate' is neither a .coda file nor a block name"));
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
