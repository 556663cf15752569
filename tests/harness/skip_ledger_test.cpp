// The GPU suite's skips (tests/support/skip_ledger.hpp, tests/gpu/gpu_main.cpp) checked without a GPU: the exit
// code and the lines a run prints, and the built coda_gpu_tests binary running its own skipping case, which must
// exit with 77 (ctest's "skipped") here and on any GPU.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "driver/cuda_driver.hpp"
#include "support/skip_ledger.hpp"

namespace coda::test {
namespace {

TEST_CASE("a run whose every case skipped exits as skipped, never as passed", "[skip]") {
    SkipLedger ledger;
    CHECK(ledger.exit_code(0) == 0);  // nothing ran: the framework's result stands
    ledger.ran();
    ledger.skipped("needs Hopper", "needs an sm_90a device");
    CHECK(ledger.exit_code(0) == kSkipExitCode);
    CHECK(ledger.exit_code(3) == 3);  // a failure stays one
    ledger.ran();
    CHECK(ledger.exit_code(0) == 0);  // one case ran for real
    ledger.skipped("needs Hopper", "again, from another section");
    CHECK(ledger.cases_skipped() == 1);
    CHECK(ledger.summary() == "1 of 2 test cases skipped, not passed:\n  needs Hopper: needs an sm_90a device");
    CHECK(SkipLedger::line("a case", "why") == "SKIPPED: a case: why");
    CHECK(SkipLedger().summary().empty());
}

TEST_CASE("coda_gpu_tests exits with 77 for a case that skips itself", "[skip]") {
#ifndef CODA_GPU_TESTS_PATH
    FAIL("this build has no coda_gpu_tests (tests/CMakeLists.txt)");
#else
    const std::filesystem::path binary = CODA_GPU_TESTS_PATH;
    INFO(binary.string());
    if (!std::filesystem::exists(binary)) FAIL("coda_gpu_tests is not built: build that target too");
    FILE* pipe = popen(("'" + binary.string() + "' '[skip_self_test]' 2>&1").c_str(), "r");
    REQUIRE(pipe != nullptr);
    std::string output;
    char buffer[4096];
    for (std::size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
    const int raw = pclose(pipe);
    INFO(output);
    REQUIRE(WIFEXITED(raw));
    CHECK(WEXITSTATUS(raw) == kSkipExitCode);
    if (Driver::instance().available()) {
        CHECK_THAT(output, Catch::Contains("SKIPPED: skip_unless ends a case as skipped, never passed: the suite's "
                                           "own check of skipping") &&
                               Catch::Contains("1 of 1 test cases skipped, not passed"));
    } else {
        CHECK_THAT(output, Catch::StartsWith("SKIPPED: no GPU"));
    }
#endif
}

}  // namespace
}  // namespace coda::test
