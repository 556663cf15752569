// The block's block-wise FP8 epilogues (blocks.hpp, "block-wise"): the tensorwise graphs' dataflow on block-scaled
// GEMMs, every tensor a later GEMM reads quantized by the epilogue that makes it with its row groups' own scales
// (fp8::kBlockwise; the epilogues all recipes share are in fp8_epilogues.cpp). tools/graphs/*.coda hold their
// canonical text too.
#include "coda/blocks.hpp"

#include "blocks/block_parts.hpp"
#include "blocks/fp8_epilogues.hpp"

namespace coda::blocks {

using fp8::kBlockwise;

Graph rms_entry_fp8_blockwise() { return fp8::rms_entry(kBlockwise); }

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

Graph qkv_rope_fp8_blockwise(GemmSpec spec) { return fp8::qkv_rope(kBlockwise, spec); }

Graph out_proj_fp8_blockwise(GemmSpec spec) { return fp8::out_proj(kBlockwise, spec, true); }

Graph out_proj_fp8_blockwise_bf16_h(GemmSpec spec) { return fp8::out_proj(kBlockwise, spec, false); }

Graph gate_up_swiglu_fp8_blockwise(GemmSpec spec) { return fp8::gate_up_swiglu(kBlockwise, spec); }

Graph dgrad_fp8_blockwise(GemmSpec spec) { return fp8::dgrad(kBlockwise, spec); }

Graph swiglu_backward_fp8_blockwise(GemmSpec spec) { return fp8::swiglu_backward(kBlockwise, spec); }

Graph wgrad_fp8_blockwise_accumulate(GemmSpec spec) { return fp8::wgrad_accumulate(kBlockwise, spec); }

Graph rmsnorm_backward_residual_fp8_blockwise(GemmSpec spec) {
    return fp8::rmsnorm_backward_residual(kBlockwise, spec, true);
}

Graph rmsnorm_backward_residual_fp8_blockwise_bf16_dx(GemmSpec spec) {
    return fp8::rmsnorm_backward_residual(kBlockwise, spec, false);
}

}  // namespace coda::blocks
