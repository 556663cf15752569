// FP8 GEMMs on the Hopper mainloop against the CPU reference (fp64): e4m3 and e5m2 operands, of one type or two
// (e5m2 x e4m3, e4m3 x e5m2), both K-major (the one layout Hopper's 8-bit wgmma reads), with the row and column
// scales of per-tensor and row-wise recipes applied in the epilogue. Inputs are random values representable in the
// operand's format (verify::check_on_device), outputs poisoned before each run.
#include <catch2/catch.hpp>

#include <tuple>

#include <fmt/format.h>

#include "coda/blocks.hpp"
#include "coda/runtime.hpp"
#include "mainloop/hopper.hpp"
#include "mainloop/stream_k_workspace.hpp"
#include "verify/device_check.hpp"
#include "gpu/gpu_support.hpp"
#include "support/fp8_graphs.hpp"
#include "support/run_cli.hpp"
#include "support/temp_dir.hpp"

using namespace coda;
using namespace coda::test;

namespace {

// D = acc * scale_a[row] * scale_b[col] in bf16: a row-wise recipe; per-tensor is the same with scalars. B's type
// is A's unless input_b says otherwise.
Graph scaled_fp8(DType input, std::optional<DType> input_b = std::nullopt) {
    const std::string name = input_b ? fmt::format("fp8_scaled_{}_{}", to_string(input), to_string(*input_b))
                                     : fmt::format("fp8_scaled_{}", to_string(input));
    Graph g = Graph::gemm(name, GemmSpec{input, Major::K, Major::K, input_b});
    Value scale = g.mul(g.row_input("scale_a", DType::F32), g.col_input("scale_b", DType::F32), "scale");
    g.store(g.mul(g.accumulator(), scale, "scaled"), "D", DType::BF16);
    return g;
}

// D = acc * s: a per-tensor scale as a scalar. Outputs stay bf16: without promotion every few k-tiles (the
// block-wise stage), Hopper's FP8 wgmma accumulates with fewer bits than fp32, which f32 tolerances would see.
Graph tensorwise_fp8(DType input) {
    Graph g = Graph::gemm(fmt::format("fp8_tensorwise_{}", to_string(input)), GemmSpec{input, Major::K, Major::K});
    g.store(g.mul(g.accumulator(), g.scalar("s"), "d"), "D", DType::BF16);
    return g;
}

std::vector<KernelConfig> hopper_configs() {
    std::vector<KernelConfig> out;
    for (const NamedConfig& named : hopper_mainloop().candidates()) out.push_back(named.config);
    return out;
}

// Every build checked against the reference at every shape (compiled already: warm_in_parallel), seeds from `seed`
// on in that order; returns the next seed. tile_pad: elements of padding after each tile tensor's rows, which must
// survive.
struct Shape {
    std::int64_t m, n, k;
    std::int64_t tile_pad = 0;
};
std::uint64_t check_at_shapes(const std::vector<Build>& builds, const std::vector<Shape>& shapes, std::uint64_t seed) {
    for (const Build& b : builds)
        for (const Shape& s : shapes) {
            INFO("graph " << b.graph.name() << " config " << b.options.config->to_text()
                          << fmt::format(" M={} N={} K={} tile_pad={}", s.m, s.n, s.k, s.tile_pad));
            const Kernel kernel = Runtime::instance().compile(b.graph, b.options);
            verify::CheckProblem p;
            p.m = s.m;
            p.n = s.n;
            p.k = s.k;
            p.tile_pad = s.tile_pad;
            p.seed = seed++;
            require_pass(verify::check_on_device(kernel, p));
        }
    return seed;
}

}  // namespace

TEST_CASE("FP8 GEMMs with row, column and tensor scales match the reference on every Hopper config", "[gpu][fp8]") {
    if (!on_hopper()) {  // another GPU: FP8 is a clear error there
        CHECK_THROWS_WITH(Runtime::instance().compile(scaled_fp8(DType::E4M3)),
                          Catch::Contains("e4m3 operands need the Hopper mainloop"));
        return;
    }
    std::vector<Build> builds;
    for (DType input : {DType::E4M3, DType::E5M2})
        for (const KernelConfig& config : hopper_configs())
            for (const Graph& g : {scaled_fp8(input), tensorwise_fp8(input)}) builds.push_back({g, options_for(config)});
    warm_in_parallel(builds);
    // K: under one 128-element k-tile, a tail of 16 past whole k-tiles, many k-tiles; M and N not multiples of a
    // tile, N even (column pairs).
    check_at_shapes(builds, {{300, 264, 96}, {257, 1000, 1040}, {1024, 512, 4096}}, 800);
}

TEST_CASE("FP8 GEMMs of two types (e5m2 x e4m3, e4m3 x e5m2) match the reference on every Hopper config",
          "[gpu][fp8]") {
    if (!on_hopper()) {
        CHECK_THROWS_WITH(Runtime::instance().compile(scaled_fp8(DType::E5M2, DType::E4M3)),
                          Catch::Contains("e5m2 operands need the Hopper mainloop"));
        return;
    }
    std::vector<Build> builds;
    for (const auto& [a, b] : {std::pair{DType::E5M2, DType::E4M3}, std::pair{DType::E4M3, DType::E5M2}})
        for (const KernelConfig& config : hopper_configs()) builds.push_back({scaled_fp8(a, b), options_for(config)});
    warm_in_parallel(builds);
    // A tail of 16 past whole k-tiles with ragged M and N, and many k-tiles.
    check_at_shapes(builds, {{257, 1000, 1040}, {1024, 512, 4096}}, 850);
}

TEST_CASE("block-scaled FP8 GEMMs match the reference: partial k-blocks, ragged M and N, clusters, stream-K",
          "[gpu][fp8]") {
    if (skip_unless_hopper("FP8 operands need the Hopper mainloop (the cases above check the error elsewhere)"))
        return;
    // The tiles block scales take (cooperative 128 x 128 and 128 x 256), alone, in pairs along M and along N, and the
    // direct variant.
    std::vector<KernelConfig> configs = {HopperConfig{128, 128, 6, Schedule::Cooperative, 1},
                                         HopperConfig{128, 128, 6, Schedule::Cooperative, 2},
                                         HopperConfig{128, 128, 6, Schedule::Cooperative, 1, 2},
                                         HopperConfig{128, 256, 4, Schedule::Cooperative, 1},
                                         HopperConfig{128, 256, 4, Schedule::Cooperative, 2},
                                         HopperConfig{128, 256, 4, Schedule::Cooperative, 1, 2}};
    HopperConfig direct{128, 128, 6, Schedule::Cooperative, 1};
    direct.direct = true;
    configs.push_back(direct);
    std::vector<Build> builds;
    // B's scales per 128 x 128 block, in one type and two, and per row of B and 128 k (ScaleMode::Block1x128).
    for (const Graph& g : {block_scaled_graph(DType::E4M3), block_scaled_graph(DType::E5M2, DType::E4M3),
                           block_scaled_graph(DType::E4M3, std::nullopt, ScaleMode::Block1x128)})
        for (const KernelConfig& config : configs) builds.push_back({g, options_for(config)});
    warm_in_parallel(builds);
    // K: one partial block, 8 blocks of which the last holds 112, many blocks; M and N ragged (N: 1000 leaves a
    // partial last N-block of B's scales; 130 two blocks, one of 2 columns; 96 a 128 x 256 tile's second block past
    // N).
    std::uint64_t seed =
        check_at_shapes(builds, {{129, 130, 96}, {1000, 1000, 1008}, {512, 384, 4096}, {200, 96, 384}}, 900);
    // Stream-K pieces of a tile start mid-K: each reads the scales of its own k-blocks.
    set_stream_k_override(StreamK::Always);
    struct Restore {
        ~Restore() { set_stream_k_override(std::nullopt); }
    } restore;
    // B's scales per block on 128 x 128, then per row on 128 x 256 (Block1x128's default tile).
    for (const Build& build : {builds.front(), Build{builds.back().graph, options_for(configs[3])}}) {
        const Kernel kernel = Runtime::instance().compile(build.graph, build.options);
        verify::CheckProblem p;
        p.m = 4731;
        p.n = 1000;
        p.k = 1024;
        p.seed = seed++;
        require_pass(verify::check_on_device(kernel, p));
    }
}

TEST_CASE("reduce_group: values of each row's 128-column groups match the reference on the Hopper configs",
          "[gpu][fp8]") {
    if (skip_unless_hopper("the Hopper mainloop's pass (the portable one refuses it: a CPU test)")) return;
    std::vector<Build> builds;
    for (const Graph& g : {group_centering_graph(), group_quantizing_graph("group_quantize"),
                           group_quantizing_graph("group_quantize_residual", GemmSpec{}, true)})
        for (const KernelConfig& config : hopper_configs()) builds.push_back({g, options_for(config)});
    warm_in_parallel(builds);
    // N = 1000: the last group holds 104 columns; 130: a group of 2; K past one k-tile.
    check_at_shapes(builds, {{257, 1000, 256}, {129, 130, 72}, {1024, 512, 1024}}, 950);
}

TEST_CASE("reduce_group in tile programs: each row's 128-column group, and block-wise quantization", "[gpu][fp8]") {
    // Ragged M and N (the last group of 104 and of 2 columns), staged (aligned rows) and direct (N = 130).
    std::uint64_t seed = 980;
    for (const Graph& g : {group_centering_graph(Domain::Tile), blocks::quantize_e4m3_blockwise()})
        for (const auto& [m, n] : {std::pair<std::int64_t, std::int64_t>{257, 1000}, {129, 130}, {64, 4096}}) {
            INFO("graph " << g.name() << fmt::format(" M={} N={}", m, n));
            verify::CheckProblem p;
            p.m = m;
            p.n = n;
            p.seed = seed++;
            require_pass(verify::check_on_device(Runtime::instance().compile(g), p));
        }
}

TEST_CASE("tile_input_transposed: tile programs read N x M inputs, and quantize them block-wise, as the reference does",
          "[gpu][fp8]") {
    const bool fp8 = device_sm() >= 89;
    std::vector<Graph> graphs = {test::transposed_reading_graph(DType::BF16), test::transposed_reading_graph(DType::F32),
                                 blocks::quantize_e4m3_blockwise_t()};
    if (fp8) graphs.push_back(test::transposed_reading_graph(DType::E4M3));
    // Staged where a tile's M elements of each input row are whole 16-byte units ({256, 1024}; {64, 4096}: one
    // tile row; {272, 272}: a last tile of 16 rows and 16 columns), direct in the last tile row of {257, 1000} and
    // everywhere at {129, 130} and with padded rows (tile_pad); the groups of 128 columns ragged at N = 1000 and 130.
    std::uint64_t seed = 1200;
    for (const Graph& g : graphs) {
        if (!fp8 && g.name() == "quantize_e4m3_blockwise_t") continue;
        const Kernel kernel = Runtime::instance().compile(g);
        for (const auto& [m, n, pad] : {std::tuple<std::int64_t, std::int64_t, int>{256, 1024, 0}, {64, 4096, 0},
                                        {272, 272, 0}, {257, 1000, 0}, {129, 130, 0}, {256, 1024, 2}}) {
            INFO("graph " << g.name() << fmt::format(" M={} N={} tile_pad={}", m, n, pad));
            verify::CheckProblem p;
            p.m = m;
            p.n = n;
            p.tile_pad = pad;
            p.seed = seed++;
            require_pass(verify::check_on_device(kernel, p));
        }
    }
}

TEST_CASE("store_transposed: epilogues and tile programs write N x M copies that match the reference", "[gpu][fp8]") {
    if (skip_unless(device_sm() >= 89, "FP8 tile tensors need sm_89 or newer (a CPU test checks the error)")) return;
    std::vector<Build> builds;
    for (const KernelConfig& config : gemm_configs_under_test())
        for (DType fp8 : {DType::E4M3, DType::E5M2})
            builds.push_back({transposing_graph(Domain::Gemm, fp8), options_for(config)});
    warm_in_parallel(builds);
    // Ragged M and N (the last tile's rows and columns cut), and a padded output row that must survive. Epilogues
    // on 64-accumulator tiles stage their transposed outputs where M elements are whole 16-byte units ({256, ...},
    // {272, ...}: a last tile of 16 rows) and write them element by element otherwise (M = 300, 129).
    std::uint64_t seed =
        check_at_shapes(builds, {{300, 272, 200}, {129, 130, 64, 16}, {256, 272, 200}, {272, 1040, 128, 16}}, 1100);
    // Tile programs stage their transposed tiles where every row moves in 16-byte units ({256, 1024}; {272, 272}: a
    // last tile of 16 rows and 16 columns) and write element by element otherwise ({257, 1000}, {64, 130}).
    for (DType fp8 : {DType::E4M3, DType::E5M2})
        for (const auto& [m, n] :
             {std::pair<std::int64_t, std::int64_t>{257, 1000}, {64, 130}, {256, 1024}, {272, 272}}) {
            verify::CheckProblem p;
            p.m = m;
            p.n = n;
            p.seed = seed++;
            require_pass(verify::check_on_device(Runtime::instance().compile(transposing_graph(Domain::Tile, fp8)), p));
        }
}

TEST_CASE("FP8 operands TMA cannot load are a clear error, with no other mainloop to fall back to", "[gpu][fp8]") {
    if (!on_hopper()) {
        CHECK_THROWS_WITH(Runtime::instance().compile(scaled_fp8(DType::E5M2)),
                          Catch::Contains("e5m2 operands need the Hopper mainloop"));
        return;
    }
    const Kernel kernel = Runtime::instance().compile(scaled_fp8(DType::E4M3));
    verify::CheckProblem p;
    p.m = 256;
    p.n = 256;
    p.k = 256;
    p.operand_pad = 8;  // leading dimension 264 bytes: not a multiple of 16
    CHECK_THROWS_WITH(verify::check_on_device(kernel, p),
                      Catch::Contains("leading dimension 264") && Catch::Contains("16-byte") &&
                          !Catch::Contains("another mainloop"));
}

TEST_CASE("FP8 tile tensors: epilogues that write them and tile programs that read them match the reference",
          "[gpu][fp8]") {
    if (device_sm() < 89) {  // an older GPU: a clear error
        CHECK_THROWS_WITH(Runtime::instance().compile(fp8_reading_program()), Catch::Contains("needs sm_89 or newer"));
        return;
    }
    std::vector<Build> builds;
    for (const KernelConfig& config : gemm_configs_under_test())
        for (DType fp8 : {DType::E4M3, DType::E5M2})
            builds.push_back({quantizing_epilogue(fp8, GemmSpec{DType::BF16, Major::K, Major::MN}), options_for(config)});
    warm_in_parallel(builds);
    // Odd M and N, K past whole k-tiles; and a padded output row (tile_pad) that must survive.
    std::uint64_t seed = check_at_shapes(builds, {{300, 272, 200}, {1000, 1024, 512, 16}}, 900);
    const Kernel reader = Runtime::instance().compile(fp8_reading_program());
    for (const auto& [m, n] : {std::pair<int, int>{300, 272}, {2048, 4096}}) {
        INFO(fmt::format("fp8_read M={} N={}", m, n));
        verify::CheckProblem p;
        p.m = m;
        p.n = n;
        p.seed = seed++;
        require_pass(verify::check_on_device(reader, p));
    }
}

TEST_CASE("coda tune times a graph with transposed stores on random inputs of the right shapes", "[gpu][fp8][tools]") {
    if (skip_unless_hopper("FP8 graphs need the Hopper mainloop (the cases above check the error elsewhere)")) return;
    TempDir cache("coda-tune-transposed");
    // swiglu_backward_fp8_t stores dz and y transposed: [2N x M] and [N x M] outputs, bound as such.
    const CliRun tune = run_cli_timed("tune tools/graphs/swiglu_backward_fp8_t.coda --m 384 --n 256 --k 512 --iters 5 "
                                      "--config 'hopper bm=128 bn=128 bk=64 stages=6 cooperative'",
                                      cache.path().string(), 300);
    INFO(tune.output);
    CHECK(tune.status == 0);
    CHECK_THAT(tune.output, Catch::Contains("swiglu_backward_fp8_t") && !Catch::Contains("SKIPPED") &&
                                !Catch::Contains("expected shape"));
}
