// GPU numerics of two block epilogues beyond the random inputs of gpu_numerics_test.cpp: RoPE at long-context
// positions with a model's frequencies, checked to bf16 rounding (the angle is the exact pos * theta, see
// templates/coda/angle.cuh), and the LM head's variant without logits (statistics forward, recomputing backward);
// and the log-sum-exp reduction at infinite and large values.
// Against the CPU reference (fp64), outputs poisoned before each run (verify::check_on_device).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>

#include "coda/blocks.hpp"
#include "coda/runtime.hpp"
#include "coda/text.hpp"
#include "verify/device_check.hpp"
#include "gpu/gpu_support.hpp"

using namespace coda;
using namespace coda::test;

namespace {

// The portable mainloop and, on an sm_90a device, the two main Hopper schedules.
std::vector<KernelConfig> main_configs() {
    std::vector<KernelConfig> out;
    for (const KernelConfig& c : gemm_configs_under_test())
        if (c == PortableConfig{} || c == hopper_cooperative() || c == hopper_pingpong()) out.push_back(c);
    return out;
}

constexpr int kHeadDim = 128;

// Positions in [0, 2^20], the last rows at 2^20 and just below it; theta_j = base^(-2j/head_dim) per head, and
// 0 for the V head (the last kHeadDim columns), as qkv_rope's documentation asks.
std::map<std::string, std::vector<double>> long_context_rope(std::int64_t m, std::int64_t n, double base,
                                                             std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> position(0, 1 << 20);
    std::vector<double> pos(static_cast<std::size_t>(m));
    for (double& p : pos) p = position(rng);
    for (std::int64_t i = 0; i < std::min<std::int64_t>(m, 3); ++i) pos[static_cast<std::size_t>(m - 1 - i)] = (1 << 20) - i;
    std::vector<double> theta(static_cast<std::size_t>(n / 2));
    for (std::size_t c = 0; c < theta.size(); ++c) {
        const std::int64_t head = static_cast<std::int64_t>(c) / (kHeadDim / 2);
        const double j = static_cast<double>(c % (kHeadDim / 2));
        const bool v_head = head == n / kHeadDim - 1;
        theta[c] = v_head ? 0.0 : static_cast<float>(std::pow(base, -2.0 * j / kHeadDim));
    }
    return {{"pos", pos}, {"theta", theta}};
}

// bf16 outputs checked to their rounding. bf16 keeps 7 stored mantissa bits, so one rounding moves a value by at
// most half an ulp, 2^-8 = 3.9e-3 of it at the bottom of a binade (2^-9 at the top): max_error (|out - ref| /
// (|ref| + rms)) stays below 4e-3, and the RMS error (rel) near 1.6e-3 (measured on the H200: max 3.06e-3, rel
// 1.66e-3). An fp32-rounded angle at 2^20 (up to 0.03 rad off) exceeds both by far.
verify::CheckProblem tight(std::int64_t m, std::int64_t n, std::int64_t k, double base, std::uint64_t seed) {
    verify::CheckProblem p;
    p.m = m;
    p.n = n;
    p.k = k;
    p.seed = seed;
    p.given = long_context_rope(m, n, base, seed);
    p.rel_tolerance = 2e-3;
    p.max_tolerance = 4e-3;
    return p;
}

}  // namespace

TEST_CASE("RoPE forward and backward are accurate at positions up to 2^20", "[gpu][rope]") {
    const std::vector<KernelConfig> configs = main_configs();
    std::vector<Build> builds;
    for (const KernelConfig& c : configs) builds.push_back({blocks::qkv_rope(), options_for(c)});
    builds.push_back({blocks::rope_backward(), {}});
    warm_in_parallel(builds);
    std::uint64_t seed = 1400;
    for (double base : {1e4, 5e5, 1e6}) {
        // q, k and v heads of 128 columns; M odd, so the last tile is partial.
        const std::int64_t m = 1000, n = 3 * kHeadDim, k = 256;
        for (const KernelConfig& c : configs) {
            INFO("qkv_rope, config " << c.to_text() << ", base " << base);
            require_pass(verify::check_on_device(Runtime::instance().compile(blocks::qkv_rope(), options_for(c)),
                                                 tight(m, n, k, base, seed++)));
        }
        INFO("rope_backward, base " << base);
        require_pass(verify::check_on_device(Runtime::instance().compile(blocks::rope_backward()),
                                             tight(m, n, 0, base, seed++)));
    }
}

TEST_CASE("the LM head without logits: statistics forward and recomputing backward match the reference",
          "[gpu][lm_head_ce]") {
    const std::vector<KernelConfig> configs = main_configs();
    const Graph graphs[] = {blocks::lm_head_ce_stats(), blocks::lm_head_ce_backward()};
    std::vector<Build> builds;
    for (const Graph& g : graphs)
        for (const KernelConfig& c : configs) builds.push_back({g, options_for(c)});
    warm_in_parallel(builds);
    struct Shape {
        std::int64_t m, n, k;
    };
    // A vocabulary that is not a multiple of any tile, one row, and a deeper K.
    const Shape shapes[] = {{1000, 4104, 256}, {1, 32768, 512}, {257, 1032, 2048}};
    std::uint64_t seed = 1500;
    for (const Graph& g : graphs)
        for (const KernelConfig& c : configs)
            for (const Shape& s : shapes) {
                INFO(g.name() << ", config " << c.to_text() << ", M=" << s.m << " N=" << s.n << " K=" << s.k);
                verify::CheckProblem p;
                p.m = s.m;
                p.n = s.n;
                p.k = s.k;
                p.seed = seed++;
                require_pass(verify::check_on_device(Runtime::instance().compile(g, options_for(c)), p));
            }
}

namespace {

// Values of an m x n f32 tile input whose rows, by row % 6, hold: only -inf (an empty sum); one finite value among
// -inf; uniform values up to +-88 (exp's float range); a +inf among finite values; one value repeated (every
// element ties the running max); finite values with -inf in every other column.
std::vector<double> lse_edge_rows(std::int64_t m, std::int64_t n, std::uint64_t seed) {
    const double inf = std::numeric_limits<double>::infinity();
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> wide(-88.0f, 88.0f), unit(-1.0f, 1.0f);
    std::vector<double> x(static_cast<std::size_t>(m * n));
    for (std::int64_t r = 0; r < m; ++r)
        for (std::int64_t c = 0; c < n; ++c) {
            double& v = x[static_cast<std::size_t>(r * n + c)];
            switch (r % 6) {
                case 0: v = -inf; break;
                case 1: v = c == (r * 7) % n ? unit(rng) : -inf; break;
                case 2: v = wide(rng); break;
                case 3: v = c == (r * 5) % n ? inf : unit(rng); break;
                case 4: v = 3.0; break;
                default: v = c % 2 ? -inf : wide(rng); break;
            }
        }
    return x;
}

}  // namespace

TEST_CASE("log-sum-exp partials are exact at infinite rows and float-accurate at large values", "[gpu][lse]") {
    // Reducer<Lse>::add (templates/coda/reduce.cuh) runs ex2.approx on scaled differences without branches for
    // infinities; a tile program and a GEMM epilogue (on each main config) reduce the same rows. -inf and +inf
    // partials must match exactly; finite ones to 1e-6 of (|ref| + rms), a few float roundings.
    Graph tile = Graph::tile("lse_tile");
    tile.reduce_row(tile.tile_input("x", DType::F32), ReduceOp::Lse, "lse_partials");
    const Graph gemm = parse_graph("graph lse_gemm gemm in=bf16 a=k b=k\n%acc = accumulator\n"
                                   "%x = tile_input f32 full\n%v = add %acc %x\n%lse_partials = reduce_row lse %v\n");
    const std::vector<KernelConfig> configs = main_configs();
    std::vector<Build> builds = {{tile, {}}};
    for (const KernelConfig& c : configs) builds.push_back({gemm, options_for(c)});
    warm_in_parallel(builds);
    const std::int64_t m = 300, n = 1000;
    verify::CheckProblem p;
    p.m = m;
    p.n = n;
    p.k = 64;
    p.seed = 1600;
    p.given["x"] = lse_edge_rows(m, n, 1601);
    p.rel_tolerance = 1e-6;
    p.max_tolerance = 1e-6;
    INFO("tile program");
    require_pass(verify::check_on_device(Runtime::instance().compile(tile), p));
    for (const KernelConfig& c : configs) {
        INFO("GEMM epilogue, config " << c.to_text());
        require_pass(verify::check_on_device(Runtime::instance().compile(gemm, options_for(c)), p));
    }
}

TEST_CASE("sigmoid and silu keep float accuracy from x = -87 to 100", "[gpu][sigmoid]") {
    // On sm_90, sigmoid multiplies by rcp.approx of a denominator kept in [1, 2] (templates/coda/numeric.cuh).
    // Checked through log(sigmoid(x)), whose absolute error is sigmoid's relative error: a sigmoid computed as
    // 1 / (1 + e^-x) with a fast division flushes to 0 below x = -87.3 and loses its digits on the way, which the
    // log shows. -87 keeps sigmoid a normal float (e^-87 = 1.6e-38).
    const Graph g = parse_graph("graph sigmoid_range tile\n%x = tile_input f32 full\n%s = sigmoid %x\n"
                                "%log_s = log %s\n%log_sigmoid = store f32 %log_s\n%y = silu %x\n%silu = store f32 %y\n");
    const std::int64_t m = 64, n = 512;
    std::vector<double> x(static_cast<std::size_t>(m * n));
    for (std::size_t i = 0; i < x.size(); ++i)
        x[i] = static_cast<float>(-87.0 + 187.0 * static_cast<double>(i) / static_cast<double>(x.size() - 1));
    verify::CheckProblem p;
    p.m = m;
    p.n = n;
    p.seed = 1700;
    p.given["x"] = x;
    p.rel_tolerance = 1e-6;
    p.max_tolerance = 1e-6;
    require_pass(verify::check_on_device(Runtime::instance().compile(g), p));
}
