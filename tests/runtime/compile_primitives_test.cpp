// Every primitive, every operand layout, both dtypes and every built-in epilogue compile under NVRTC for sm_80
// and sm_90a (no GPU needed), and ptxas reports no register spills for any of the kernels: portable on both,
// and on sm_90a also the Hopper mainloop with every named config.
#include <catch2/catch.hpp>

#include <algorithm>

#include <fmt/format.h>

#include "cache/kernel_cache.hpp"
#include "coda/blocks.hpp"
#include "mainloop/hopper.hpp"
#include "mainloop/portable.hpp"
#include "support/block_graphs.hpp"
#include "support/fp8_graphs.hpp"
#include "mainloop/mainloops.hpp"
#include "runtime/pipeline.hpp"
#include "support/temp_dir.hpp"
#include "tune/builtin_tuning.hpp"

using namespace coda;

namespace {

// Every one-operand op, each applied to a tame value so the graph is also numerically meaningful.
Graph unary_ops_graph() {
    Graph g = Graph::gemm("prims_unary");
    Value x = g.tanh(g.accumulator());
    Value pos = g.add(g.abs(x), g.constant(1.0f));
    Value terms[] = {g.neg(x),       g.exp(x),      g.exp2(x),        g.log(pos),       g.sqrt(pos),      g.rsqrt(pos),
                     g.sin(x),       g.cos(x),      g.sigmoid(x),     g.silu(x),        g.gelu_erf(x),
                     g.gelu_tanh(x), g.relu(x),     g.square(x),      g.round(x, DType::BF16),
                     g.round(x, DType::F16), g.round(x, DType::F32)};
    Value sum = terms[0];
    for (std::size_t i = 1; i < std::size(terms); ++i) sum = g.add(sum, terms[i]);
    g.store(sum, "out", DType::F32);
    return g;
}

// Every source, binary op, comparison and select, and every store dtype plus accumulate.
Graph binary_ops_graph(Domain domain) {
    Graph g = domain == Domain::Gemm ? Graph::gemm("prims_binary") : Graph::tile("prims_binary_tile");
    Value x = domain == Domain::Gemm ? g.accumulator() : g.tile_input("x", DType::F32);
    Value t16 = g.tile_input("t_bf16", DType::BF16);
    Value th = g.tile_input("t_f16", DType::F16);
    Value ti_raw = g.tile_input("t_i32", DType::I32);
    Value ti = g.to_f32(ti_raw);
    Value r = g.row_input("r", DType::F32);
    Value c = g.col_input("c", DType::BF16);
    Value s = g.scalar("s");
    Value y = g.add(g.sub(g.mul(x, t16), g.div(th, g.add(g.abs(r), g.constant(1.0f)))), g.max(ti, g.min(c, s)));
    Value masks = g.add(g.add(g.eq(g.row_index(), g.row_input("labels", DType::I32)), g.ne(x, t16)),
                        g.add(g.add(g.lt(x, r), g.le(x, c)), g.add(g.gt(x, s), g.ge(g.col_index(), g.row_index()))));
    Value z = g.select(masks, y, g.to_f32(g.col_index()));
    g.store(z, "out_bf16", DType::BF16);
    g.store(y, "out_f16", DType::F16);
    g.store(masks, "out_f32", DType::F32);
    g.store(ti_raw, "out_i32", DType::I32);
    g.accumulate(z, "acc_f32", DType::F32);
    g.accumulate(y, "acc_bf16", DType::BF16);
    return g;
}

// even / odd / join at every width, double-width inputs, half-width columns and stores.
Graph pair_ops_graph() {
    Graph g = Graph::gemm("prims_pairs");
    Value acc = g.accumulator();
    Value e = g.even(acc), o = g.odd(acc);
    Value theta = g.col_input("theta", DType::F32, Width::Half);
    Value rotated = g.join(g.sub(g.mul(e, theta), o), g.add(e, g.mul(o, theta)));
    Value wide = g.tile_input("wide", DType::BF16, Width::Double);
    Value we = g.even(wide), wo = g.odd(wide);
    g.store(g.mul(e, o), "half", DType::BF16);
    g.store(g.add(rotated, g.mul(we, wo)), "full", DType::BF16);
    g.store(g.join(g.mul(acc, we), wo), "double", DType::F16);
    return g;
}

// Every reduction op over rows and columns, at every width. Split in three graphs, as a real epilogue holds a
// few reductions, not fourteen: each one's per-thread partials live in registers next to the accumulators.
std::vector<Graph> reduction_graphs(Domain domain) {
    const ReduceOp ops[] = {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::SumSq, ReduceOp::Lse};
    std::vector<Graph> graphs;
    for (int part = 0; part < 3; ++part) {
        const std::string name = fmt::format("prims_reduce{}_{}", part, to_string(domain));
        Graph g = domain == Domain::Gemm ? Graph::gemm(name) : Graph::tile(name);
        Value x = domain == Domain::Gemm ? g.accumulator() : g.tile_input("x", DType::BF16);
        if (part == 0) {
            for (ReduceOp op : ops) g.reduce_row(x, op, fmt::format("row_{}", to_string(op)));
            g.reduce_row(g.even(x), ReduceOp::Lse, "row_half");
            g.reduce_row(g.join(x, x), ReduceOp::SumSq, "row_double");
        } else if (part == 1) {
            for (int i = 0; i < 3; ++i) g.reduce_col(x, ops[i], fmt::format("col_{}", to_string(ops[i])));
        } else {
            for (int i = 3; i < 5; ++i) g.reduce_col(x, ops[i], fmt::format("col_{}", to_string(ops[i])));
            g.reduce_col(g.even(x), ReduceOp::Sum, "col_half");
            g.reduce_col(g.join(x, x), ReduceOp::Max, "col_double");
        }
        graphs.push_back(g);
    }
    return graphs;
}

Graph finalize_graph() {
    Graph g = Graph::finalize("prims_finalize");
    Value sum = g.partials("p_sum", ReduceOp::Sum);
    Value mx = g.partials("p_max", ReduceOp::Max);
    Value mn = g.partials("p_min", ReduceOp::Min);
    Value lse = g.partials("p_lse", ReduceOp::Lse);
    Value v = g.add(g.add(sum, mx), g.mul(g.sub(mn, lse), g.scalar("s")));
    Value w = g.add(v, g.mul(g.to_f32(g.row_index()), g.row_input("r", DType::BF16)));
    g.store(g.rsqrt(g.add(g.abs(w), g.constant(1e-6f))), "out", DType::F32);
    g.accumulate(w, "acc", DType::F32);
    return g;
}

Graph identity_graph(GemmSpec spec) {
    Graph g = Graph::gemm(fmt::format("identity_{}_{}_{}", to_string(spec.input), to_string(spec.a), to_string(spec.b)),
                          spec);
    g.store(g.accumulator(), "D", spec.input);
    return g;
}

// Graphs whose per-thread column-reduction state does not fit in registers on the Hopper layout. A consumer thread
// keeps, per reduce_col, the values of each of the bn / 8 column pairs it visits (1, 2 or 4 for half, full or double
// width, twice for lse); more than 64 such floats spill (128 on cooperative 128 x 128, whose threads hold half the
// accumulators). README, Limits: two full-width column reductions already spill at bn = 256. Both graphs exceed 64
// on both Hopper configs tested below; they compile and run correctly, with spills.
bool known_hopper_spiller(const Graph& g, const std::optional<KernelConfig>& config) {
    return config && config->hopper() != nullptr &&
           (g.name() == "prims_reduce1_gemm" || g.name() == "prims_reduce2_gemm");
}

// The portable mainloop's default for a GEMM graph; nothing for the programs, which take no config.
std::optional<KernelConfig> portable_or_none(const Graph& g) {
    if (g.domain() == Domain::Gemm) return KernelConfig(PortableConfig{});
    return std::nullopt;
}

void require_compiles_without_spills(const Graph& g, const std::string& arch, KernelCache& cache,
                                     const std::optional<KernelConfig>& config) {
    INFO(g.name() << " for " << arch << " with " << (config ? config->to_text() : "no config"));
    const BuiltKernel built = build_kernel(g, BuildTarget{arch, &mainloop_for(g, config, arch), config}, cache);
    const CacheEntry& entry = *built.cached.entry;
    REQUIRE(entry.cubin.size() > 4);
    CHECK(entry.cubin.compare(0, 4, "\x7f" "ELF") == 0);
    bool found = false;
    std::string reported;  // for the failure message: which functions ptxas reported
    for (const ResourceUsage& u : entry.resources) reported += " " + u.function;
    INFO("kernel " << entry.kernel_name << "; ptxas reported:" << reported << "; cache hit "
                   << static_cast<int>(built.cached.hit));
    for (const ResourceUsage& u : entry.resources) {
        if (u.function != entry.kernel_name) continue;
        found = true;
        INFO("registers " << u.registers << ", stack " << u.stack_frame_bytes);
        CHECK(u.registers > 0);
        if (known_hopper_spiller(g, config)) {
            WARN(g.name() << " with " << config->to_text() << " spills " << u.spill_store_bytes << " bytes (known)");
            continue;
        }
        CHECK(u.spill_store_bytes == 0);
        CHECK(u.spill_load_bytes == 0);
        CHECK(u.wgmma_serialized == 0);
    }
    CHECK(found);
}

// A GEMM that promotes its k-blocks (block scales, or acc=promoted): its default Hopper config at `shape` is
// cooperative, and it compiles for sm_90a without spills there, staged and direct.
void require_default_cooperative_compiles(const Graph& g, const ProblemShape& shape, KernelCache& cache) {
    const KernelConfig config = hopper_mainloop().default_config(g, shape);
    REQUIRE(config.hopper() != nullptr);
    CHECK(config.hopper()->schedule == Schedule::Cooperative);
    require_compiles_without_spills(g, "sm_90a", cache, config);
    HopperConfig direct = *config.hopper();
    direct.direct = true;
    require_compiles_without_spills(g, "sm_90a", cache, KernelConfig(direct));
}

}  // namespace

TEST_CASE("every primitive compiles for sm_80 and sm_90a without spills", "[compile]") {
    test::TempDir dir("coda-prims");
    KernelCache cache(dir.path(), false);
    std::vector<Graph> graphs = {unary_ops_graph(), binary_ops_graph(Domain::Gemm), binary_ops_graph(Domain::Tile),
                                 pair_ops_graph(), finalize_graph()};
    for (Domain d : {Domain::Gemm, Domain::Tile})
        for (const Graph& g : reduction_graphs(d)) graphs.push_back(g);
    // The portable mainloop on both archs, and the Hopper mainloop's two schedules (cooperative and ping-pong lay
    // the accumulator out differently).
    for (const std::string arch : {"sm_80", "sm_90a"})
        for (const Graph& g : graphs) require_compiles_without_spills(g, arch, cache, portable_or_none(g));
    for (const Graph& g : graphs) {
        if (g.domain() != Domain::Gemm) continue;
        require_compiles_without_spills(g, "sm_90a", cache, HopperConfig{128, 256, 4, Schedule::Cooperative, 1});
        require_compiles_without_spills(g, "sm_90a", cache, HopperConfig{128, 128, 6, Schedule::PingPong, 1});
    }
}

TEST_CASE("all four operand layouts in bf16 and f16 compile for sm_80 and sm_90a without spills", "[compile]") {
    test::TempDir dir("coda-layouts");
    KernelCache cache(dir.path(), false);
    for (const std::string arch : {"sm_80", "sm_90a"})
        for (DType input : {DType::BF16, DType::F16})
            for (Major a : {Major::K, Major::MN})
                for (Major b : {Major::K, Major::MN})
                    require_compiles_without_spills(identity_graph({input, a, b}), arch, cache, PortableConfig{});
    for (DType input : {DType::BF16, DType::F16})
        for (Major a : {Major::K, Major::MN})
            for (Major b : {Major::K, Major::MN})
                for (const NamedConfig& named : hopper_mainloop().candidates())
                    require_compiles_without_spills(identity_graph({input, a, b}), "sm_90a", cache, named.config);
}

// An FP8 GEMM's usual epilogue: the accumulator times A's row scales and B's column scales (per-tensor scales are
// the same with scalars), stored in bf16.
Graph fp8_scaled_graph(DType input, std::optional<DType> input_b = std::nullopt) {
    const GemmSpec spec{input, Major::K, Major::K, input_b};
    const std::string name = input_b ? fmt::format("scaled_{}_{}", to_string(input), to_string(*input_b))
                                     : fmt::format("scaled_{}", to_string(input));
    Graph g = Graph::gemm(name, spec);
    Value scale = g.mul(g.row_input("scale_a", DType::F32), g.col_input("scale_b", DType::F32), "scale");
    g.store(g.mul(g.accumulator(), scale, "scaled"), "D", DType::BF16);
    return g;
}

TEST_CASE("FP8 operands, both K-major, compile for sm_90a on every Hopper candidate without spills", "[compile]") {
    test::TempDir dir("coda-fp8");
    KernelCache cache(dir.path(), false);
    for (DType input : {DType::E4M3, DType::E5M2})
        for (const NamedConfig& named : hopper_mainloop().candidates())
            require_compiles_without_spills(fp8_scaled_graph(input), "sm_90a", cache, named.config);
}

TEST_CASE("FP8 operands of two types (e5m2 x e4m3, e4m3 x e5m2) compile for sm_90a on every Hopper candidate "
          "without spills", "[compile]") {
    test::TempDir dir("coda-fp8-mixed");
    KernelCache cache(dir.path(), false);
    for (const auto& [a, b] : {std::pair{DType::E5M2, DType::E4M3}, std::pair{DType::E4M3, DType::E5M2}})
        for (const NamedConfig& named : hopper_mainloop().candidates())
            require_compiles_without_spills(fp8_scaled_graph(a, b), "sm_90a", cache, named.config);
}

TEST_CASE("block-scaled FP8 compiles for sm_90a on its cooperative 128 x 128 and 128 x 256 tiles without spills, and refuses others",
          "[compile]") {
    test::TempDir dir("coda-fp8-block");
    KernelCache cache(dir.path(), false);
    const Graph graphs[] = {test::block_scaled_graph(DType::E4M3), test::block_scaled_graph(DType::E5M2, DType::E4M3)};
    for (const Graph& g : graphs) {
        require_default_cooperative_compiles(g, ProblemShape{}, cache);
        for (const NamedConfig& named : hopper_mainloop().candidates()) {
            const HopperConfig& h = *named.config.hopper();
            INFO(named.name);
            if (h.schedule == Schedule::Cooperative && h.bm == 128 && (h.bn == 128 || h.bn == 256))
                require_compiles_without_spills(g, "sm_90a", cache, named.config);
            else
                CHECK_THROWS_WITH(build_kernel(g, BuildTarget{"sm_90a", &hopper_mainloop(), named.config}, cache),
                                  Catch::Contains("block-scaled FP8") && Catch::Contains("cooperative 128 x 128 or 128 x 256"));
        }
    }
}

TEST_CASE("promoted FP8 accumulation (per-tensor e4m3, and an e5m2 x e4m3 weight gradient added into f32) compiles "
          "for sm_90a without spills on its default config, its direct variant and every candidate coda tune may "
          "time for it, and is refused elsewhere",
          "[compile]") {
    test::TempDir dir("coda-fp8-promoted");
    KernelCache cache(dir.path(), false);
    const GemmSpec wgrad_spec{DType::E5M2, Major::K, Major::K, DType::E4M3, ScaleMode::Off, Accumulation::Promoted};
    GemmSpec rowwise_spec{DType::E4M3, Major::K, Major::K};
    rowwise_spec.accumulation = Accumulation::Promoted;
    // The row-wise weight gradient's epilogue reads a row and a column vector beside the block sum.
    const Graph graphs[] = {test::tensorwise_graph(DType::E4M3, Accumulation::Promoted),
                            blocks::wgrad_fp8_accumulate(wgrad_spec),
                            blocks::wgrad_fp8_rowwise_accumulate(rowwise_spec)};
    for (const Graph& g : graphs) {
        require_default_cooperative_compiles(g, ProblemShape{16384, 4096, 16384}, cache);
        const std::vector<NamedConfig> legal = hopper_mainloop().candidates_for(g, "sm_90a");
        CHECK(legal.size() == 3);
        for (const NamedConfig& named : legal) require_compiles_without_spills(g, "sm_90a", cache, named.config);
        for (const NamedConfig& named : hopper_mainloop().candidates()) {
            const bool is_legal = std::any_of(legal.begin(), legal.end(),
                                              [&](const NamedConfig& l) { return l.config == named.config; });
            INFO(named.name);
            if (!is_legal)
                CHECK_THROWS_WITH(build_kernel(g, BuildTarget{"sm_90a", &hopper_mainloop(), named.config}, cache),
                                  Catch::Contains("promoted FP8 accumulation (acc=promoted)") &&
                                      Catch::Contains("cooperative 128 x 128 or 128 x 256"));
        }
        CHECK_THROWS_WITH(build_kernel(g, BuildTarget{"sm_89", &portable_mainloop(), KernelConfig(PortableConfig{})},
                                       cache),
                          Catch::Contains("operands need the Hopper mainloop"));
    }
}

TEST_CASE("reduce_group compiles on every Hopper config and in tile programs without spills, and is an error on the portable mainloop", "[compile]") {
    test::TempDir dir("coda-group");
    KernelCache cache(dir.path(), false);
    const Graph bf16 = test::group_quantizing_graph("group_quantize");
    // With a residual tile input in the operand: read from global memory by the group pass, staged for the visits.
    const Graph residual = test::group_quantizing_graph("group_quantize_residual", GemmSpec{}, true);
    const GemmSpec blockwise{DType::E4M3, Major::K, Major::K, std::nullopt, ScaleMode::Block128x128};
    const Graph fp8 = test::group_quantizing_graph("group_quantize_fp8", blockwise);
    const Graph fp8_residual = test::group_quantizing_graph("group_quantize_fp8_residual", blockwise, true);
    for (const NamedConfig& named : hopper_mainloop().candidates()) {
        require_compiles_without_spills(bf16, "sm_90a", cache, named.config);
        HopperConfig direct = *named.config.hopper();
        direct.direct = true;
        require_compiles_without_spills(bf16, "sm_90a", cache, KernelConfig(direct));
    }
    for (const NamedConfig& named : hopper_mainloop().candidates()) {
        require_compiles_without_spills(residual, "sm_90a", cache, named.config);
        HopperConfig direct = *named.config.hopper();
        direct.direct = true;
        require_compiles_without_spills(residual, "sm_90a", cache, KernelConfig(direct));
    }
    for (const Graph& g : {fp8, fp8_residual})
        require_compiles_without_spills(g, "sm_90a", cache, hopper_mainloop().default_config(g, ProblemShape{}));
    // Tile programs make their group values from their inputs, on every arch.
    for (const std::string arch : {"sm_80", "sm_90a"})
        require_compiles_without_spills(test::group_centering_graph(Domain::Tile), arch, cache, std::nullopt);
    require_compiles_without_spills(blocks::quantize_e4m3_blockwise(), "sm_90a", cache, std::nullopt);
    CHECK_THROWS_WITH(build_kernel(bf16, BuildTarget{"sm_89", &portable_mainloop(), KernelConfig(PortableConfig{})}, cache),
                      Catch::Contains("reduce_group needs the Hopper mainloop"));
}

TEST_CASE("store_transposed compiles in gemm epilogues on every mainloop and in tile programs without spills",
          "[compile]") {
    test::TempDir dir("coda-transposed");
    KernelCache cache(dir.path(), false);
    const Graph gemm = test::transposing_graph(Domain::Gemm, DType::E4M3);
    for (const NamedConfig& named : hopper_mainloop().candidates()) {
        require_compiles_without_spills(gemm, "sm_90a", cache, named.config);
        HopperConfig direct = *named.config.hopper();
        direct.direct = true;
        require_compiles_without_spills(gemm, "sm_90a", cache, KernelConfig(direct));
    }
    require_compiles_without_spills(test::transposing_graph(Domain::Gemm, DType::E5M2), "sm_89", cache,
                                    KernelConfig(PortableConfig{}));
    for (const std::string arch : {"sm_89", "sm_90a"})
        require_compiles_without_spills(test::transposing_graph(Domain::Tile, DType::E4M3), arch, cache, std::nullopt);
    // Its read: tile programs staging an N x M input (FP8 from sm_89 on), and one with a group reduction over it.
    // (On sm_89 ptxas gives quantize_e4m3_blockwise_t 48 registers and an 8-byte stack frame with 8 bytes of spill
    // stores, not on sm_90a, its target; the PTX holds no local array.)
    require_compiles_without_spills(test::transposed_reading_graph(DType::BF16), "sm_80", cache, std::nullopt);
    for (const std::string arch : {"sm_89", "sm_90a"})
        require_compiles_without_spills(test::transposed_reading_graph(DType::E4M3), arch, cache, std::nullopt);
    require_compiles_without_spills(blocks::quantize_e4m3_blockwise_t(), "sm_90a", cache, std::nullopt);
}

TEST_CASE("FP8 operands in another layout, or on the portable mainloop, are a clear error", "[compile]") {
    test::TempDir dir("coda-fp8-errors");
    KernelCache cache(dir.path(), false);
    const auto build = [&](const Graph& g, const std::string& arch, const std::optional<KernelConfig>& config) {
        build_kernel(g, BuildTarget{arch, &mainloop_for(g, config, arch), config}, cache);
    };
    for (Major a : {Major::K, Major::MN})
        for (Major b : {Major::K, Major::MN}) {
            if (a == Major::K && b == Major::K) continue;
            Graph g = Graph::gemm("fp8_layout", GemmSpec{DType::E4M3, a, b});
            g.store(g.accumulator(), "D", DType::BF16);
            INFO("a=" << to_string(a) << " b=" << to_string(b));
            CHECK_THROWS_WITH(build(g, "sm_90a", std::nullopt),
                              Catch::Contains("must both be K-major") && Catch::Contains("FP8 MMA"));
        }
    CHECK_THROWS_WITH(build(fp8_scaled_graph(DType::E5M2), "sm_80", std::nullopt),
                      Catch::Contains("e5m2 operands need the Hopper mainloop"));
    CHECK_THROWS_WITH(build(fp8_scaled_graph(DType::E4M3), "sm_90a", KernelConfig(PortableConfig{})),
                      Catch::Contains("e4m3 operands need the Hopper mainloop"));
    CHECK_THROWS_WITH(build(fp8_scaled_graph(DType::E5M2, DType::E4M3), "sm_90a", KernelConfig(PortableConfig{})),
                      Catch::Contains("e5m2 operands need the Hopper mainloop"));
    // FP8 tile tensors convert with PTX that sm_89 has and sm_80 does not.
    Graph stores = Graph::gemm("fp8_store", GemmSpec{DType::BF16, Major::K, Major::K});
    stores.store(stores.accumulator(), "D", DType::E4M3);
    CHECK_THROWS_WITH(build(stores, "sm_80", KernelConfig(PortableConfig{})),
                      Catch::Contains("e4m3 tensor 'D' needs sm_89 or newer"));
}

TEST_CASE("FP8 tile tensors compile for sm_89 and sm_90a on every mainloop without spills", "[compile]") {
    test::TempDir dir("coda-fp8-tiles");
    KernelCache cache(dir.path(), false);
    for (const std::string arch : {"sm_89", "sm_90a"}) {
        require_compiles_without_spills(test::quantizing_epilogue(DType::E4M3), arch, cache, KernelConfig(PortableConfig{}));
        require_compiles_without_spills(test::fp8_reading_program(), arch, cache, std::nullopt);
    }
    for (const NamedConfig& named : hopper_mainloop().candidates()) {
        require_compiles_without_spills(test::quantizing_epilogue(DType::E4M3), "sm_90a", cache, named.config);
        HopperConfig direct = *named.config.hopper();
        direct.direct = true;
        require_compiles_without_spills(test::quantizing_epilogue(DType::E4M3), "sm_90a", cache, KernelConfig(direct));
    }
}

TEST_CASE("every FP8 block epilogue compiles for sm_90a without spills", "[compile]") {
    test::TempDir dir("coda-blocks-fp8");
    KernelCache cache(dir.path(), false);
    std::vector<Graph> graphs = blocks::llama_block_fp8();
    for (const Graph& g : blocks::llama_block_fp8_rowwise()) graphs.push_back(g);
    for (const Graph& g : graphs) {
        if (g.domain() != Domain::Gemm) {
            require_compiles_without_spills(g, "sm_90a", cache, std::nullopt);
            continue;
        }
        const bool transposed = std::any_of(g.nodes().begin(), g.nodes().end(),
                                            [](const Node& n) { return n.op == Op::StoreTransposed; });
        if (transposed) {  // their default, cooperative 128 x 128 (the other tiles spill them), and its direct variant
            HopperConfig tile = *hopper_mainloop().default_config(g, ProblemShape{}).hopper();
            CHECK(tile == HopperConfig{128, 128, 6, Schedule::Cooperative, 1});
            require_compiles_without_spills(g, "sm_90a", cache, tile);
            tile.direct = true;
            require_compiles_without_spills(g, "sm_90a", cache, tile);
            continue;
        }
        // Every named Hopper config, and the direct variant of the default one.
        for (const NamedConfig& named : hopper_mainloop().candidates())
            require_compiles_without_spills(g, "sm_90a", cache, named.config);
        HopperConfig direct = *hopper_mainloop().default_config(g, ProblemShape{}).hopper();
        direct.direct = true;
        require_compiles_without_spills(g, "sm_90a", cache, direct);
    }
}

TEST_CASE("every block-wise FP8 block epilogue compiles for sm_90a without spills", "[compile]") {
    test::TempDir dir("coda-blocks-fp8-blockwise");
    KernelCache cache(dir.path(), false);
    for (const Graph& g : blocks::llama_block_fp8_blockwise()) {
        if (g.domain() != Domain::Gemm) {
            require_compiles_without_spills(g, "sm_90a", cache, std::nullopt);
            continue;
        }
        // The one tile a block-scaled GEMM takes (its default), alone and in pairs, and its direct variant.
        const HopperConfig tile = *hopper_mainloop().default_config(g, ProblemShape{}).hopper();
        for (const auto& [cluster_m, cluster_n] : {std::pair<int, int>{1, 1}, {2, 1}, {1, 2}}) {
            HopperConfig c = tile;
            c.cluster_m = cluster_m;
            c.cluster_n = cluster_n;
            require_compiles_without_spills(g, "sm_90a", cache, c);
        }
        HopperConfig direct = tile;
        direct.direct = true;
        require_compiles_without_spills(g, "sm_90a", cache, direct);
    }
}

TEST_CASE("every built-in block epilogue compiles for sm_80 and sm_90a without spills", "[compile]") {
    test::TempDir dir("coda-blocks");
    KernelCache cache(dir.path(), false);
    for (const std::string arch : {"sm_80", "sm_90a"})
        for (const Graph& g : blocks::llama_block()) require_compiles_without_spills(g, arch, cache, portable_or_none(g));
    // Every named Hopper config (what coda tune may pick, the default among them) for every GEMM epilogue.
    for (const Graph& g : blocks::llama_block())
        if (g.domain() == Domain::Gemm)
            for (const NamedConfig& named : hopper_mainloop().candidates())
                require_compiles_without_spills(g, "sm_90a", cache, named.config);
    // And the direct variant of each one's default config: what launches with unaligned tile tensors run on.
    for (const Graph& g : blocks::llama_block())
        if (g.domain() == Domain::Gemm) {
            const KernelConfig config = hopper_mainloop().default_config(g, ProblemShape{});
            REQUIRE(config.hopper() != nullptr);
            HopperConfig direct = *config.hopper();
            direct.direct = true;
            require_compiles_without_spills(g, "sm_90a", cache, direct);
        }
}

TEST_CASE("the shipped tuning records' kernels compile for sm_90a without spills", "[compile]") {
    test::TempDir dir("coda-shipped-tuning");
    KernelCache cache(dir.path(), false);
    for (const TuningRecord& r : builtin_tuning_db().records()) {
        const std::optional<Graph> g = test::block_graph_with_hash(r.graph_hash);
        REQUIRE(g.has_value());  // (the [tune] test names the record whose graph is gone)
        require_compiles_without_spills(*g, "sm_90a", cache, r.config);
    }
}
