// The block's row-wise FP8 epilogues (blocks.hpp, "row-wise"): the tensorwise graphs' dataflow with a scale per row
// of A and per column of B, and every tensor a later GEMM reads in FP8 stored in bf16 beside its row amax partials,
// for a quantize tile program to read once the whole row's amax is known (fp8::kRowwise; the epilogues all recipes
// share are in fp8_epilogues.cpp). tools/graphs/*.coda hold their canonical text too.
#include "coda/blocks.hpp"

#include "blocks/fp8_epilogues.hpp"

namespace coda::blocks {
namespace {

using fp8::kRowwise;

// x * [gamma *] x_fp8_inv_scale[m] in e4m3 (saturating): the second pass row-wise scales need.
Graph quantize_rows(const std::string& name, bool gamma) {
    Graph g = Graph::tile(name);
    Value x = g.tile_input("x", DType::BF16);
    if (gamma) x = g.mul(x, g.col_input("gamma", DType::BF16), "h_value");
    Value inv_scale = g.row_input("x_fp8_inv_scale", DType::F32);
    g.store(g.mul(x, inv_scale, "x_quantized"), "x_fp8", DType::E4M3);
    return g;
}

}  // namespace

Graph rms_entry_fp8_rowwise() { return fp8::rms_entry(kRowwise); }

Graph quantize_e4m3_rowwise() { return quantize_rows("quantize_e4m3_rowwise", false); }

Graph quantize_e4m3_rowwise_gamma() { return quantize_rows("quantize_e4m3_rowwise_gamma", true); }

Graph qkv_rope_fp8_rowwise(GemmSpec spec) { return fp8::qkv_rope(kRowwise, spec); }

Graph out_proj_fp8_rowwise(GemmSpec spec) { return fp8::out_proj(kRowwise, spec, true); }

Graph out_proj_fp8_rowwise_bf16_h(GemmSpec spec) { return fp8::out_proj(kRowwise, spec, false); }

Graph gate_up_swiglu_fp8_rowwise(GemmSpec spec) { return fp8::gate_up_swiglu(kRowwise, spec); }

Graph dgrad_fp8_rowwise(GemmSpec spec) { return fp8::dgrad(kRowwise, spec); }

Graph swiglu_backward_fp8_rowwise(GemmSpec spec) { return fp8::swiglu_backward(kRowwise, spec); }

Graph rmsnorm_backward_residual_fp8_rowwise(GemmSpec spec) {
    return fp8::rmsnorm_backward_residual(kRowwise, spec, true);
}

Graph rmsnorm_backward_residual_fp8_rowwise_bf16_dx(GemmSpec spec) {
    return fp8::rmsnorm_backward_residual(kRowwise, spec, false);
}

Graph quantize_e4m3_colwise_t() {
    Graph g = Graph::tile("quantize_e4m3_colwise_t");
    Value x = g.tile_input("x", DType::BF16);
    Value inv_scale = g.col_input("x_fp8_inv_scale", DType::F32);
    g.store_transposed(g.mul(x, inv_scale, "x_quantized"), "x_fp8_t", DType::E4M3);
    return g;
}

Graph wgrad_fp8_rowwise_accumulate(GemmSpec spec) { return fp8::wgrad_accumulate(kRowwise, spec); }

Graph rope_backward_from_output_fp8_rowwise() { return fp8::rope_backward_from_output(kRowwise); }

}  // namespace coda::blocks
