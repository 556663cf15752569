// The block's row-wise FP8 epilogues (blocks.hpp, "row-wise"): the tensorwise graphs' dataflow with a scale per row
// of A and per column of B, and every tensor a later GEMM reads in FP8 stored in bf16 beside its row amax partials,
// for a quantize tile program to read once the whole row's amax is known. tools/graphs/*.coda hold their canonical
// text too.
#include "coda/blocks.hpp"

#include "blocks/block_parts.hpp"

namespace coda::blocks {
namespace {

// acc * a_scale[m] * b_scale[n]: A's row scale and B's column (output channel) scale, one multiply each a visit.
Value rowwise_accumulator(Graph& g, const char* name) {
    Value acc = g.accumulator(name);
    Value a_scale = g.row_input("a_scale", DType::F32);
    Value b_scale = g.col_input("b_scale", DType::F32);
    Value row_scaled = g.mul(acc, a_scale, "row_scaled_acc");
    return g.mul(row_scaled, b_scale, "scaled_acc");
}

// The row partials (Max) of |t| in t_amax: each row's amax, once they are combined over the row's tiles.
void row_amax(Graph& g, Value t, const std::string& name) {
    Value magnitude = g.abs(t, name + "_magnitude");
    g.reduce_row(magnitude, ReduceOp::Max, name + "_amax");
}

// x * [gamma *] x_fp8_inv_scale[m] in e4m3 (saturating): the second pass row-wise scales need.
Graph quantize_rows(const std::string& name, bool gamma) {
    Graph g = Graph::tile(name);
    Value x = g.tile_input("x", DType::BF16);
    if (gamma) x = g.mul(x, g.col_input("gamma", DType::BF16), "h_value");
    Value inv_scale = g.row_input("x_fp8_inv_scale", DType::F32);
    g.store(g.mul(x, inv_scale, "x_quantized"), "x_fp8", DType::E4M3);
    return g;
}

// out_proj's epilogue on row-wise FP8 operands, with h's row amax for its quantization or h stored in bf16.
Graph residual_producer(const std::string& name, GemmSpec spec, bool fp8_h) {
    Graph g = Graph::gemm(name, spec);
    parts::residual_outputs(g, rowwise_accumulator(g, "acc"), [fp8_h](Graph& gr, Value h) {
        if (fp8_h)
            row_amax(gr, h, "h");
        else
            gr.store(h, "h", DType::BF16);
    });
    return g;
}

// rmsnorm_backward_residual on row-wise FP8 operands, with dx's row amax or not.
Graph norm_backward_residual(const std::string& name, GemmSpec spec, bool fp8_dx) {
    Graph g = Graph::gemm(name, spec);
    parts::EmitOperand emit_dx;
    if (fp8_dx) emit_dx = [](Graph& gr, Value dx) { row_amax(gr, dx, "dx"); };
    parts::norm_backward_outputs(g, parts::residual_norm_backward(g, rowwise_accumulator(g, "d_out"), emit_dx));
    return g;
}

}  // namespace

Graph rms_entry_fp8_rowwise() {
    Graph g = Graph::tile("rms_entry_fp8_rowwise");
    Value x = g.tile_input("x", DType::BF16);
    Value gamma = g.col_input("gamma", DType::BF16);
    row_amax(g, g.mul(x, gamma, "h_value"), "h");
    g.reduce_row(x, ReduceOp::SumSq, "x1_sumsq");
    return g;
}

Graph quantize_e4m3_rowwise() { return quantize_rows("quantize_e4m3_rowwise", false); }

Graph quantize_e4m3_rowwise_gamma() { return quantize_rows("quantize_e4m3_rowwise_gamma", true); }

Graph qkv_rope_fp8_rowwise(GemmSpec spec) {
    Graph g = Graph::gemm("qkv_rope_fp8_rowwise", spec);
    Value z = parts::rms_scaled(g, rowwise_accumulator(g, "acc"), "z_value");
    g.store(parts::rotate_pairs(g, z, parts::Rotation::Forward), "qkv", DType::BF16);
    return g;
}

Graph out_proj_fp8_rowwise(GemmSpec spec) { return residual_producer("out_proj_fp8_rowwise", spec, true); }

Graph out_proj_fp8_rowwise_bf16_h(GemmSpec spec) {
    return residual_producer("out_proj_fp8_rowwise_bf16_h", spec, false);
}

Graph gate_up_swiglu_fp8_rowwise(GemmSpec spec) {
    Graph g = Graph::gemm("gate_up_swiglu_fp8_rowwise", spec);
    Value y = parts::swiglu_outputs(g, parts::rms_scaled(g, rowwise_accumulator(g, "acc"), "z_value"));
    row_amax(g, y, "y");
    return g;
}

Graph dgrad_fp8_rowwise(GemmSpec spec) {
    Graph g = Graph::gemm("dgrad_fp8_rowwise", spec);
    g.store(rowwise_accumulator(g, "acc"), "D", DType::BF16);
    return g;
}

Graph swiglu_backward_fp8_rowwise(GemmSpec spec) {
    Graph g = Graph::gemm("swiglu_backward_fp8_rowwise", spec);
    row_amax(g, parts::swiglu_gradient(g, rowwise_accumulator(g, "dy")), "dz");
    return g;
}

Graph rmsnorm_backward_residual_fp8_rowwise(GemmSpec spec) {
    return norm_backward_residual("rmsnorm_backward_residual_fp8_rowwise", spec, true);
}

Graph rmsnorm_backward_residual_fp8_rowwise_bf16_dx(GemmSpec spec) {
    return norm_backward_residual("rmsnorm_backward_residual_fp8_rowwise_bf16_dx", spec, false);
}

Graph quantize_e4m3_colwise_t() {
    Graph g = Graph::tile("quantize_e4m3_colwise_t");
    Value x = g.tile_input("x", DType::BF16);
    Value inv_scale = g.col_input("x_fp8_inv_scale", DType::F32);
    g.store_transposed(g.mul(x, inv_scale, "x_quantized"), "x_fp8_t", DType::E4M3);
    return g;
}

Graph wgrad_fp8_rowwise_accumulate(GemmSpec spec) {
    Graph g = Graph::gemm("wgrad_fp8_rowwise_accumulate", spec);
    g.accumulate(rowwise_accumulator(g, "acc"), "D", DType::F32);
    return g;
}

Graph rope_backward_from_output_fp8_rowwise() {
    return parts::rope_backward_from_output("rope_backward_from_output_fp8_rowwise", [](Graph& g, Value dz) {
        g.store(dz, "dz", DType::BF16);
        row_amax(g, dz, "dz");
    });
}

}  // namespace coda::blocks
