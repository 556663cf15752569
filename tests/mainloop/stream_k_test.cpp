// When the Hopper mainloop shares its last rounds by k-tiles (stream_k_shares): the measured rule by default, and
// the process-wide override that tests and `coda bench gemm --stream-k-ab` use.
#include <catch2/catch.hpp>

#include "coda/hopper_rules.cuh"
#include "mainloop/stream_k_workspace.hpp"

namespace coda {
namespace {

struct Restore {
    ~Restore() { set_stream_k_override(std::nullopt); }
};

TEST_CASE("stream-K shares the last rounds only where it measured faster, unless told otherwise", "[mainloop]") {
    Restore restore;
    set_stream_k_override(StreamK::Auto);
    // Measured faster on an H200's 132 SMs (128 x 128 tiles): many rounds, the last at most half full.
    CHECK(stream_k_shares(128 * 32, 132, 64));   // 16384 x 4096 x 4096: 31 rounds and 4 tiles
    CHECK(stream_k_shares(64 * 44, 132, 32));    // 8192 x 5632 x 2048: 21 rounds and 44 tiles
    // Measured slower: few rounds.
    CHECK_FALSE(stream_k_shares(32 * 32, 132, 224));  // 4096 x 4096 x 14336: 7 rounds
    CHECK_FALSE(stream_k_shares(32 * 16, 132, 32));   // 4096 x 2048 x 2048: 3 rounds
    CHECK_FALSE(stream_k_shares(64 * 32, 132, 172));  // 8192 x 4096 x 11008: 15 rounds
    // No idle SMs to fill, a last round more than half full, or a single k-tile to cut at: whole tiles.
    CHECK_FALSE(stream_k_shares(132 * 30, 132, 64));
    CHECK_FALSE(stream_k_shares(132 * 30 + 100, 132, 64));
    CHECK_FALSE(stream_k_shares(132 * 30 + 4, 132, 1));

    set_stream_k_override(StreamK::Never);
    CHECK_FALSE(stream_k_shares(128 * 32, 132, 64));
    set_stream_k_override(StreamK::Always);
    CHECK(stream_k_shares(32 * 16, 132, 32));
    // Only kernels without a cluster take the workspace, and not cooperative ones with 128-row consumers.
    CHECK(hopper_rules::stream_k(1, 1, 128, true));
    CHECK(hopper_rules::stream_k(1, 1, 64, true));
    CHECK(hopper_rules::stream_k(1, 1, 128, false));
    CHECK_FALSE(hopper_rules::stream_k(1, 1, 256, false));
    CHECK_FALSE(hopper_rules::stream_k(2, 1, 128, true));
    CHECK_FALSE(hopper_rules::stream_k(1, 2, 128, true));
}

}  // namespace
}  // namespace coda
