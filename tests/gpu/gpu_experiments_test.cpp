// The Hopper mainloop's experiments (hopper_experiment, include/coda/kernel_config.hpp) against the CPU reference
// (fp64), each on the configs and graphs that take it: block_sum_pair on block-scaled FP8 GEMMs of one and two
// operand types, one partial block and blocks of 128 with a partial last one.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "coda/runtime.hpp"
#include "driver/cuda_driver.hpp"
#include "gpu/gpu_support.hpp"
#include "support/fp8_graphs.hpp"
#include "verify/device_check.hpp"

using namespace coda;
using namespace coda::test;

namespace {

bool on_hopper() {
    Driver& driver = Driver::instance();
    return driver.available() && driver.current_device().arch == "sm_90a";
}

}  // namespace

TEST_CASE("each Hopper experiment matches the reference on the kernels that take it", "[gpu][experiments]") {
    if (!on_hopper()) return;  // the Hopper mainloop's (its configs are refused elsewhere: kernel_config tests)
    namespace x = hopper_experiment;
    HopperConfig pair{128, 128, 6, Schedule::Cooperative, 1};
    pair.experiments = x::kBlockSumPair;
    std::vector<Build> builds;
    for (const Graph& g : {block_scaled_graph(DType::E4M3), block_scaled_graph(DType::E5M2, DType::E4M3)})
        builds.push_back({g, options_for(pair)});
    warm_in_parallel(builds);
    std::uint64_t seed = 4100;
    for (const Build& b : builds)
        for (const auto& [m, n, k] : std::vector<std::array<std::int64_t, 3>>{{129, 130, 96}, {1000, 1000, 1008}}) {
            INFO("graph " << b.graph.name() << " config " << b.options.config->to_text()
                          << fmt::format(" M={} N={} K={}", m, n, k));
            verify::CheckProblem p;
            p.m = m;
            p.n = n;
            p.k = k;
            p.seed = seed++;
            require_pass(verify::check_on_device(Runtime::instance().compile(b.graph, b.options), p));
        }
}
