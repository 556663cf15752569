// Promoted FP8 accumulation (GemmSpec::accumulation = Promoted) on the Hopper mainloop against the CPU reference
// (fp64): per-tensor GEMMs whose 128-k blocks are added into f32 one at a time, held to f32's tolerances on ragged and
// random shapes, every config coda tune may time for them and stream-K; and the reason it exists, measured: at
// K = 16384 with operands of one sign, whose sums grow, fast accumulation loses bits that promotion keeps.
#include <catch2/catch.hpp>

#include <array>
#include <random>

#include <fmt/format.h>

#include "coda/blocks.hpp"
#include "coda/runtime.hpp"
#include "mainloop/hopper.hpp"
#include "mainloop/stream_k_workspace.hpp"
#include "verify/device_check.hpp"
#include "verify/host_data.hpp"
#include "gpu/gpu_support.hpp"
#include "support/fp8_graphs.hpp"

using namespace coda;
using namespace coda::test;

namespace {

const GemmSpec kWgradSpec{DType::E5M2, Major::K, Major::K, DType::E4M3};

GemmSpec with(GemmSpec spec, Accumulation accumulation) {
    spec.accumulation = accumulation;
    return spec;
}

// Per-tensor e4m3 in f32 (where f32's tolerance sees what fast accumulation loses) and bf16, and the e5m2 x e4m3
// weight gradient added into an f32 buffer.
std::vector<Graph> promoted_graphs() {
    return {tensorwise_graph(DType::E4M3, Accumulation::Promoted, DType::F32),
            tensorwise_graph(DType::E4M3, Accumulation::Promoted, DType::BF16),
            blocks::wgrad_fp8_accumulate(with(kWgradSpec, Accumulation::Promoted))};
}

verify::CheckReport check(const Build& b, std::int64_t m, std::int64_t n, std::int64_t k, std::uint64_t seed) {
    verify::CheckProblem p;
    p.m = m;
    p.n = n;
    p.k = k;
    p.seed = seed;
    return verify::check_on_device(Runtime::instance().compile(b.graph, b.options), p);
}

// Logical operands of one sign (uniform in [0.5, 1.5], rounded to their FP8 type): every partial sum grows with k.
void give_positive_operands(verify::CheckProblem& p, const GemmSpec& spec, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    p.given["A"] = verify::random_values(rng, static_cast<std::size_t>(p.m * p.k), spec.input,
                                         verify::Distribution::Positive);
    p.given["B"] = verify::random_values(rng, static_cast<std::size_t>(p.k * p.n), spec.b_input(),
                                         verify::Distribution::Positive);
}

}  // namespace

TEST_CASE("promoted FP8 GEMMs match the reference with f32 tolerances: ragged and random shapes, every config coda "
          "tune may time, stream-K",
          "[gpu][fp8]") {
    if (skip_unless_hopper("FP8 operands need the Hopper mainloop (a CPU test checks the portable one's error)"))
        return;
    std::vector<Build> builds;
    for (const Graph& g : promoted_graphs()) {
        for (const NamedConfig& named : hopper_mainloop().candidates_for(g, "sm_90a"))
            builds.push_back({g, options_for(named.config)});
        HopperConfig direct{128, 128, 6, Schedule::Cooperative, 1};
        direct.direct = true;
        builds.push_back({g, options_for(direct)});
    }
    warm_in_parallel(builds);
    // K: under one k-block, a tail of 16 past whole k-blocks, many k-blocks; M and N ragged (N = 130: a 128 x 256
    // tile's second block past N). Then random shapes: any M, even N, K a multiple of 16 (TMA's 16-byte rows), small
    // enough for the fp64 reference.
    std::vector<std::array<std::int64_t, 3>> shapes = {{300, 264, 96}, {257, 1000, 1040}, {129, 130, 4096}};
    std::mt19937_64 rng(1400);
    std::uniform_int_distribution<std::int64_t> rows(1, 600), pairs(1, 300), k16(1, 96);
    for (int i = 0; i < 3; ++i) shapes.push_back({rows(rng), 2 * pairs(rng), 16 * k16(rng)});
    std::uint64_t seed = 1410;
    for (const Build& b : builds)
        for (const auto& [m, n, k] : shapes) {
            INFO("graph " << b.graph.name() << " config " << b.options.config->to_text()
                          << fmt::format(" M={} N={} K={}", m, n, k));
            require_pass(check(b, m, n, k, seed++));
        }
    // Stream-K pieces of a tile start mid-K, each from a fresh block sum.
    set_stream_k_override(StreamK::Always);
    struct Restore {
        ~Restore() { set_stream_k_override(std::nullopt); }
    } restore;
    for (const Graph& g : promoted_graphs())
        for (const HopperConfig& c : {HopperConfig{128, 128, 6, Schedule::Cooperative, 1},
                                      HopperConfig{128, 256, 4, Schedule::Cooperative, 1}}) {
            INFO("stream-K: graph " << g.name() << " config " << KernelConfig(c).to_text());
            require_pass(check(Build{g, options_for(c)}, 4731, 1000, 1024, seed++));
        }
}

TEST_CASE("promoted FP8 accumulation is at least 4x closer to fp64 than fast accumulation at K = 16384 with operands "
          "of one sign",
          "[gpu][fp8]") {
    if (skip_unless_hopper("FP8 operands need the Hopper mainloop")) return;
    // Fast (cuBLAS's use_fast_accum=True) against promoted on the same tile config, the promoted one's default, so
    // that the two differ only in how their sums are kept. f32 outputs: bf16 would round both errors away.
    struct Pair {
        Graph fast, promoted;
    };
    const Pair pairs[] = {{tensorwise_graph(DType::E4M3, Accumulation::Fast, DType::F32),
                           tensorwise_graph(DType::E4M3, Accumulation::Promoted, DType::F32)},
                          {blocks::wgrad_fp8_accumulate(kWgradSpec),
                           blocks::wgrad_fp8_accumulate(with(kWgradSpec, Accumulation::Promoted))}};
    constexpr double kPromotedBound = 1e-3;  // f32's tolerance in verify::check_on_device
    constexpr double kMinRatio = 4;
    std::uint64_t seed = 1450;
    for (const Pair& pair : pairs) {
        verify::CheckProblem p;
        p.m = 256;
        p.n = 256;
        p.k = 16384;
        p.seed = seed++;
        give_positive_operands(p, pair.promoted.spec(), seed++);
        const CompileOptions options =
            options_for(hopper_mainloop().default_config(pair.promoted, ProblemShape{p.m, p.n, p.k}));
        const verify::CheckReport fast = verify::check_on_device(Runtime::instance().compile(pair.fast, options), p);
        const verify::CheckReport promoted =
            verify::check_on_device(Runtime::instance().compile(pair.promoted, options), p);
        REQUIRE(fast.outputs.size() == 1);
        REQUIRE(promoted.outputs.size() == 1);
        const double fast_error = fast.outputs[0].rel_error, promoted_error = promoted.outputs[0].rel_error;
        INFO(pair.promoted.name() << " on " << options.config->to_text() << ": relative error against fp64, fast "
                                  << fast_error << ", promoted " << promoted_error << "\n"
                                  << "fast:\n" << fast.summary() << "promoted:\n" << promoted.summary());
        // Printed for the record: the ratio is the point of the feature.
        WARN(fmt::format("{}: K = 16384, one sign: relative error fast {:.3e}, promoted {:.3e} ({:.1f}x)",
                         pair.promoted.name(), fast_error, promoted_error, fast_error / promoted_error));
        require_pass(promoted);
        CHECK(promoted_error <= kPromotedBound);
        CHECK(fast_error >= kMinRatio * promoted_error);
    }
}
