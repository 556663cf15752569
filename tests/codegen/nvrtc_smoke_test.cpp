// Smoke test: a few generated kernels (gemm with every layout flag, a tile program over every width with
// row and column reductions, a finalizer) compile under NVRTC for sm_90a. No GPU is needed.
#include <catch2/catch.hpp>

#include "codegen/codegen_test_graphs.hpp"
#include "codegen/kernel_source.hpp"
#include "compile/nvrtc_compiler.hpp"
#include "ir/check_graph.hpp"
#include "mainloop/mainloops.hpp"

namespace coda {
namespace {

// `cfg`: a GEMM graph's config; the programs take none.
void compile_and_check(const Graph& g, const std::optional<KernelConfig>& cfg = std::nullopt) {
    const KernelSource k = generate_kernel_source(check_graph(g), mainloop_for(g, cfg, "sm_90a"), cfg, "sm_90a");
    CompileRequest request{k.source, g.name() + ".cu", {k.kernel_expression}, "sm_90a"};
    INFO(k.source);
    const CompiledModule m = compile_cuda(request);
    CHECK(m.cubin.size() > 4);
    CHECK(m.cubin.compare(0, 4, "\x7f" "ELF") == 0);
    REQUIRE(m.lowered.size() == 1);
    CHECK(m.lowered[0].first == k.kernel_expression);
    CHECK_FALSE(m.lowered[0].second.empty());
    for (const ResourceUsage& r : m.resources) {
        INFO(r.function);
        CHECK(r.registers > 0);
        CHECK(r.spill_store_bytes == 0);
        CHECK(r.spill_load_bytes == 0);
    }
}

// A tile program that touches every width, i32 sources, row x column broadcast, both reductions,
// accumulate, rounding and every pair op.
Graph wide_tile_program() {
    Graph g = Graph::tile("wide");
    Value x = g.tile_input("x", DType::BF16, Width::Double);
    Value labels = g.row_input("labels", DType::I32);
    Value hit = g.eq(g.col_index(Width::Half), labels, "hit");
    Value e = g.even(x, "e");
    Value o = g.odd(x, "o");
    Value s = g.silu(g.even(e)) * g.odd(o);
    Value picked = g.select(hit, s, g.constant(0.0f), "picked");
    Value angle = g.mul(g.row_input("pos", DType::F32), g.col_input("theta", DType::F16, Width::Half), "angle");
    // Not sin/cos: their large-argument slow path (a called routine with a stack frame) spills here.
    Value rot = g.join(picked * g.tanh(angle), picked * g.exp(angle), "rot");
    g.store(g.round(rot, DType::BF16), "y", DType::F16);
    g.accumulate(g.join(rot, rot), "acc_out", DType::F32);
    g.reduce_row(picked, ReduceOp::Lse, "lse");
    g.reduce_col(rot, ReduceOp::SumSq, "colsq");
    g.reduce_col(x, ReduceOp::Max, "colmax");
    return g;
}

TEST_CASE("generated kernels compile under NVRTC for sm_90a", "[codegen][nvrtc]") {
    SECTION("out-proj gemm, portable mainloop") { compile_and_check(test::out_proj_graph(), PortableConfig{}); }
    SECTION("f16 gemm with M-major A and N-major B, column partials") {
        Graph g = Graph::gemm("dgamma", GemmSpec{DType::F16, Major::MN, Major::MN});
        Value acc = g.accumulator();
        g.accumulate(acc, "dx", DType::F32);
        g.reduce_col(g.even(acc), ReduceOp::Sum, "dg");
        compile_and_check(g, PortableConfig{128, 128, 32, 2, 4, 3});
    }
    SECTION("tile program over every width") { compile_and_check(wide_tile_program()); }
    SECTION("finalizer") {
        Graph g = Graph::finalize("loss");
        Value lse = g.partials("lse_parts", ReduceOp::Lse);
        Value target = g.partials("target_parts", ReduceOp::Sum);
        g.store(lse, "lse", DType::F32);
        g.store(g.round(lse - target, DType::BF16) * g.scalar("inv_count"), "loss", DType::BF16);
        compile_and_check(g);
    }
}

}  // namespace
}  // namespace coda
