// GPU checks at the edges a user finds first: outputs that are views into wider tensors (row padding and what lies
// beyond the last row must survive every config), operands TMA cannot load (the default config falls back to the
// portable mainloop; a config the user gave is an error), epilogues whose column reductions spill registers, and
// tile programs on both of their paths (staged in shared memory, or not).
#include <catch2/catch.hpp>

#include <random>

#include <fmt/format.h>

#include "coda/blocks.hpp"
#include "coda/error.hpp"
#include "coda/runtime.hpp"
#include "coda/text.hpp"
#include "driver/cuda_driver.hpp"
#include "gpu/gpu_support.hpp"
#include "mainloop/hopper.hpp"
#include "support/random_graph.hpp"

using namespace coda;
using namespace coda::test;

namespace {

verify::CheckProblem problem(std::int64_t m, std::int64_t n, std::int64_t k, int operand_pad, int tile_pad,
                             std::uint64_t seed) {
    verify::CheckProblem p;
    p.m = m;
    p.n = n;
    p.k = k;
    p.operand_pad = operand_pad;
    p.tile_pad = tile_pad;
    p.seed = seed;
    return p;
}

}  // namespace

TEST_CASE("outputs with row padding keep their padding and what lies after them, on every config", "[gpu]") {
    // The graph and shape that overwrote columns 676..679 of every row of an f16 output of row pitch 680.
    const Graph found = parse_graph("graph g gemm in=bf16 a=mn b=k\n%t0 = tile_input f32 full\n%acc = accumulator\n"
                                    "%_2 = add %t0 %acc\n%out0 = store f16 %_2\n");
    std::vector<Build> builds;
    const std::vector<KernelConfig> configs = gemm_configs_under_test();
    for (const KernelConfig& config : configs) builds.push_back({found, options_for(config)});
    std::vector<Graph> blocks;
    for (const Graph& g : blocks::llama_block())
        if (g.domain() == Domain::Gemm) blocks.push_back(g);
    // The block's epilogues on the default config and the two main Hopper configs.
    std::vector<CompileOptions> block_options = {CompileOptions{}};
    if (on_hopper()) {
        block_options.push_back(options_for(hopper_cooperative()));
        block_options.push_back(options_for(hopper_pingpong()));
    }
    for (const Graph& g : blocks)
        for (const CompileOptions& o : block_options) builds.push_back({g, o});
    warm_in_parallel(builds);

    std::uint64_t seed = 13;
    for (const KernelConfig& config : configs) {
        INFO("config: " << config.to_text());
        const Kernel k = Runtime::instance().compile(found, options_for(config));
        // lda = 546 + 6 = 552 and ldb = 442 + 6 = 448, as TMA needs; t0 and out0 of row pitch 680 for N = 676.
        require_pass(verify::check_on_device(k, problem(546, 676, 442, 6, 4, seed++)));
        // N = 680: every row is whole 16-byte units, so the Hopper mainloop stages and stores by TMA.
        require_pass(verify::check_on_device(k, problem(546, 680, 442, 6, 8, seed++)));
    }
    for (const Graph& g : blocks)
        for (const CompileOptions& o : block_options) {
            const Kernel k = Runtime::instance().compile(g, o);
            INFO(g.name() << " config: " << k.config()->to_text());
            // Leading dimensions TMA can load in every layout (M, K and N alike modulo 8, with the operands' pad):
            // N = 676 has rows of 1352 bytes, N = 680 whole 16-byte units.
            require_pass(verify::check_on_device(k, problem(300, 676, 260, 4, 8, seed++)));
            require_pass(verify::check_on_device(k, problem(304, 680, 264, 0, 8, seed++)));
        }
}

TEST_CASE("visits past N leave row reductions, outputs and padding as they were, on every config", "[gpu]") {
    // Where every tile tensor is staged, the Hopper mainloop visits the column pairs past N of a tile's last chunks
    // too, without a bounds branch (HopperTiles' kBeyondN): their column inputs are read at the last pair, their
    // stores are clipped by TMA, and row reductions leave their state as it was (add_in_columns). Chunks wholly past
    // N are not even loaded: those visits read whatever the ring buffer holds. Graphs with one and two row
    // reductions, column inputs and a label compare; N = 136 ends 8 columns into a tile's second chunk, N = 680
    // 40 columns into its last tile; cluster configs pair a tile with one wholly past N.
    const Graph graphs[] = {blocks::out_proj(), blocks::lm_head_ce_stats(), blocks::swiglu_backward(),
                            blocks::rmsnorm_backward_bf16()};
    std::vector<Build> builds;
    const std::vector<KernelConfig> configs = gemm_configs_under_test();
    for (const Graph& g : graphs)
        for (const KernelConfig& config : configs) builds.push_back({g, options_for(config)});
    warm_in_parallel(builds);
    std::uint64_t seed = 61;
    for (const Graph& g : graphs)
        for (const KernelConfig& config : configs) {
            INFO(g.name() << " config: " << config.to_text());
            const Kernel k = Runtime::instance().compile(g, options_for(config));
            require_pass(verify::check_on_device(k, problem(260, 136, 200, 0, 8, seed++)));
            require_pass(verify::check_on_device(k, problem(300, 680, 264, 0, 8, seed++)));
        }
}

TEST_CASE("tile tensors a Hopper kernel cannot stage run on its config's direct variant, config given or not",
          "[gpu]") {
    if (skip_unless_hopper("the portable mainloop does not stage")) return;
    const Graph g = blocks::out_proj();
    for (const CompileOptions& options : {CompileOptions{}, options_for(hopper_cooperative())}) {
        const Kernel k = Runtime::instance().compile(g, options);
        REQUIRE(k.config());
        REQUIRE(k.config()->hopper() != nullptr);
        HopperConfig direct = *k.config()->hopper();
        direct.direct = true;
        INFO(k.config()->to_text());
        // N = 676 with rows 680 apart: the pitch is whole 16-byte units, but x1's and h's rows end inside one, so TMA
        // cannot store them; the launch runs on the direct variant, compiled then (and found in memory afterwards).
        require_pass(verify::check_on_device(k, problem(300, 676, 264, 0, 4, 41)));
        CHECK(Runtime::instance().warm(g, options_for(direct)).from == BuildReport::From::Memory);
        // A residual whose row pitch is off the 16-byte grid (N = 680, pad 3 elements): the direct variant again.
        require_pass(verify::check_on_device(k, problem(300, 680, 264, 0, 3, 42)));
    }
}

TEST_CASE("operands TMA cannot load run on the portable mainloop unless the user gave a config", "[gpu]") {
    if (skip_unless_hopper("elsewhere the default is the portable mainloop already")) return;
    const Graph g = blocks::out_proj();
    const Kernel by_default = Runtime::instance().compile(g);
    REQUIRE(by_default.config());
    REQUIRE(by_default.config()->hopper() != nullptr);
    // K = 1001: A's leading dimension is odd. K = 1000 with a pad of 2: 1002, not a multiple of 8.
    require_pass(verify::check_on_device(by_default, problem(1000, 1000, 1001, 0, 0, 1)));
    require_pass(verify::check_on_device(by_default, problem(1000, 1000, 1000, 2, 0, 2)));
    // A config the user gave is kept: the launch is an error that says why and what to do.
    for (const KernelConfig& config : {hopper_pingpong(), hopper_cooperative()}) {
        const Kernel pinned = Runtime::instance().compile(g, options_for(config));
        CHECK_THROWS_WITH(verify::check_on_device(pinned, problem(1000, 1000, 1001, 0, 0, 3)),
                          Catch::Contains("16-byte aligned rows") &&
                              Catch::Contains("without a config in CompileOptions"));
    }
    // The fallback kernel is compiled once and reused.
    require_pass(verify::check_on_device(by_default, problem(777, 1000, 1001, 0, 0, 5)));
}

TEST_CASE("bound launches, and launches rebound from other buffers, match the reference", "[gpu][bind]") {
    // Every kernel of the block (GEMM epilogues, tile programs, finalizers) with its default config; on an sm_90a
    // device that is the Hopper mainloop, whose tensor maps the bound launch encodes itself. N = 680: tile tensors
    // in whole 16-byte rows, so the Hopper kernels stage and store by TMA (maps of the rebound pointers).
    std::vector<Build> builds;
    for (const Graph& g : blocks::llama_block()) builds.push_back({g, CompileOptions{}});
    warm_in_parallel(builds);
    std::uint64_t seed = 71;
    for (const Graph& g : blocks::llama_block()) {
        const Kernel k = Runtime::instance().compile(g);
        INFO(g.name());
        for (const auto path : {verify::CheckProblem::Path::Bound, verify::CheckProblem::Path::Rebound}) {
            verify::CheckProblem p = problem(304, 680, 264, 0, 8, seed++);
            p.path = path;
            require_pass(verify::check_on_device(k, p));
            p = problem(300, 676, 260, 4, 4, seed++);
            p.path = path;
            require_pass(verify::check_on_device(k, p));
        }
    }
}

TEST_CASE("a bound launch rebound to operands TMA cannot load falls back as a launch does", "[gpu][bind]") {
    if (skip_unless_hopper("elsewhere the default is the portable mainloop already")) return;
    const Graph g = blocks::out_proj();
    const Kernel by_default = Runtime::instance().compile(g);
    REQUIRE(by_default.config()->hopper() != nullptr);
    // K = 1001: A's leading dimension is odd, so TMA cannot load A; bound and rebound both run the fallback.
    for (const auto path : {verify::CheckProblem::Path::Bound, verify::CheckProblem::Path::Rebound}) {
        verify::CheckProblem p = problem(1000, 1000, 1001, 0, 0, 81);
        p.path = path;
        require_pass(verify::check_on_device(by_default, p));
    }
    // A pinned Hopper config: binding is the error a launch would be, and a rebind to a pointer TMA cannot take
    // is refused, leaving the bound launch as it was.
    const Kernel pinned = Runtime::instance().compile(g, options_for(hopper_pingpong()));
    verify::CheckProblem odd = problem(1000, 1000, 1001, 0, 0, 82);
    odd.path = verify::CheckProblem::Path::Bound;
    CHECK_THROWS_WITH(verify::check_on_device(pinned, odd), Catch::Contains("16-byte aligned rows"));
    DeviceBuffer a(2 * 256 * 256 + 16), b(2 * 256 * 256), x(2 * 256 * 256 * 4), small(4 * 256 * 2);
    const auto at = [](const DeviceBuffer& buffer, std::size_t offset = 0) {
        return reinterpret_cast<const void*>(static_cast<std::uintptr_t>(buffer.ptr()) + offset);
    };
    Args args;
    args.bind("A", matrix(at(a), DType::BF16, 256, 256)).bind("B", matrix_col_major(at(b), DType::BF16, 256, 256));
    args.bind("residual", matrix(at(x), DType::BF16, 256, 256)).bind("gamma", vector(at(small), DType::BF16, 256));
    args.bind("x1", matrix(at(x, 2 * 256 * 256), DType::BF16, 256, 256));
    args.bind("h", matrix(at(x, 4 * 256 * 256), DType::BF16, 256, 256));
    const auto pshape = pinned.partials_shape("x1_sumsq", 256, 256);
    args.bind("x1_sumsq", matrix(at(x, 6 * 256 * 256), DType::F32, pshape[0], pshape[1]));
    BoundLaunch bound = pinned.bind(args);
    CHECK_THROWS_WITH(bound.rebind("A", at(a, 2)), Catch::Contains("operand A") && Catch::Contains("16-byte aligned"));
    CHECK_THROWS_WITH(bound.rebind("A", at(a, 1)), Catch::Contains("not aligned to 2 bytes"));
    CHECK_THROWS_WITH(bound.rebind("h", nullptr), Catch::Contains("null pointer"));
    bound.rebind("A", at(a, 16));
    bound.launch();
    Driver::instance().synchronize();
}

TEST_CASE("epilogues whose column reductions spill registers still compute the right values", "[gpu]") {
    if (skip_unless_hopper("ptxas spills these reductions at bn = 256, a Hopper tile")) return;
    // Two full-width column reductions keep 2 x 64 partials a thread beside 128 accumulators at bn = 256: ptxas
    // spills (README "Limits"), and coda warns when it compiles the kernel.
    Graph g = Graph::gemm("two_col_reductions");
    Value acc = g.accumulator();
    Value x = acc + g.tile_input("x", DType::BF16);
    g.store(x, "y", DType::BF16);
    g.reduce_col(x, ReduceOp::Sum, "col_sum");
    g.reduce_col(x, ReduceOp::SumSq, "col_sumsq");
    std::uint64_t seed = 40;
    for (const KernelConfig& config : gemm_configs_under_test()) {
        const Kernel k = Runtime::instance().compile(g, options_for(config));
        INFO(config.to_text() << ": " << k.report().spill_bytes << " bytes of spills");
        require_pass(verify::check_on_device(k, problem(1000, 1000, 520, 0, 0, seed++)));
    }
}

TEST_CASE("tile programs stage whole 16-byte rows and fall back per tile where they cannot", "[gpu]") {
    // A CTA stages its tile through shared memory when every tile tensor's base, row pitch and the tile's part of a
    // row are whole 16-byte units, and visits global memory otherwise (templates/coda/tile_program.cuh). These
    // shapes run both paths, in one launch too, and the padding after each row must survive the staged stores.
    std::vector<Graph> graphs;
    {
        Graph copy = Graph::tile("copy");
        copy.store(copy.tile_input("x", DType::BF16), "y", DType::BF16);
        graphs.push_back(copy);
    }
    graphs.push_back(blocks::rope_backward());
    graphs.push_back(blocks::cross_entropy_backward());
    std::mt19937_64 rng(515);
    for (int i = 0; i < 4; ++i) graphs.push_back(test::random_graph(rng, Domain::Tile, {}));
    std::vector<Build> builds;
    for (const Graph& g : graphs) builds.push_back({g, {}});
    warm_in_parallel(builds);
    struct Case {
        std::int64_t m, n;
        int tile_pad;
        const char* what;
    };
    const Case cases[] = {
        {304, 4096, 0, "every tile staged"},
        {257, 680, 8, "staged, with a partial last row tile"},
        // Pitch 680 elements (16-byte rows) but N = 676: the last column tile ends inside a 16-byte unit, so that
        // CTA visits global memory while the others stage.
        {300, 676, 4, "staged tiles beside one that falls back"},
        {65, 2050, 0, "rows of 4100 bytes: no tile staged"},
    };
    std::uint64_t seed = 31;
    for (const Graph& g : graphs)
        for (const Case& c : cases) {
            INFO(g.name() << ": " << c.what << fmt::format(" (M={} N={} tile_pad={})", c.m, c.n, c.tile_pad));
            require_pass(verify::check_on_device(Runtime::instance().compile(g), problem(c.m, c.n, 0, 0, c.tile_pad,
                                                                                         seed++)));
        }
}
