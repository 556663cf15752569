// Entry point of the GPU test suite. Without a usable GPU it exits with 77, which ctest reports as
// "skipped" (SKIP_RETURN_CODE), never as passed. Listing tests works anywhere (ctest discovery needs it).
// A case that needs another GPU skips itself (skip_unless, gpu_support.hpp); a run in which every case skipped
// (ctest runs one at a time) exits with 77 too, and a whole run ends with how many cases skipped.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>

#include "driver/cuda_driver.hpp"
#include "gpu/gpu_support.hpp"

namespace {

// Counts every case that ends, so that the skips can be told from the cases that ran for real.
struct CaseCounter : Catch::TestEventListenerBase {
    using TestEventListenerBase::TestEventListenerBase;
    void testCaseEnded(const Catch::TestCaseStats& stats) override {
        coda::test::skip_ledger().ran();
        TestEventListenerBase::testCaseEnded(stats);
    }
};

}  // namespace

CATCH_REGISTER_LISTENER(CaseCounter)

int main(int argc, char** argv) {
    bool listing = false;
    for (int i = 1; i < argc; ++i) listing = listing || std::strncmp(argv[i], "--list", 6) == 0;
    if (!listing && !coda::Driver::instance().available()) {
        std::printf("SKIPPED: no GPU: %s\n", coda::Driver::instance().unavailable_reason().c_str());
        return coda::test::kSkipExitCode;
    }
    const int result = Catch::Session().run(argc, argv);
    const coda::test::SkipLedger& ledger = coda::test::skip_ledger();
    if (ledger.cases_skipped() > 0) std::printf("%s\n", ledger.summary().c_str());
    return ledger.exit_code(result);
}
