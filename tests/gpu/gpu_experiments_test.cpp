// The Hopper mainloop's experiments (hopper_experiment, include/coda/kernel_config.hpp) against the CPU reference
// (fp64), each on the configs and graphs that take it: block_sum_pair, smem_scales and issue_turns, alone and together, on
// block-scaled FP8 GEMMs of one and two operand types, alone and in CTA pairs along M and N; one partial block,
// blocks of 128 with a partial last one, many blocks; and stream-K pieces that start mid-K.
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

std::uint64_t check(const Build& b, std::int64_t m, std::int64_t n, std::int64_t k, std::uint64_t seed) {
    INFO("graph " << b.graph.name() << " config " << b.options.config->to_text()
                  << fmt::format(" M={} N={} K={}", m, n, k));
    verify::CheckProblem p;
    p.m = m;
    p.n = n;
    p.k = k;
    p.seed = seed;
    require_pass(verify::check_on_device(Runtime::instance().compile(b.graph, b.options), p));
    return seed + 1;
}

}  // namespace

TEST_CASE("each Hopper experiment matches the reference on the kernels that take it", "[gpu][experiments]") {
    if (!on_hopper()) return;  // the Hopper mainloop's (its configs are refused elsewhere: kernel_config tests)
    namespace x = hopper_experiment;
    std::vector<Build> builds;
    for (const unsigned experiments : {x::kBlockSumPair, x::kSmemScales, x::kIssueTurns, x::kBlockSumPair | x::kSmemScales,
                                       x::kIssueTurns | x::kSmemScales, x::kAll})
        for (const auto& [cluster_m, cluster_n] : std::vector<std::pair<int, int>>{{1, 1}, {2, 1}, {1, 2}}) {
            HopperConfig config{128, 128, 6, Schedule::Cooperative, cluster_m, cluster_n};
            config.experiments = experiments;
            for (const Graph& g : {block_scaled_graph(DType::E4M3), block_scaled_graph(DType::E5M2, DType::E4M3)})
                builds.push_back({g, options_for(config)});
        }
    warm_in_parallel(builds);
    std::uint64_t seed = 4100;
    // Each kernel twice at a shape: a launch finds the barriers and scale slots as a fresh CTA does.
    for (const Build& b : builds)
        for (const auto& [m, n, k] :
             std::vector<std::array<std::int64_t, 3>>{{129, 130, 96}, {1000, 1000, 1008}, {512, 384, 4096}})
            for (int launch = 0; launch < 2; ++launch) seed = check(b, m, n, k, seed);
    // Stream-K pieces of a tile start mid-K: each reads (or has copied) the scales of its own k-blocks.
    set_stream_k_override(StreamK::Always);
    struct Restore {
        ~Restore() { set_stream_k_override(std::nullopt); }
    } restore;
    for (const Build& b : builds)
        if (b.options.config->hopper()->cluster_m * b.options.config->hopper()->cluster_n == 1)
            seed = check(b, 4731, 1000, 1024, seed);
}
