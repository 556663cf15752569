// The block's block-wise FP8 epilogues (blocks.hpp, "block-wise"): the tensorwise graphs' dataflow on block-scaled
// GEMMs, every tensor a later GEMM reads quantized by the epilogue that makes it with its row groups' own scales.
// tools/graphs/*.coda hold their canonical text too.
#include "coda/blocks.hpp"

#include "blocks/block_parts.hpp"

namespace coda::blocks {

Graph rms_entry_fp8_blockwise() {
    Graph g = Graph::tile("rms_entry_fp8_blockwise");
    Value x = g.tile_input("x", DType::BF16);
    Value gamma = g.col_input("gamma", DType::BF16);
    parts::store_fp8_grouped(g, g.mul(x, gamma, "h_value"), "h");
    g.reduce_row(x, ReduceOp::SumSq, "x1_sumsq");
    return g;
}

Graph quantize_e4m3_blockwise_t() {
    Graph g = Graph::tile("quantize_e4m3_blockwise_t");
    parts::store_fp8_grouped(g, g.tile_input_transposed("x", DType::BF16), "x");
    return g;
}

Graph transpose_e4m3() {
    Graph g = Graph::tile("transpose_e4m3");
    // e4m3 -> f32 -> e4m3 is exact, NaN included (cvt.rn.satfinite keeps NaN).
    g.store_transposed(g.tile_input("x", DType::E4M3), "x_t", DType::E4M3);
    return g;
}

Graph qkv_rope_fp8_blockwise(GemmSpec spec) {
    Graph g = Graph::gemm("qkv_rope_fp8_blockwise", spec);
    Value z = parts::rms_scaled(g, g.accumulator("acc"), "z_value");
    g.store(parts::rotate_pairs(g, z, parts::Rotation::Forward), "qkv", DType::BF16);
    return g;
}

namespace {

// out_proj's epilogue on a block-scaled GEMM, with h quantized by row group for the next one or kept in bf16.
Graph residual_producer(const std::string& name, GemmSpec spec, bool fp8_h) {
    Graph g = Graph::gemm(name, spec);
    parts::residual_outputs(g, g.accumulator("acc"), [fp8_h](Graph& gr, Value h) {
        if (fp8_h)
            parts::store_fp8_grouped(gr, h, "h");
        else
            gr.store(h, "h", DType::BF16);
    });
    return g;
}

}  // namespace

Graph out_proj_fp8_blockwise(GemmSpec spec) { return residual_producer("out_proj_fp8_blockwise", spec, true); }

Graph out_proj_fp8_blockwise_bf16_h(GemmSpec spec) {
    return residual_producer("out_proj_fp8_blockwise_bf16_h", spec, false);
}

Graph gate_up_swiglu_fp8_blockwise(GemmSpec spec) {
    Graph g = Graph::gemm("gate_up_swiglu_fp8_blockwise", spec);
    parts::swiglu_outputs(g, parts::rms_scaled(g, g.accumulator("acc"), "z_value"));
    return g;
}

Graph dgrad_fp8_blockwise(GemmSpec spec) {
    Graph g = Graph::gemm("dgrad_fp8_blockwise", spec);
    g.store(g.accumulator("acc"), "D", DType::BF16);
    return g;
}

Graph swiglu_backward_fp8_blockwise(GemmSpec spec) {
    Graph g = Graph::gemm("swiglu_backward_fp8_blockwise", spec);
    parts::store_fp8_grouped(g, parts::swiglu_gradient(g, g.accumulator("dy")), "dz");
    return g;
}

Graph wgrad_fp8_blockwise_accumulate(GemmSpec spec) {
    Graph g = Graph::gemm("wgrad_fp8_blockwise_accumulate", spec);
    g.accumulate(g.accumulator("acc"), "D", DType::F32);
    return g;
}

namespace {

// rmsnorm_backward_residual on a block-scaled GEMM, with dx also quantized by row group for the next one or not.
Graph norm_backward_residual(const std::string& name, GemmSpec spec, bool fp8_dx) {
    Graph g = Graph::gemm(name, spec);
    parts::EmitOperand emit_dx;
    if (fp8_dx) emit_dx = [](Graph& gr, Value dx) { parts::store_fp8_grouped(gr, dx, "dx"); };
    parts::norm_backward_outputs(g, parts::residual_norm_backward(g, g.accumulator("d_out"), emit_dx));
    return g;
}

}  // namespace

Graph rmsnorm_backward_residual_fp8_blockwise(GemmSpec spec) {
    return norm_backward_residual("rmsnorm_backward_residual_fp8_blockwise", spec, true);
}

Graph rmsnorm_backward_residual_fp8_blockwise_bf16_dx(GemmSpec spec) {
    return norm_backward_residual("rmsnorm_backward_residual_fp8_blockwise_bf16_dx", spec, false);
}

}  // namespace coda::blocks
