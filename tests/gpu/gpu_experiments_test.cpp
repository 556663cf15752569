// The Hopper mainloop's experiments (hopper_experiment, include/coda/kernel_config.hpp) against the CPU reference
// (fp64), each on the configs and graphs that take it: ping-pong and cooperative tiles, BF16 and FP8 operands, tile
// inputs (the staged loader reads the dynamic order's feed), stream-K's shared rounds, block-scaled FP8. The dynamic
// tile order's counters are zeroed by each launch for the next: every kernel runs several launches in a row, and a
// bound launch (no workspace: the round-robin units, still fed).
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "coda/runtime.hpp"
#include "driver/cuda_driver.hpp"
#include "gpu/gpu_support.hpp"
#include "mainloop/stream_k_workspace.hpp"
#include "support/fp8_graphs.hpp"
#include "verify/device_check.hpp"

using namespace coda;
using namespace coda::test;

namespace {

bool on_hopper() {
    Driver& driver = Driver::instance();
    return driver.available() && driver.current_device().arch == "sm_90a";
}

// D = (acc * scale_a[row] * scale_b[col] + residual) in bf16: a row-wise FP8 recipe, or a BF16 GEMM whose scales
// are noise, with a tile input that the staging kernels load by TMA.
Graph scaled_residual(DType input) {
    Graph g = Graph::gemm(fmt::format("experiment_{}", to_string(input)), GemmSpec{input, Major::K, Major::K});
    Value scale = g.mul(g.row_input("scale_a", DType::F32), g.col_input("scale_b", DType::F32), "scale");
    Value y = g.add(g.mul(g.accumulator(), scale, "scaled"), g.tile_input("residual", DType::BF16), "y");
    g.store(y, "D", DType::BF16);
    return g;
}

// The same without the tile input.
Graph scaled(DType input) {
    Graph g = Graph::gemm(fmt::format("experiment_plain_{}", to_string(input)), GemmSpec{input, Major::K, Major::K});
    Value scale = g.mul(g.row_input("scale_a", DType::F32), g.col_input("scale_b", DType::F32), "scale");
    g.store(g.mul(g.accumulator(), scale, "scaled"), "D", DType::BF16);
    return g;
}

HopperConfig with(HopperConfig c, unsigned experiments) {
    c.experiments = experiments;
    return c;
}

// Each shape launched once, or with `again` > 0 that many more times and then once bound (fresh inputs and poisoned
// outputs each time): the dynamic order's counters must be back at zero after every launch.
std::uint64_t check(const Build& b, const std::vector<std::array<std::int64_t, 3>>& shapes, std::uint64_t seed,
                    int again) {
    const Kernel kernel = Runtime::instance().compile(b.graph, b.options);
    for (const auto& [m, n, k] : shapes)
        for (int i = 0; i <= again + (again > 0 ? 1 : 0); ++i) {
            INFO("graph " << b.graph.name() << " config " << b.options.config->to_text()
                          << fmt::format(" M={} N={} K={} launch {}", m, n, k, i));
            verify::CheckProblem p;
            p.m = m;
            p.n = n;
            p.k = k;
            p.seed = seed++;
            if (again > 0 && i == again + 1) p.path = verify::CheckProblem::Path::Bound;
            require_pass(verify::check_on_device(kernel, p));
        }
    return seed;
}

}  // namespace

TEST_CASE("each Hopper experiment matches the reference on the kernels that take it, launch after launch",
          "[gpu][experiments]") {
    if (!on_hopper()) return;  // the Hopper mainloop's (its configs are refused elsewhere: kernel_config tests)
    namespace x = hopper_experiment;
    const HopperConfig pingpong{128, 128, 6, Schedule::PingPong, 1};
    const HopperConfig cooperative{128, 128, 6, Schedule::Cooperative, 1};
    const HopperConfig wide{128, 256, 4, Schedule::Cooperative, 1};
    const HopperConfig pair{128, 128, 6, Schedule::PingPong, 2};
    std::vector<Build> builds;
    for (DType input : {DType::BF16, DType::E4M3})
        for (const Graph& g : {scaled(input), scaled_residual(input)}) {
            builds.push_back({g, options_for(with(pingpong, x::kEarlyTurn))});
            builds.push_back({g, options_for(with(pingpong, x::kL2Prefetch))});
            builds.push_back({g, options_for(with(pair, x::kL2Prefetch))});
            for (const HopperConfig& c : {pingpong, cooperative, wide})
                builds.push_back({g, options_for(with(c, x::kDynamicTiles))});
            builds.push_back({g, options_for(with(pingpong, x::kEarlyTurn | x::kL2Prefetch | x::kDynamicTiles))});
        }
    for (const Graph& g : {block_scaled_graph(DType::E4M3), block_scaled_graph(DType::E5M2, DType::E4M3)}) {
        builds.push_back({g, options_for(with(cooperative, x::kBlockSumPair))});
        builds.push_back({g, options_for(with(cooperative, x::kBlockSumPair | x::kL2Prefetch))});
        builds.push_back({g, options_for(with(cooperative, x::kDynamicTiles))});
    }
    warm_in_parallel(builds);
    // Ragged M and N with a partial last k-tile, and many k-tiles; the dynamic order also at few k-tiles over many
    // tiles (it hands out most of them), launch after launch and bound. Block-scaled: one partial block, and blocks of
    // 128 with a partial last one.
    std::uint64_t seed = 4100;
    for (const Build& b : builds) {
        const bool dynamic = (b.options.config->hopper()->experiments & x::kDynamicTiles) != 0;
        if (b.graph.spec().block_scales)
            seed = check(b, {{129, 130, 96}, {1000, 1000, 1008}}, seed, dynamic ? 2 : 0);
        else if (dynamic)
            seed = check(b, {{300, 264, 1040}, {2048, 2048, 256}}, seed, 2);
        else
            seed = check(b, {{300, 264, 1040}, {1024, 512, 4096}}, seed, 0);
    }
    // Stream-K's shared rounds after the dynamic units (and a Tail's CTA taking units until the counter passes them).
    set_stream_k_override(StreamK::Always);
    struct Restore {
        ~Restore() { set_stream_k_override(std::nullopt); }
    } restore;
    for (const Build& b : builds) {
        const HopperConfig& h = *b.options.config->hopper();
        if ((h.experiments & x::kDynamicTiles) == 0 || h.bn != 128) continue;
        seed = check(b, {{4731, 1000, 1024}}, seed, 1);
    }
}
