// The finalizer's host side without a GPU: how many threads share an element's partials (G) and the grid that
// gives every group of elements a warp.
#include <catch2/catch.hpp>

#include <climits>

#include "coda/kernel_abi.cuh"
#include "mainloop/finalize_program.hpp"

namespace coda {
namespace {

// The fill target of finalize_program.cpp: an H200's 132 SMs x 2048 threads.
constexpr long long kFill = 132 * 2048;
// Its cap on G: a warp's load reads G partial rows of 128 / G bytes, a 32-byte sector's worth at 4, half of one at 8.
constexpr int kMaxStrands = 8;
constexpr long long kWarpsPerBlock = kFinalizeThreads / kFinalizeWarpLanes;

bool power_of_two(int x) { return x > 0 && (x & (x - 1)) == 0; }

TEST_CASE("a finalizer splits an element's partials until the vector comes nearest to filling the GPU", "[mainloop]") {
    // One partial, or none: nothing to split.
    CHECK(finalize_strands(1, 1) == 1);
    CHECK(finalize_strands(16384, 1) == 1);
    CHECK(finalize_strands(1, 0) == 1);
    // Fewer partials than a warp: no more strands than the next power of two >= T.
    CHECK(finalize_strands(1, 2) == 2);
    CHECK(finalize_strands(1, 3) == 4);
    CHECK(finalize_strands(1, 5) == 8);
    CHECK(finalize_strands(1, 17) == 8);
    CHECK(finalize_strands(16384, 16) == 8);  // rms_finalize at d = 2048: 16 N-tiles of 128
    // A short vector with many partials: the cap, not a warp per element.
    CHECK(finalize_strands(1, 1000) == 8);
    CHECK(finalize_strands(2048, 128) == 8);  // dgamma_finalize: 2048 columns, 16384 rows in tiles of 128
    // ce_finalize (16384 rows, V = 32768 in tiles of 128): 16 x 16384 would be 0.97 of the target; the cap is 8.
    CHECK(finalize_strands(16384, 256) == 8);
    // The doubling stops once L * G reaches 2/3 of the target.
    CHECK(finalize_strands(kFill / 6, 256) == 4);      // 4 L = 2/3 of the target exactly
    CHECK(finalize_strands(kFill / 6 - 1, 256) == 8);  // just below it
    CHECK(finalize_strands(kFill / 4, 256) == 4);
    CHECK(finalize_strands(100003, 17) == 2);
    // A vector that fills 2/3 of the GPU alone keeps one thread per element.
    CHECK(finalize_strands(kFill, 256) == 1);
    CHECK(finalize_strands(1 << 20, 256) == 1);
    CHECK(finalize_strands(INT_MAX, 2) == 1);

    // Over a sweep: a power of two of at most a warp, within the cap of T, and the one nearest the target.
    for (long long l : {1LL, 7LL, 31LL, 33LL, 1000LL, 8191LL, 65536LL, 100003LL, kFill - 1, kFill, 1LL << 24})
        for (long long t : {0LL, 1LL, 2LL, 3LL, 5LL, 16LL, 31LL, 32LL, 33LL, 256LL, 4096LL}) {
            INFO("L = " << l << ", T = " << t);
            const int g = finalize_strands(l, t);
            CHECK(power_of_two(g));
            CHECK(g <= kMaxStrands);
            CHECK((g == 1 || g / 2 < t));
            CHECK((g == 1 || 3 * l * (g / 2) < 2 * kFill));
            CHECK((g == kMaxStrands || g >= t || 3 * l * g >= 2 * kFill));
        }
}

TEST_CASE("a finalizer's grid gives every group of 32 / G elements a warp, up to a cap", "[mainloop]") {
    // 8 warps of 32 lanes a block; a warp takes 32 / G consecutive elements.
    CHECK(finalize_blocks(1, 1) == 1);
    CHECK(finalize_blocks(1, 32) == 1);
    CHECK(finalize_blocks(16384, 1) == 64);      // one thread per element: L / 256 blocks
    CHECK(finalize_blocks(16384, 32) == 2048);   // a warp per element
    CHECK(finalize_blocks(2048, 32) == 256);
    CHECK(finalize_blocks(100003, 4) == 1563);   // 12501 warps of 8 elements, the last one short
    CHECK(finalize_blocks(257, 2) == 3);         // 17 warps of 16 elements, the last with one
    // Capped: the kernel's grid-stride loop takes the rest.
    CHECK(finalize_blocks(INT_MAX, 1) == 4096);
    CHECK(finalize_blocks(1 << 20, 32) == 4096);

    for (long long l : {1LL, 31LL, 33LL, 1000LL, 100003LL, kFill})
        for (int g = 1; g <= kFinalizeWarpLanes; g *= 2) {
            INFO("L = " << l << ", G = " << g);
            const long long per_warp = kFinalizeWarpLanes / g;
            const long long warps = static_cast<long long>(finalize_blocks(l, g)) * kWarpsPerBlock;
            CHECK((warps * per_warp >= l || finalize_blocks(l, g) == 4096));
            CHECK((warps - kWarpsPerBlock) * per_warp < l);  // no block without an element
        }
}

TEST_CASE("a tool may run finalizers at any G a warp can split into, and no other", "[mainloop]") {
    for (int g = 1; g <= kFinalizeWarpLanes; g *= 2) CHECK_NOTHROW(set_finalize_strands_override(g));
    for (int g : {0, 3, 12, 64, -8}) {
        INFO("G = " << g);
        CHECK_THROWS_WITH(set_finalize_strands_override(g), Catch::Contains("must be 1, 2, 4, 8, 16 or 32"));
    }
    CHECK_NOTHROW(set_finalize_strands_override(std::nullopt));
}

}  // namespace
}  // namespace coda
