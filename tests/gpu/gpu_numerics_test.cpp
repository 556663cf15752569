// GPU numerics against the CPU reference (fp64): the block's epilogues, and random graphs over every
// primitive, every operand layout, both input dtypes and odd shapes. Every GEMM check runs under each mainloop
// config of gemm_configs_under_test(). Inputs are fresh random values and outputs are poisoned before each run
// (verify::check_on_device).
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <random>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "coda/blocks.hpp"
#include "coda/hopper_rules.cuh"
#include "coda/runtime.hpp"
#include "ir/text.hpp"
#include "mainloop/hopper.hpp"
#include "mainloop/stream_k_workspace.hpp"
#include "support/block_graphs.hpp"
#include "support/random_graph.hpp"
#include "tune/builtin_tuning.hpp"
#include "verify/device_check.hpp"
#include "gpu/gpu_support.hpp"

using namespace coda;
using namespace coda::test;

namespace {

struct Shape {
    std::int64_t m, n, k;
    int pad;  // extra leading-dimension elements on A and B: a pad of 2 forces the non-16-byte load path
};

bool runs_every_case(const KernelConfig& config) {
    return config == PortableConfig{} || config == hopper_cooperative() || config == hopper_pingpong();
}


// The Hopper mainloop loads A and B by TMA, which needs every row to start on a 16-byte boundary: a leading
// dimension that is a multiple of 8 elements (16 for FP8; check_on_device allocates each operand on its
// own, so the base is aligned). Anything else must be a clear coda::Error at launch, not a wrong result.
bool tma_can_load(const GemmSpec& spec, const Shape& s) {
    // The leading dimensions check_on_device gives A and B (src/verify/device_check.cpp).
    const std::int64_t lda = (spec.a == Major::MN ? s.m : s.k) + s.pad;
    const std::int64_t ldb = (spec.b == Major::K ? s.k : s.n) + s.pad;
    const std::int64_t per_16_bytes = 16 / static_cast<std::int64_t>(size_of(spec.input));
    return lda % per_16_bytes == 0 && ldb % per_16_bytes == 0;
}

struct GemmCase {
    Graph graph;
    Shape shape;
    std::uint64_t seed;
    bool every_config;  // false: only the configs for which runs_every_case holds
};

// FP8 operands run on the Hopper mainloop alone (the portable one rejects them).
bool takes(const GemmCase& c, const KernelConfig& config) {
    if (size_of(c.graph.spec().input) == 1 && config.hopper() == nullptr) return false;
    // Block-scaled ones on the tiles they take, alone: cooperative 128 x 128 (a candidate) and 128 x 256
    // (hopper_cooperative()).
    if (c.graph.spec().block_scaled()) {
        const HopperConfig* h = config.hopper();
        return h != nullptr && hopper_rules::block_scaled_tile(h->bm, h->schedule == Schedule::PingPong) &&
               h->cluster_m * h->cluster_n == 1;
    }
    return c.every_config || runs_every_case(config);
}

// The reference check of a GEMM at shape s (operand padding included) on the inputs of `seed`.
verify::CheckProblem gemm_problem(const Shape& s, std::uint64_t seed) {
    verify::CheckProblem p;
    p.m = s.m;
    p.n = s.n;
    p.k = s.k;
    p.operand_pad = s.pad;
    p.seed = seed;
    return p;
}

// Checks every case under every config that takes it; all (graph, config) pairs are compiled in parallel first.
// Each config of a case sees the same inputs (the case's seed).
void check_gemm_cases(const std::vector<GemmCase>& cases) {
    const std::vector<KernelConfig> configs = gemm_configs_under_test();
    std::vector<Build> builds;
    std::set<std::string> seen;
    for (const GemmCase& c : cases)
        for (const KernelConfig& config : configs)
            if (takes(c, config) && seen.insert(to_text(c.graph) + "\n" + config.to_text()).second)
                builds.push_back({c.graph, options_for(config)});
    warm_in_parallel(builds);
    for (const GemmCase& c : cases)
        for (const KernelConfig& config : configs) {
            if (!takes(c, config)) continue;
            const Shape& s = c.shape;
            INFO("config: " << config.to_text() << "\ngraph " << c.graph.name()
                            << fmt::format(" M={} N={} K={} pad={}", s.m, s.n, s.k, s.pad));
            const verify::CheckProblem p = gemm_problem(s, c.seed);
            const Kernel kernel = Runtime::instance().compile(c.graph, options_for(config));
            if (config.hopper() != nullptr && !tma_can_load(c.graph.spec(), s))
                CHECK_THROWS_WITH(verify::check_on_device(kernel, p), Catch::Contains("16-byte"));
            else
                require_pass(verify::check_on_device(kernel, p));
        }
}

// Every graph of `graphs` against the reference at each shape; the GEMMs named in `every_config` on every config.
void check_block_graphs(const std::vector<Graph>& graphs, const std::vector<Shape>& shapes,
                        const std::vector<std::string>& every_config, std::uint64_t seed) {
    std::vector<GemmCase> gemm_cases;
    std::vector<Build> others;
    for (const Graph& g : graphs) {
        if (g.domain() == Domain::Gemm) {
            const bool all = std::find(every_config.begin(), every_config.end(), g.name()) != every_config.end();
            for (const Shape& s : shapes) gemm_cases.push_back({g, s, seed++, all});
        } else {
            others.push_back({g, {}});
        }
    }
    check_gemm_cases(gemm_cases);

    // Finalizers and tile programs have no mainloop: one run each, with the shapes' M and N.
    warm_in_parallel(others);
    for (const Build& b : others) {
        for (const Shape& s : shapes) {
            verify::CheckProblem p;
            p.m = s.m;
            p.n = s.n;
            p.k = s.k;
            p.seed = seed++;
            require_pass(verify::check_on_device(Runtime::instance().compile(b.graph), p));
        }
    }
}

}  // namespace

TEST_CASE("the block's epilogues match the reference at odd shapes", "[gpu]") {
    // The other configs take one GEMM of each B layout: out_proj (B K-major) and swiglu_backward (N-major).
    check_block_graphs(blocks::llama_block(), {{1000, 1000, 1000, 0}, {1, 512, 4096, 0}, {257, 130, 72, 2}},
                       {"out_proj", "swiglu_backward"}, 100);
}

TEST_CASE("the block's FP8 epilogues match the reference at odd shapes", "[gpu]") {
    // FP8 rows need a multiple of 16 bytes (TMA, no fallback): K = 1008 and 144, not 1000 and 72.
    // (528 x 1040: M and N whole 16-byte units of FP8, so the _t graphs stage their transposed copies.)
    check_block_graphs(blocks::llama_block_fp8(),
                       {{1000, 1000, 1008, 0}, {1, 512, 4096, 0}, {257, 130, 144, 16}, {528, 1040, 1008, 0}},
                       {"out_proj_fp8", "swiglu_backward_fp8"}, 300);
}

TEST_CASE("the block's block-wise FP8 epilogues match the reference at odd shapes", "[gpu]") {
    // Block-scaled GEMMs take cooperative 128 x 128 and 128 x 256 tiles alone (takes()).
    check_block_graphs(blocks::llama_block_fp8_blockwise(),
                       {{1000, 1000, 1008, 0}, {1, 512, 4096, 0}, {257, 130, 144, 16}}, {}, 400);
}

TEST_CASE("the block's row-wise FP8 epilogues match the reference at odd shapes", "[gpu]") {
    check_block_graphs(blocks::llama_block_fp8_rowwise(),
                       {{1000, 1000, 1008, 0}, {1, 512, 4096, 0}, {257, 130, 144, 16}},
                       {"out_proj_fp8_rowwise", "swiglu_backward_fp8_rowwise"}, 500);
}

TEST_CASE("the shipped tuning records' kernels match the reference at odd shapes", "[gpu][fp8]") {
    // The configs coda picks on their GPU at the layer's shapes (src/tune/builtin_tuning.cpp), checked here at
    // shapes the reference can afford, on whichever Hopper GPU runs the test: ragged tiles, CTA pairs half past N.
    if (skip_unless_hopper("FP8 runs on the Hopper mainloop alone")) return;
    std::vector<Build> builds;
    for (const TuningRecord& r : builtin_tuning_db().records()) {
        const std::optional<Graph> g = block_graph_with_hash(r.graph_hash);
        REQUIRE(g.has_value());
        builds.push_back({*g, options_for(r.config)});
    }
    warm_in_parallel(builds);
    std::uint64_t seed = 600;
    for (const Build& b : builds)
        for (const Shape& s : std::vector<Shape>{{1000, 1000, 1008, 0}, {257, 130, 144, 16}, {528, 1040, 1008, 0}}) {
            INFO("config: " << b.options.config->to_text() << "\ngraph " << b.graph.name()
                            << fmt::format(" M={} N={} K={} pad={}", s.m, s.n, s.k, s.pad));
            const Kernel kernel = Runtime::instance().compile(b.graph, b.options);
            require_pass(verify::check_on_device(kernel, gemm_problem(s, seed++)));
        }
}

TEST_CASE("random GEMM epilogues over all layouts and both dtypes match the reference", "[gpu]") {
    std::mt19937_64 rng(20261202);
    std::vector<GemmCase> cases;
    std::uint64_t seed = 1;
    for (DType input : {DType::BF16, DType::F16})
        for (Major a : {Major::K, Major::MN})
            for (Major b : {Major::K, Major::MN}) {
                const GemmSpec spec{input, a, b};
                // The other configs take the bf16 cases with A K-major: both B layouts, every shape.
                const bool every_config = input == DType::BF16 && a == Major::K;
                const auto add = [&](Shape s) {
                    cases.push_back({test::random_graph(rng, Domain::Gemm, spec), s, seed++, every_config});
                };
                add({1, 4096, 4096, 0});
                add({129, 130, 70, 2});
                if (input == DType::BF16) {
                    add({1000, 1000, 1000, 0});
                    add({4097, 2050, 520, 0});
                }
            }
    // f16 with an MN-major operand at leading dimensions TMA can load (above, only A K-major, B N-major at M=1
    // is), so that the Hopper mainloop's f16 transposed loads are checked for numbers, not only for the error.
    for (Major a : {Major::K, Major::MN})
        for (Major b : {Major::K, Major::MN})
            if (a == Major::MN || b == Major::MN)
                cases.push_back({test::random_graph(rng, Domain::Gemm, {DType::F16, a, b}), {1000, 1000, 1000, 0},
                                 seed++, false});
    check_gemm_cases(cases);
}

// The GEMM of coda.torch's 16-bit weight gradients with gradient buffers: both operands M/N-major, D += acc in f32.
// Its default at the layer's shapes is the cooperative pairs along N (hopper.cpp, default_config), which the random
// cases above run only with A K-major: here every config, at a ragged shape and a square one.
TEST_CASE("a weight gradient added into f32, both operands M/N-major, matches the reference on every config",
          "[gpu]") {
    Graph g = Graph::gemm("wgrad_sum_mn", GemmSpec{DType::BF16, Major::MN, Major::MN});
    g.accumulate(g.accumulator(), "D", DType::F32);
    check_gemm_cases({{g, {1000, 1000, 1000, 0}, 61, true}, {g, {257, 1000, 520, 0}, 62, true}});
}

TEST_CASE("random tile programs and finalizers match the reference", "[gpu]") {
    std::mt19937_64 rng(4242);
    std::vector<Graph> tiles, finals;
    for (int i = 0; i < 6; ++i) tiles.push_back(test::random_graph(rng, Domain::Tile, {}));
    for (int i = 0; i < 4; ++i) finals.push_back(test::random_graph(rng, Domain::Finalize, {}));
    std::vector<Build> all;
    for (const Graph& g : tiles) all.push_back({g, {}});
    for (const Graph& g : finals) all.push_back({g, {}});
    warm_in_parallel(all);
    std::uint64_t seed = 77;
    const Shape tile_shapes[] = {{1, 4096, 0, 0}, {1000, 1000, 0, 0}, {4097, 2050, 0, 0}};
    for (std::size_t i = 0; i < tiles.size(); ++i) {
        const Shape s = tile_shapes[i % 3];
        verify::CheckProblem p;
        p.m = s.m;
        p.n = s.n;
        p.seed = seed++;
        require_pass(verify::check_on_device(Runtime::instance().compile(tiles[i]), p));
    }
    for (const Graph& g : finals) {
        verify::CheckProblem p;
        p.m = 100003;
        p.t = 17;
        p.seed = seed++;
        require_pass(verify::check_on_device(Runtime::instance().compile(g), p));
    }
}

TEST_CASE("reductions are bitwise deterministic: the same inputs give the same bytes", "[gpu]") {
    const auto check = [](const Graph& g, const CompileOptions& options, const std::string& config_text,
                          std::int64_t n) {
        INFO("config: " << config_text << "\ngraph " << g.name());
        verify::CheckProblem p;
        p.m = 1023;
        p.n = n;
        p.k = 520;
        p.seed = 99;
        const Kernel k = Runtime::instance().compile(g, options);
        const verify::CheckReport first = verify::check_on_device(k, p);
        const verify::CheckReport second = verify::check_on_device(k, p);
        require_pass(first);
        REQUIRE(first.outputs.size() == second.outputs.size());
        for (std::size_t i = 0; i < first.outputs.size(); ++i) {
            INFO(g.name() << " output " << first.outputs[i].name);
            CHECK(first.outputs[i].digest == second.outputs[i].digest);
        }
        p.seed = 100;  // and the digest does see the data
        CHECK(verify::check_on_device(k, p).outputs[0].digest != first.outputs[0].digest);
    };
    std::vector<Build> builds;
    for (const Graph& g : {blocks::lm_head_ce(), blocks::rmsnorm_backward()})
        for (const KernelConfig& config : gemm_configs_under_test())
            if (runs_every_case(config)) builds.push_back({g, options_for(config)});
    warm_in_parallel(builds);
    for (const Build& b : builds) {
        const Shape wanted{1023, 2050, 520, 0};
        // rmsnorm_backward's N-major B has N as its leading dimension: 2050 is not TMA-loadable, 2056 is.
        const bool hopper = b.options.config->hopper() != nullptr;
        const std::int64_t n = hopper && !tma_can_load(b.graph.spec(), wanted) ? 2056 : wanted.n;
        check(b.graph, b.options, b.options.config->to_text(), n);
    }
    check(blocks::rope_backward(), {}, "none (tile program)", 2050);
}

TEST_CASE("stream-K: tiles shared by k-tiles between CTAs match the reference, the same bytes every run", "[gpu]") {
    // More tiles than SMs, not a whole number of rounds: the Hopper kernels without a cluster share the last two
    // rounds by k-tiles (hopper_gemm.cuh, TileOrder), so most CTAs hand a partial sum to their neighbour. Forced on
    // (by default only at 20 or more rounds: stream_k_shares). Every GEMM epilogue of the block on its default
    // config, and out_proj and swiglu_backward (the heaviest epilogue) on every config that shares, with edges
    // in M, N and K: 4731 x 1000 is 37 x 8 tiles of 128 x 128 (on 132 SMs, 2 rounds and 32 tiles over); K = 120
    // is 2 k-tiles (pieces of one k-tile), K = 520 is 9.
    set_stream_k_override(StreamK::Always);
    struct Restore {
        ~Restore() { set_stream_k_override(std::nullopt); }
    } restore;
    struct Case {
        Build build;
        std::int64_t k;
    };
    std::vector<Case> cases;
    for (const Graph& g : blocks::llama_block()) {
        if (g.domain() != Domain::Gemm) continue;
        cases.push_back({{g, CompileOptions{}}, 120});
        if (g.name() != "out_proj" && g.name() != "swiglu_backward") continue;
        cases.push_back({{g, CompileOptions{}}, 520});
        for (const KernelConfig& config : gemm_configs_under_test()) {
            const HopperConfig* h = config.hopper();
            if (h != nullptr &&
                hopper_rules::stream_k(h->cluster_m, h->cluster_n, h->bm, h->schedule == Schedule::PingPong))
                cases.push_back({{g, options_for(config)}, 120});
        }
    }
    std::vector<Build> builds;
    for (const Case& c : cases) builds.push_back(c.build);
    warm_in_parallel(builds);
    std::uint64_t seed = 500;
    for (const Case& c : cases) {
        const Kernel k = Runtime::instance().compile(c.build.graph, c.build.options);
        INFO("config: " << (k.config() ? k.config()->to_text() : "none") << "\ngraph " << c.build.graph.name()
                        << " K=" << c.k);
        verify::CheckProblem p;
        p.m = 4731;
        p.n = 1000;
        p.k = c.k;
        p.seed = seed++;
        const verify::CheckReport first = verify::check_on_device(k, p);
        require_pass(first);
        const verify::CheckReport second = verify::check_on_device(k, p);
        REQUIRE(first.outputs.size() == second.outputs.size());
        for (std::size_t j = 0; j < first.outputs.size(); ++j) {
            INFO("output " << first.outputs[j].name);
            CHECK(first.outputs[j].digest == second.outputs[j].digest);
        }
    }
}

TEST_CASE("launch errors reach the user before the GPU", "[gpu]") {
    const Kernel k = Runtime::instance().compile(blocks::out_proj());
    Args args;
    CHECK_THROWS_WITH(k.launch(args), Catch::Contains("argument 'A'") && Catch::Contains("is not bound"));
}
