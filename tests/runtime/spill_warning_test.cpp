// A kernel that spills registers is reported when it is built: a warning through the runtime's logger that names
// the kernel, its config and what to do (issue: spills on the Hopper mainloop with column reductions).
#include <catch2/catch.hpp>

#include <functional>

#include <spdlog/sinks/ringbuffer_sink.h>

#include "cache/kernel_cache.hpp"
#include "mainloop/mainloops.hpp"
#include "runtime/pipeline.hpp"
#include "support/temp_dir.hpp"
#include "util/log.hpp"

namespace coda {
namespace {

// Two full-width column reductions: 2 x 64 floats of state a thread at bn = 256, beside 128 accumulators.
Graph two_col_reductions() {
    Graph g = Graph::gemm("two_col_reductions");
    Value acc = g.accumulator();
    g.store(acc, "y", DType::BF16);
    g.reduce_col(acc, ReduceOp::Sum, "col_sum");
    g.reduce_col(acc, ReduceOp::SumSq, "col_sumsq");
    return g;
}

std::vector<std::string> warnings_while(const std::function<void()>& work) {
    auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
    sink->set_level(spdlog::level::warn);
    const auto log = logger("coda.runtime");
    log->sinks().push_back(sink);
    const auto level = log->level();
    log->set_level(spdlog::level::warn);
    work();
    log->sinks().pop_back();
    log->set_level(level);
    return sink->last_formatted();
}

TEST_CASE("a kernel that spills is reported once when it is built, with what to do", "[runtime]") {
    test::TempDir dir("coda-spills");
    KernelCache cache(dir.path(), false);
    const Graph g = two_col_reductions();
    const std::optional<KernelConfig> wide = HopperConfig{128, 256, 4, Schedule::Cooperative, 1};
    const BuildTarget target{"sm_90a", &mainloop_for(g, wide, "sm_90a"), wide};
    int spills = 0;
    const auto warned = warnings_while([&] {
        const BuiltKernel built = build_kernel(g, target, cache);
        for (const ResourceUsage& u : built.cached.entry->resources)
            if (u.function == built.cached.entry->kernel_name) spills = u.spill_store_bytes + u.spill_load_bytes;
    });
    REQUIRE(spills > 0);
    REQUIRE(warned.size() == 1);
    CHECK_THAT(warned[0], Catch::Contains("two_col_reductions") && Catch::Contains("bn=256") &&
                              Catch::Contains("spills " + std::to_string(spills) + " bytes") &&
                              Catch::Contains("runs correctly") && Catch::Contains("cooperative"));
    // A memory hit was reported before.
    CHECK(warnings_while([&] { build_kernel(g, target, cache); }).empty());
    // The default config keeps the state in registers: no warning.
    const std::optional<KernelConfig> narrow = HopperConfig{};
    const BuildTarget fits{"sm_90a", &mainloop_for(g, narrow, "sm_90a"), narrow};
    CHECK(warnings_while([&] { build_kernel(g, fits, cache); }).empty());
}

}  // namespace
}  // namespace coda
