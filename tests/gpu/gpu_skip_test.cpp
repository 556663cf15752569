// The suite's own check of skip_unless: a case that skips ends the run with exit code 77 and its SKIPPED line.
// Hidden ([.]), so that no whole run counts it; a CPU test (tests/reference/skip_ledger_test.cpp) runs it by tag.
#include <catch2/catch.hpp>

#include "gpu/gpu_support.hpp"

using namespace coda::test;

TEST_CASE("skip_unless ends a case as skipped, never passed", "[.][skip_self_test]") {
    CHECK_FALSE(skip_unless(true, "a condition that holds skips nothing"));
    if (skip_unless(false, "the suite's own check of skipping")) return;
    FAIL("skip_unless(false, ...) returned false");
}
