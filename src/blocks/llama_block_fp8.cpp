// The block's FP8 epilogues (blocks.hpp, "FP8 training"): the BF16 block's graphs with the accumulator scaled by
// its operands' per-tensor scales, and with every tensor a later GEMM reads in FP8 stored quantized beside its amax
// (fp8::kTensorwise; the epilogues all recipes share are in fp8_epilogues.cpp), and the graphs only this recipe has:
// the quantize tile programs and the FP8 weight gradients' transposed copies. tools/graphs/*.coda hold their
// canonical text too.
#include "coda/blocks.hpp"

#include "blocks/block_parts.hpp"
#include "blocks/fp8_epilogues.hpp"

namespace coda::blocks {
namespace {

using fp8::kTensorwise;
using fp8::store_fp8_operand;

// t only transposed, for a weight gradient (N x M, t * t_fp8_inv_scale), with t_amax.
void store_fp8_transposed(Graph& g, Value t, const std::string& name, DType fp8) {
    Value inv_scale = g.scalar(name + "_fp8_inv_scale");
    Value quantized = g.mul(t, inv_scale, name + "_quantized");
    g.store_transposed(quantized, name + "_fp8_t", fp8);
    Value magnitude = g.abs(t, name + "_magnitude");
    g.reduce_row(magnitude, ReduceOp::Max, name + "_amax");
}

Graph quantize(const std::string& name, DType fp8, bool transposed) {
    Graph g = Graph::tile(name);
    Value x = g.tile_input("x", DType::BF16);
    store_fp8_operand(g, x, "x", fp8, transposed);
    return g;
}

// norm_backward_residual for FP8 weight gradients: dx in bf16 (the residual gradient the next op adds) and, with
// fp8_dx, in e5m2 both ways; o only transposed in e4m3 under o_fp8_inv_scale, with o_amax; no bf16 o.
Graph norm_backward_residual_t(const std::string& name, GemmSpec spec, bool fp8_dx) {
    Graph g = Graph::gemm(name, spec);
    parts::EmitOperand emit_dx;
    if (fp8_dx) emit_dx = [](Graph& gr, Value dx) { store_fp8_operand(gr, dx, "dx", DType::E5M2, true); };
    const parts::NormBackward v =
        parts::residual_norm_backward(g, fp8::scaled_accumulator(g, kTensorwise, "d_out"), emit_dx);
    store_fp8_transposed(g, g.mul(v.normed, v.gamma, "o_value"), "o", DType::E4M3);
    g.reduce_col(g.mul(v.d_out, v.normed, "dgamma_terms"), ReduceOp::Sum, "dgamma_partials");
    return g;
}

}  // namespace

Graph rms_entry_fp8() { return fp8::rms_entry(kTensorwise); }

Graph quantize_e4m3() { return quantize("quantize_e4m3", DType::E4M3, false); }

Graph quantize_e5m2() { return quantize("quantize_e5m2", DType::E5M2, false); }

Graph quantize_e4m3_t() { return quantize("quantize_e4m3_t", DType::E4M3, true); }

Graph quantize_e5m2_t() { return quantize("quantize_e5m2_t", DType::E5M2, true); }

Graph quantize_e4m3_blockwise() {
    Graph g = Graph::tile("quantize_e4m3_blockwise");
    parts::store_fp8_grouped(g, g.tile_input("x", DType::BF16), "x");
    return g;
}

Graph qkv_rope_fp8(GemmSpec spec) { return fp8::qkv_rope(kTensorwise, spec); }

Graph out_proj_fp8(GemmSpec spec) { return fp8::out_proj(kTensorwise, spec, true); }

Graph out_proj_fp8_bf16_h(GemmSpec spec) { return fp8::out_proj(kTensorwise, spec, false); }

Graph gate_up_swiglu_fp8(GemmSpec spec) { return fp8::gate_up_swiglu(kTensorwise, spec); }

Graph dgrad_fp8(GemmSpec spec) { return fp8::dgrad(kTensorwise, spec); }

Graph swiglu_backward_fp8(GemmSpec spec) { return fp8::swiglu_backward(kTensorwise, spec); }

Graph swiglu_backward_fp8_t(GemmSpec spec) {
    Graph g = Graph::gemm("swiglu_backward_fp8_t", spec);
    const parts::SwigluBackward v = parts::swiglu_backward_values(g, fp8::scaled_accumulator(g, kTensorwise, "dy"));
    Value y = g.mul(v.silu_gate, v.up, "y_value");
    g.reduce_row(g.mul(v.z, v.dz, "z_dz"), ReduceOp::Sum, "zdz_partials");
    store_fp8_operand(g, v.dz, "dz", DType::E5M2, true);
    // y under the scale its forward quantization had (the same y, recomputed): y_fp8_inv_scale.
    Value y_inv_scale = g.scalar("y_fp8_inv_scale");
    g.store_transposed(g.mul(y, y_inv_scale, "y_quantized"), "y_fp8_t", DType::E4M3);
    return g;
}

Graph rmsnorm_backward_residual_fp8_t(GemmSpec spec) {
    return norm_backward_residual_t("rmsnorm_backward_residual_fp8_t", spec, true);
}

Graph rmsnorm_backward_residual_fp8_bf16_dx_t(GemmSpec spec) {
    return norm_backward_residual_t("rmsnorm_backward_residual_fp8_bf16_dx_t", spec, false);
}

Graph rmsnorm_backward_residual_fp8(GemmSpec spec) { return fp8::rmsnorm_backward_residual(kTensorwise, spec, true); }

Graph rmsnorm_backward_residual_fp8_bf16_dx(GemmSpec spec) {
    return fp8::rmsnorm_backward_residual(kTensorwise, spec, false);
}

Graph rope_backward_from_output_fp8() { return fp8::rope_backward_from_output(kTensorwise); }

Graph rope_backward_from_output_fp8_t() {
    return parts::rope_backward_from_output("rope_backward_from_output_fp8_t", [](Graph& g, Value dz) {
        store_fp8_operand(g, dz, "dz", DType::E5M2, true);
    });
}

Graph wgrad_fp8_accumulate(GemmSpec spec) { return fp8::wgrad_accumulate(kTensorwise, spec); }

}  // namespace coda::blocks
