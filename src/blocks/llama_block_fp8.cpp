// The block's FP8 epilogues (blocks.hpp, "FP8 training"): the BF16 block's graphs with the accumulator scaled by
// its operands' per-tensor scales, and with every tensor a later GEMM reads in FP8 stored quantized beside its amax.
// tools/graphs/*.coda hold their canonical text too.
#include "coda/blocks.hpp"

#include "blocks/block_parts.hpp"

namespace coda::blocks {
namespace {

// acc * (a_scale * b_scale): the product of two per-tensor dequantization factors, one multiply a visit.
Value scaled_accumulator(Graph& g, const char* name) {
    Value acc = g.accumulator(name);
    Value a_scale = g.scalar("a_scale");
    Value b_scale = g.scalar("b_scale");
    Value scale = g.mul(a_scale, b_scale, "operand_scale");
    return g.mul(acc, scale, "scaled_acc");
}

// t for a GEMM that reads it in `fp8`: t_fp8 = t * t_fp8_inv_scale (saturating), and the row partials of |t| (Max)
// in t_amax, from which the caller's delayed scaling takes the next step's scale. With `transposed`, also
// t_fp8_t = the same values transposed (N x M): a weight gradient's K-major operand. Returns t * t_fp8_inv_scale.
Value store_fp8_operand(Graph& g, Value t, const std::string& name, DType fp8, bool transposed = false) {
    Value inv_scale = g.scalar(name + "_fp8_inv_scale");
    Value quantized = g.mul(t, inv_scale, name + "_quantized");
    g.store(quantized, name + "_fp8", fp8);
    if (transposed) g.store_transposed(quantized, name + "_fp8_t", fp8);
    Value magnitude = g.abs(t, name + "_magnitude");
    g.reduce_row(magnitude, ReduceOp::Max, name + "_amax");
    return quantized;
}

// t only transposed, for a weight gradient (N x M, t * t_fp8_inv_scale), with t_amax.
void store_fp8_transposed(Graph& g, Value t, const std::string& name, DType fp8) {
    Value inv_scale = g.scalar(name + "_fp8_inv_scale");
    Value quantized = g.mul(t, inv_scale, name + "_quantized");
    g.store_transposed(quantized, name + "_fp8_t", fp8);
    Value magnitude = g.abs(t, name + "_magnitude");
    g.reduce_row(magnitude, ReduceOp::Max, name + "_amax");
}

// out_proj's epilogue on FP8 operands, with h quantized for the next FP8 GEMM or kept in bf16.
Graph residual_producer(const std::string& name, GemmSpec spec, bool fp8_h) {
    Graph g = Graph::gemm(name, spec);
    parts::residual_outputs(g, scaled_accumulator(g, "acc"), [fp8_h](Graph& gr, Value h) {
        if (fp8_h)
            store_fp8_operand(gr, h, "h", DType::E4M3);
        else
            gr.store(h, "h", DType::BF16);
    });
    return g;
}

}  // namespace

Graph rms_entry_fp8() {
    Graph g = Graph::tile("rms_entry_fp8");
    Value x = g.tile_input("x", DType::BF16);
    Value gamma = g.col_input("gamma", DType::BF16);
    Value h = g.mul(x, gamma, "h_value");
    store_fp8_operand(g, h, "h", DType::E4M3);
    g.reduce_row(x, ReduceOp::SumSq, "x1_sumsq");
    return g;
}

namespace {

Graph quantize(const std::string& name, DType fp8, bool transposed) {
    Graph g = Graph::tile(name);
    Value x = g.tile_input("x", DType::BF16);
    store_fp8_operand(g, x, "x", fp8, transposed);
    return g;
}

}  // namespace

Graph quantize_e4m3() { return quantize("quantize_e4m3", DType::E4M3, false); }

Graph quantize_e5m2() { return quantize("quantize_e5m2", DType::E5M2, false); }

Graph quantize_e4m3_t() { return quantize("quantize_e4m3_t", DType::E4M3, true); }

Graph quantize_e5m2_t() { return quantize("quantize_e5m2_t", DType::E5M2, true); }

Graph quantize_e4m3_blockwise() {
    Graph g = Graph::tile("quantize_e4m3_blockwise");
    parts::store_fp8_grouped(g, g.tile_input("x", DType::BF16), "x");
    return g;
}

Graph qkv_rope_fp8(GemmSpec spec) {
    Graph g = Graph::gemm("qkv_rope_fp8", spec);
    Value z = parts::rms_scaled(g, scaled_accumulator(g, "acc"), "z_value");
    g.store(parts::rotate_pairs(g, z, parts::Rotation::Forward), "qkv", DType::BF16);
    return g;
}

Graph out_proj_fp8(GemmSpec spec) { return residual_producer("out_proj_fp8", spec, true); }

Graph out_proj_fp8_bf16_h(GemmSpec spec) { return residual_producer("out_proj_fp8_bf16_h", spec, false); }

Graph gate_up_swiglu_fp8(GemmSpec spec) {
    Graph g = Graph::gemm("gate_up_swiglu_fp8", spec);
    parts::swiglu_outputs(g, parts::rms_scaled(g, scaled_accumulator(g, "acc"), "z_value"));
    return g;
}

Graph dgrad_fp8(GemmSpec spec) {
    Graph g = Graph::gemm("dgrad_fp8", spec);
    g.store(scaled_accumulator(g, "acc"), "D", DType::BF16);
    return g;
}

Graph swiglu_backward_fp8(GemmSpec spec) {
    Graph g = Graph::gemm("swiglu_backward_fp8", spec);
    Value dz = parts::swiglu_gradient(g, scaled_accumulator(g, "dy"));
    store_fp8_operand(g, dz, "dz", DType::E5M2);
    return g;
}

Graph swiglu_backward_fp8_t(GemmSpec spec) {
    Graph g = Graph::gemm("swiglu_backward_fp8_t", spec);
    const parts::SwigluBackward v = parts::swiglu_backward_values(g, scaled_accumulator(g, "dy"));
    Value y = g.mul(v.silu_gate, v.up, "y_value");
    g.reduce_row(g.mul(v.z, v.dz, "z_dz"), ReduceOp::Sum, "zdz_partials");
    store_fp8_operand(g, v.dz, "dz", DType::E5M2, true);
    // y under the scale its forward quantization had (the same y, recomputed): y_fp8_inv_scale.
    Value y_inv_scale = g.scalar("y_fp8_inv_scale");
    g.store_transposed(g.mul(y, y_inv_scale, "y_quantized"), "y_fp8_t", DType::E4M3);
    return g;
}

namespace {

// rmsnorm_backward_residual on FP8 operands, with dx also quantized for the next FP8 GEMM or not.
Graph norm_backward_residual(const std::string& name, GemmSpec spec, bool fp8_dx) {
    Graph g = Graph::gemm(name, spec);
    parts::EmitOperand emit_dx;
    if (fp8_dx) emit_dx = [](Graph& gr, Value dx) { store_fp8_operand(gr, dx, "dx", DType::E5M2); };
    parts::norm_backward_outputs(g, parts::residual_norm_backward(g, scaled_accumulator(g, "d_out"), emit_dx));
    return g;
}

}  // namespace

namespace {

// norm_backward_residual for FP8 weight gradients: dx in bf16 (the residual gradient the next op adds) and, with
// fp8_dx, in e5m2 both ways; o only transposed in e4m3 under o_fp8_inv_scale, with o_amax; no bf16 o.
Graph norm_backward_residual_t(const std::string& name, GemmSpec spec, bool fp8_dx) {
    Graph g = Graph::gemm(name, spec);
    parts::EmitOperand emit_dx;
    if (fp8_dx) emit_dx = [](Graph& gr, Value dx) { store_fp8_operand(gr, dx, "dx", DType::E5M2, true); };
    const parts::NormBackward v = parts::residual_norm_backward(g, scaled_accumulator(g, "d_out"), emit_dx);
    store_fp8_transposed(g, g.mul(v.normed, v.gamma, "o_value"), "o", DType::E4M3);
    g.reduce_col(g.mul(v.d_out, v.normed, "dgamma_terms"), ReduceOp::Sum, "dgamma_partials");
    return g;
}

}  // namespace

Graph rmsnorm_backward_residual_fp8_t(GemmSpec spec) {
    return norm_backward_residual_t("rmsnorm_backward_residual_fp8_t", spec, true);
}

Graph rmsnorm_backward_residual_fp8_bf16_dx_t(GemmSpec spec) {
    return norm_backward_residual_t("rmsnorm_backward_residual_fp8_bf16_dx_t", spec, false);
}

Graph rmsnorm_backward_residual_fp8(GemmSpec spec) {
    return norm_backward_residual("rmsnorm_backward_residual_fp8", spec, true);
}

Graph rmsnorm_backward_residual_fp8_bf16_dx(GemmSpec spec) {
    return norm_backward_residual("rmsnorm_backward_residual_fp8_bf16_dx", spec, false);
}

Graph rope_backward_from_output_fp8() {
    return parts::rope_backward_from_output("rope_backward_from_output_fp8", [](Graph& g, Value dz) {
        g.store(dz, "dz", DType::BF16);
        store_fp8_operand(g, dz, "dz", DType::E5M2);
    });
}

Graph rope_backward_from_output_fp8_t() {
    return parts::rope_backward_from_output("rope_backward_from_output_fp8_t", [](Graph& g, Value dz) {
        store_fp8_operand(g, dz, "dz", DType::E5M2, true);
    });
}

Graph wgrad_fp8_accumulate(GemmSpec spec) {
    Graph g = Graph::gemm("wgrad_fp8_accumulate", spec);
    g.accumulate(scaled_accumulator(g, "acc"), "D", DType::F32);
    return g;
}

}  // namespace coda::blocks
