// Ready-made epilogues for a LLaMA-style pre-norm block (DESIGN.md section 3): the forward chain and its
// backward counterparts, as graphs you can compile, dump or extend. Names of bindings are documented per graph.
#pragma once

#include <optional>
#include <vector>

#include "coda/graph.hpp"

namespace coda::blocks {

// The first layer's RMSNorm inputs from the embedding, as a tile program: h = x * gamma (bf16) and row partials of
// x^2 (rms_finalize turns them into rstd). Bindings: x [M x d], gamma [d], h [M x d], x1_sumsq (row partials).
Graph rms_entry();
// out-proj epilogue: x1 = acc + residual; stores x1 and h = x1 * gamma (bf16); row partials of x1^2.
// Bindings: A, B, residual [M x d], gamma [d], x1, h, x1_sumsq (row partials).
Graph out_proj(GemmSpec spec = {});
// RMSNorm statistic: rstd = rsqrt(sum(partials) * inv_d + eps). Bindings: x1_sumsq [T x M], inv_d, eps, rstd [M].
Graph rms_finalize();
// gate/up epilogue: z = rstd * acc over interleaved (gate, up) columns; stores z and y = silu(gate) * up (half).
// Bindings: A (= h), B (interleaved W_gu), rstd [M], z [M x 2F], y [M x F].
Graph gate_up_swiglu(GemmSpec spec = {});
// QKV epilogue with RoPE: z = rstd * acc; each (even, odd) pair rotated by pos_i * theta_j (theta = 0 for V).
// Bindings: A, B, rstd [M], pos (i32) [M], theta (f32, one per pair) [N/2], qkv [M x N].
Graph qkv_rope(GemmSpec spec = {});
// LM head with cross-entropy statistics: logits = rstd * acc; row partials of log-sum-exp and of the logit at
// the label column. Bindings: A, B, rstd [M], labels (i32) [M], logits [M x V], lse_partials, target_partials.
Graph lm_head_ce(GemmSpec spec = {});
// The same without the logits store: only the row partials (online log-sum-exp and the label's logit), so no
// M x V tensor exists in the forward pass. Bindings: A, B, rstd [M], labels (i32) [M], lse_partials,
// target_partials (ce_finalize combines them as for lm_head_ce).
Graph lm_head_ce_stats(GemmSpec spec = {});
// Cross-entropy backward inside the LM head GEMM (the forward's A and B again): recomputes logits = rstd * acc
// tile by tile; dlogits = (exp(logits - lse) - onehot(label)) * scale; row partials of logits * dlogits.
// The dgrad / wgrad GEMMs then read dlogits; run it on row chunks to keep that tensor small (docs/GUIDE.md).
// Bindings: A, B, rstd [M], lse [M], labels (i32) [M], scale, dlogits [M x V], zdz_partials.
Graph lm_head_ce_backward(GemmSpec spec = {});
// lm_head_ce_backward with the loss gradient read per row (`row_scale` [M], f32) instead of one scalar: a mean over
// the rows whose label is not ignored (row_scale = dloss / n_valid there, 0 elsewhere; coda.torch's ignore_index).
// Bindings: A, B, rstd [M], lse [M], labels (i32) [M], row_scale [M], dlogits [M x V], zdz_partials.
Graph lm_head_ce_backward_row_scale(GemmSpec spec = {});
// Cross-entropy finalize: lse = combine(lse_partials); loss = lse - target. Bindings: lse_partials,
// target_partials, lse [M], loss [M].
Graph ce_finalize();
// SwiGLU backward, in the epilogue of dy = dx2 * W_d (B N-major): reads the saved interleaved z (double width),
// stores dz = join(dg, du) and the recomputed y; row partials of sum_j z * dz for the RMSNorm backward.
// Bindings: A, B, z [M x 2F], dz [M x 2F], y [M x F], zdz_partials.
Graph swiglu_backward(GemmSpec spec = {DType::BF16, Major::K, Major::MN});
// The same as a tile program over dy [M x F] stored by a plain dgrad GEMM: the unfused pair, for where the fused
// epilogue costs the GEMM more than this pass over memory does. Bindings: dy [M x F], z [M x 2F], dz [M x 2F],
// y [M x F], zdz_partials.
Graph swiglu_backward_tile();
// s = inv_d * sum(zdz_partials). Bindings: zdz_partials, inv_d, s [M].
Graph rms_backward_finalize();
// RMSNorm backward, in the epilogue of do = dz * W_gu (B N-major): n = x * rstd; dx = rstd * (do * gamma - n * s)
// accumulated into dx_residual (f32); stores o = n * gamma; column partials of do * n (for dgamma).
// Bindings: A, B, x [M x d], rstd [M], s [M], gamma [d], dx_residual [M x d] (f32, in/out), o, dgamma_partials.
Graph rmsnorm_backward(GemmSpec spec = {DType::BF16, Major::K, Major::MN});
// The same with dx stored in bf16 (no f32 buffer to zero before and convert after): what a layer whose input
// feeds nothing else needs (the LM head's norm). Bindings: A, B, x, rstd, s, gamma, dx [M x d] (bf16), o,
// dgamma_partials.
Graph rmsnorm_backward_bf16(GemmSpec spec = {DType::BF16, Major::K, Major::MN});
// The same adding the residual stream's other gradient: dx = dx_in + rstd * (do * gamma - n * s), stored in bf16,
// complete when the GEMM ends (where x fed both a norm and a residual add). Bindings: A, B, x, rstd, s, gamma,
// dx_in [M x d] (bf16), dx [M x d] (bf16), o, dgamma_partials.
Graph rmsnorm_backward_residual(GemmSpec spec = {DType::BF16, Major::K, Major::MN});
// dgamma [d] = the sum of an RMSNorm backward's column partials (one row per M-tile; several GEMMs' rows may be
// stacked), in gamma's bf16. Bindings: dgamma_partials [T x d], dgamma [d].
Graph dgamma_finalize();
// RoPE backward as a tile program: rotate the incoming gradient by -pos_i * theta_j; row partials of z * dz.
// Bindings: dqkv [M x N], z [M x N], pos (i32) [M], theta [N/2], dz [M x N], zdz_partials.
Graph rope_backward();
// The same rotation; the row partials from the saved rotated output qkv and the incoming gradient (sum_j z_j dz_j
// = sum_j qkv_j dqkv_j: each pair turns by an orthogonal matrix), so no pre-RoPE z is kept for the backward.
// Bindings: dqkv [M x N], qkv [M x N], pos (i32) [M], theta [N/2], dz [M x N], zdz_partials.
Graph rope_backward_from_output();
// Cross-entropy backward as a tile program: dlogits = (exp(logits - lse) - onehot(label)) * scale.
// Bindings: logits [M x V], lse [M], labels (i32) [M], scale, dlogits [M x V], zdz_partials.
Graph cross_entropy_backward();
// The same with the loss gradient per row (`row_scale` [M], as lm_head_ce_backward_row_scale).
// Bindings: logits [M x V], lse [M], labels (i32) [M], row_scale [M], dlogits [M x V], zdz_partials.
Graph cross_entropy_backward_row_scale();

// Every graph above, in block order (forward, then backward); the LM head comes in both variants: lm_head_ce
// (logits stored, then cross_entropy_backward) and lm_head_ce_stats (then lm_head_ce_backward), each backward also
// with a per-row loss gradient. coda.torch runs these (the bf16 norm backward variants, RoPE backward from the
// output); rmsnorm_backward (f32 accumulate) and rope_backward are for C++ users who keep those tensors.
std::vector<Graph> llama_block();

// ---------------------------------------------------------------------------------------------------------
// FP8 training (issue 28): the same block with its GEMMs on FP8 operands under per-tensor scales, delayed scaling
// (each step quantizes with a scale from earlier steps' amax, so a tensor is written once, already quantized, by the
// epilogue that makes it), e4m3 forward and e5m2 gradients; the weight-gradient GEMMs stay in bf16 (they read the
// bf16 tensors these graphs store beside the FP8 ones). coda.torch's LlamaDecoderLayer(fp8="tensorwise") runs them.
//
// Conventions of every graph here:
//   - An FP8 GEMM's accumulator is scaled by a_scale * b_scale (scalars: each operand's dequantization factor, so
//     that A ~ a_scale * A_fp8), read on the device when bound to one.
//   - A tensor `t` that the next GEMM reads in FP8 is stored as t_fp8 = t * t_fp8_inv_scale (an e4m3 or e5m2 tile
//     output; cvt.rn.satfinite: values past the format's largest saturate to it), beside the row partials of |t|
//     (Max) in t_amax, from which the caller keeps the amax history and the next step's scales.
// The default specs: e4m3 x e4m3 forward, e5m2 (gradient) x e4m3 (transposed weight, N x K) backward.

// The embedding entry: h_fp8 = x * gamma * h_fp8_inv_scale (e4m3), h_amax, x1_sumsq. Bindings: x, gamma,
// h_fp8_inv_scale, h_fp8, h_amax, x1_sumsq.
Graph rms_entry_fp8();
// Any bf16 tensor to FP8 as a tile program (attention's output for the out-projection, the SwiGLU output for the
// down projection, a gradient from another op, a weight): x_fp8 = x * x_fp8_inv_scale in e4m3 (e5m2), and x_amax.
// Bindings: x, x_fp8_inv_scale, x_fp8, x_amax.
Graph quantize_e4m3();
Graph quantize_e5m2();
// The same block-wise, with each row's 128-column group's own scale (reduce_group): x_fp8 = x * (1 / x_scale) in e4m3,
// x_scale = max(amax of the group / 448, 2^-126), and the scales' row partials x_scale_partials: f32
// [ceil(N / 128) x M], the block scales of A (coda::block_scale_operands) of a block-scaled GEMM that reads x_fp8.
// Bindings: x, x_fp8, x_scale_partials. (Listed in llama_block_fp8_blockwise, below.)
Graph quantize_e4m3_blockwise();
// quantize_e4m3_blockwise of x read transposed (tile_input_transposed): x [T x F] (e.g. an activation or gradient,
// tokens by features) to x_fp8 [F x T] in e4m3 with one scale per feature and 128 tokens, x_scale_partials f32
// [ceil(T / 128) x F]: the K-major operand and B's (or A's) block scales of the weight gradient dW = dY^T X on a
// block-scaled GEMM with B's scales per row (ScaleMode::Block1x128), in one pass over x. The program's M is F,
// its N is T. Bindings: x, x_fp8, x_scale_partials. (Listed in llama_block_fp8_blockwise, below.)
Graph quantize_e4m3_blockwise_t();
// An e4m3 tensor transposed, bitwise: x_t [N x M] of x [M x N] (a tile program; the transposed store is staged in
// shared memory). The block-wise weights' dgrad copy: a 128 x 128 block's scale is the same block's transposed, so
// quantizing once and transposing the bytes makes both copies. Bindings: x, x_t. (Listed in
// llama_block_fp8_blockwise, below.)
Graph transpose_e4m3();
// qkv_rope on FP8 operands: z = rstd * a_scale * b_scale * acc, rotated. Bindings: A, B, a_scale, b_scale, rstd,
// pos, theta, qkv.
Graph qkv_rope_fp8(GemmSpec spec = {DType::E4M3, Major::K, Major::K});
// out_proj on FP8 operands: x1 = a_scale * b_scale * acc + residual (bf16), h = x1 * gamma as h_fp8 (e4m3) with
// h_amax, row partials of x1^2. Bindings: A, B, a_scale, b_scale, residual, gamma, x1, h_fp8_inv_scale, h_fp8,
// h_amax, x1_sumsq.
Graph out_proj_fp8(GemmSpec spec = {DType::E4M3, Major::K, Major::K});
// The same with h stored in bf16 (no FP8 copy): the last layer's, whose h the bf16 LM head reads. Bindings: A, B,
// a_scale, b_scale, residual, gamma, x1, h, x1_sumsq.
Graph out_proj_fp8_bf16_h(GemmSpec spec = {DType::E4M3, Major::K, Major::K});
// gate_up_swiglu on FP8 operands: z = rstd * a_scale * b_scale * acc (bf16, saved for the backward), y (bf16;
// quantize_e4m3 makes the down projection's operand: a half-width FP8 tile is too narrow to stage). Bindings: A, B,
// a_scale, b_scale, rstd, z, y.
Graph gate_up_swiglu_fp8(GemmSpec spec = {DType::E4M3, Major::K, Major::K});
// A plain dgrad on FP8 operands: D = a_scale * b_scale * acc (bf16). Bindings: A, B, a_scale, b_scale, D.
Graph dgrad_fp8(GemmSpec spec = {DType::E5M2, Major::K, Major::K, DType::E4M3});
// swiglu_backward on FP8 operands (dy = dx2 W_d from dx2_fp8 and W_d^T): dz (bf16, for the bf16 weight gradient),
// dz_fp8 (e5m2) with dz_amax, y, zdz_partials. Bindings: A, B, a_scale, b_scale, z, dz, y, zdz_partials,
// dz_fp8_inv_scale, dz_fp8, dz_amax.
Graph swiglu_backward_fp8(GemmSpec spec = {DType::E5M2, Major::K, Major::K, DType::E4M3});
// rmsnorm_backward_residual on FP8 operands: dx = dx_in + rstd * (do * gamma - n * s) in bf16 and as dx_fp8 (e5m2)
// with dx_amax, o, dgamma_partials. Bindings: A, B, a_scale, b_scale, rstd, x, gamma, s, dx_in, dx,
// dx_fp8_inv_scale, dx_fp8, dx_amax, o, dgamma_partials.
Graph rmsnorm_backward_residual_fp8(GemmSpec spec = {DType::E5M2, Major::K, Major::K, DType::E4M3});
// The same with dx in bf16 alone: where dx leaves the op that would read it in FP8 (coda.torch quantizes it there).
// Bindings: A, B, a_scale, b_scale, rstd, x, gamma, s, dx_in, dx, o, dgamma_partials.
Graph rmsnorm_backward_residual_fp8_bf16_dx(GemmSpec spec = {DType::E5M2, Major::K, Major::K, DType::E4M3});
// rope_backward_from_output writing dz also as dz_fp8 (e5m2) with dz_amax. Bindings: dqkv, pos, theta, dz,
// dz_fp8_inv_scale, dz_fp8, dz_amax, qkv, zdz_partials.
Graph rope_backward_from_output_fp8();

// FP8 weight gradients (coda.torch's fp8_wgrad): dW = dY^T X as a GEMM with K = tokens on e5m2 x e4m3 K-major
// operands, which are the transposed FP8 copies (store_transposed, "_fp8_t": N x M) of a gradient and of an
// activation, each under its own tensor's delayed scale. These variants write them where the tensors are made, and
// drop the bf16 copies only the bf16 weight gradients read.
// quantize_e4m3 / _e5m2 with x_fp8_t too. Bindings: x, x_fp8_inv_scale, x_fp8, x_fp8_t, x_amax.
Graph quantize_e4m3_t();
Graph quantize_e5m2_t();
// swiglu_backward_fp8 writing dz_fp8 (for the dgrad) and dz_fp8_t, and y_fp8_t = y * y_fp8_inv_scale (the y the
// forward quantized, recomputed); no bf16 dz or y. Bindings: A, B, a_scale, b_scale, z, zdz_partials,
// dz_fp8_inv_scale, dz_fp8, dz_fp8_t, dz_amax, y_fp8_inv_scale, y_fp8_t.
Graph swiglu_backward_fp8_t(GemmSpec spec = {DType::E5M2, Major::K, Major::K, DType::E4M3});
// rmsnorm_backward_residual_fp8 writing dx also as dx_fp8_t, and o only as o_fp8_t = o * o_fp8_inv_scale with
// o_amax. Bindings: A, B, a_scale, b_scale, rstd, x, gamma, s, dx_in, dx, dx_fp8_inv_scale, dx_fp8, dx_fp8_t, dx_amax,
// o_fp8_inv_scale, o_fp8_t, o_amax, dgamma_partials.
Graph rmsnorm_backward_residual_fp8_t(GemmSpec spec = {DType::E5M2, Major::K, Major::K, DType::E4M3});
// The same with dx in bf16 alone. Bindings: A, B, a_scale, b_scale, rstd, x, gamma, s, dx_in, dx, o_fp8_inv_scale,
// o_fp8_t, o_amax, dgamma_partials.
Graph rmsnorm_backward_residual_fp8_bf16_dx_t(GemmSpec spec = {DType::E5M2, Major::K, Major::K, DType::E4M3});
// rope_backward_from_output_fp8 writing dz_fp8_t instead of the bf16 dz. Bindings: dqkv, pos, theta,
// dz_fp8_inv_scale, dz_fp8, dz_fp8_t, dz_amax, qkv, zdz_partials.
Graph rope_backward_from_output_fp8_t();
// A weight gradient added into an f32 buffer: D += a_scale * b_scale * acc (dgrad_fp8 stores one in bf16).
// Bindings: A, B, a_scale, b_scale, D.
Graph wgrad_fp8_accumulate(GemmSpec spec = {DType::E5M2, Major::K, Major::K, DType::E4M3});

// Every FP8 graph above, forward then backward (the weight gradients' variants last).
std::vector<Graph> llama_block_fp8();

// ---------------------------------------------------------------------------------------------------------
// Block-wise FP8 training (issue 28; DeepSeek-V3's scales): the same block on block-scaled GEMMs
// (ScaleMode::Block128x128, cooperative 128 x 128 tiles), e4m3 everywhere; the weight gradients in bf16 as above, or
// in FP8 with both operands scaled per row and 128 tokens (wgrad_fp8_blockwise_accumulate).
// coda.torch's LlamaDecoderLayer(fp8="blockwise") runs them.
//
// Conventions of every graph here:
//   - The mainloop applies the block scales (coda::block_scale_operands: A's one per row of A and 128 k, B's one per
//     128 x 128 block of B; bound beside A and B), so the accumulator is already in the operands' units: no scalar
//     scales. "Bindings" below calls them "the block scales".
//   - A tensor `t` that the next GEMM reads in FP8 is stored as t_fp8 = t / t_scale in e4m3, t_scale from the amax
//     of t's own row group of 128 columns (reduce_group: no delayed scaling, no amax history), beside the row
//     partials t_scale_partials, f32 [ceil(N / 128) x M]: the next GEMM's block scales of A. A double-width t
//     (SwiGLU's dz) has groups of 256 of its columns (128 of the GEMM's): each scale stands for two of the next GEMM's
//     k-blocks.
// The default spec: e4m3 x e4m3, both K-major, block-scaled.

// The embedding entry: h = x * gamma as h_fp8 with h_scale_partials, x1_sumsq. Bindings: x, gamma, h_fp8,
// h_scale_partials, x1_sumsq.
Graph rms_entry_fp8_blockwise();
// qkv_rope on a block-scaled GEMM: z = rstd * acc, rotated. Bindings: A, B, the block scales, rstd, pos, theta, qkv.
Graph qkv_rope_fp8_blockwise(GemmSpec spec = {DType::E4M3, Major::K, Major::K, std::nullopt, ScaleMode::Block128x128});
// out_proj on a block-scaled GEMM: x1 = acc + residual (bf16), h = x1 * gamma as h_fp8 with h_scale_partials, row
// partials of x1^2. Bindings: A, B, the block scales, residual, gamma, x1, h_fp8, h_scale_partials, x1_sumsq.
Graph out_proj_fp8_blockwise(GemmSpec spec = {DType::E4M3, Major::K, Major::K, std::nullopt, ScaleMode::Block128x128});
// The same with h stored in bf16: the last layer's. Bindings: A, B, the block scales, residual, gamma, x1, h,
// x1_sumsq.
Graph out_proj_fp8_blockwise_bf16_h(
    GemmSpec spec = {DType::E4M3, Major::K, Major::K, std::nullopt, ScaleMode::Block128x128});
// gate_up_swiglu on a block-scaled GEMM: z = rstd * acc, y (bf16; quantize_e4m3_blockwise makes the down
// projection's operand). Bindings: A, B, the block scales, rstd, z, y.
Graph gate_up_swiglu_fp8_blockwise(
    GemmSpec spec = {DType::E4M3, Major::K, Major::K, std::nullopt, ScaleMode::Block128x128});
// A plain dgrad on a block-scaled GEMM: D = acc (bf16). Bindings: A, B, the block scales, D.
Graph dgrad_fp8_blockwise(GemmSpec spec = {DType::E4M3, Major::K, Major::K, std::nullopt, ScaleMode::Block128x128});
// A weight gradient dW = dY^T X added into an f32 buffer, D += acc, on operands whose K is the tokens: both
// activations or gradients, so both with one scale per row and 128 k (ScaleMode::Block1x128; A's
// scales [ceil(M_tokens / 128) x N_out], B's [ceil(M_tokens / 128) x K_in]). Bindings: A, B, the block scales, D.
Graph wgrad_fp8_blockwise_accumulate(
    GemmSpec spec = {DType::E4M3, Major::K, Major::K, std::nullopt, ScaleMode::Block1x128});
// swiglu_backward on a block-scaled GEMM: dz (bf16) and dz_fp8 with dz_scale_partials (groups of 256 dz columns),
// y, zdz_partials. Bindings: A, B, the block scales, z, dz, y, zdz_partials, dz_fp8, dz_scale_partials.
Graph swiglu_backward_fp8_blockwise(
    GemmSpec spec = {DType::E4M3, Major::K, Major::K, std::nullopt, ScaleMode::Block128x128});
// rmsnorm_backward_residual on a block-scaled GEMM: dx in bf16 and as dx_fp8 with dx_scale_partials, o,
// dgamma_partials. Bindings: A, B, the block scales, rstd, x, gamma, s, dx_in, dx, dx_fp8, dx_scale_partials, o,
// dgamma_partials.
Graph rmsnorm_backward_residual_fp8_blockwise(
    GemmSpec spec = {DType::E4M3, Major::K, Major::K, std::nullopt, ScaleMode::Block128x128});
// The same with dx in bf16 alone. Bindings: A, B, the block scales, rstd, x, gamma, s, dx_in, dx, o,
// dgamma_partials.
Graph rmsnorm_backward_residual_fp8_blockwise_bf16_dx(
    GemmSpec spec = {DType::E4M3, Major::K, Major::K, std::nullopt, ScaleMode::Block128x128});
// RoPE's backward has no block-wise form: a tile program that also made dz's group scales would recompute the
// rotation in its pass before the visits, and NVRTC's ptxas then spills (24 bytes). coda.torch runs
// rope_backward_from_output and quantize_e4m3_blockwise on its bf16 dz (which the weight gradient reads anyway).

// Every block-wise graph above, quantize_e4m3_blockwise (and _t) and transpose_e4m3, forward then backward.
std::vector<Graph> llama_block_fp8_blockwise();

// ---------------------------------------------------------------------------------------------------------
// Row-wise FP8 training (issue 28; torchao's "rowwise"): the same block with a scale per row of A and per column of
// B (each output channel of a weight; the dgrads' weights per input channel), e4m3 everywhere, the weight gradients
// in bf16 or, with fp8_wgrad, in FP8: dW = dY^T X on copies of dY and X transposed and quantized with a scale per
// column (per channel, over all tokens). coda.torch's LlamaDecoderLayer(fp8="rowwise") runs them.
//
// Conventions of every graph here:
//   - A row-wise FP8 GEMM's accumulator is scaled by a_scale[m] * b_scale[n] (f32 row and column inputs).
//   - A row's scale needs the whole row's amax, which no tile holds: a tensor `t` that the next GEMM reads in FP8 is
//     stored in bf16 (as it is anyway, for the weight gradients) beside its row partials t_amax (Max of |t|), and a
//     quantize tile program writes t_fp8 = t * x_fp8_inv_scale[m] once the caller has the rows' scales: the second
//     pass over each activation that this recipe costs.
// The default spec: e4m3 x e4m3, both K-major.

// The embedding entry's statistics: h = x * gamma's h_amax and x1_sumsq (h is quantized from x and gamma by
// quantize_e4m3_rowwise_gamma). Bindings: x, gamma, h_amax, x1_sumsq.
Graph rms_entry_fp8_rowwise();
// x_fp8 = x * x_fp8_inv_scale[m] in e4m3, saturating. Bindings: x, x_fp8_inv_scale, x_fp8.
Graph quantize_e4m3_rowwise();
// x_fp8 = x * gamma * x_fp8_inv_scale[m] in e4m3: h from the residual stream x and the next norm's gamma, without
// storing it in bf16 first. Bindings: x, gamma, x_fp8_inv_scale, x_fp8.
Graph quantize_e4m3_rowwise_gamma();
// qkv_rope on row-wise FP8 operands: z = rstd * a_scale * b_scale * acc, rotated. Bindings: A, B, a_scale, b_scale,
// rstd, pos, theta, qkv.
Graph qkv_rope_fp8_rowwise(GemmSpec spec = {DType::E4M3, Major::K, Major::K});
// out_proj on row-wise FP8 operands: x1 = a_scale * b_scale * acc + residual (bf16), h = x1 * gamma's h_amax, row
// partials of x1^2. Bindings: A, B, a_scale, b_scale, residual, gamma, x1, h_amax, x1_sumsq.
Graph out_proj_fp8_rowwise(GemmSpec spec = {DType::E4M3, Major::K, Major::K});
// The same with h stored in bf16: the last layer's. Bindings: A, B, a_scale, b_scale, residual, gamma, x1, h,
// x1_sumsq.
Graph out_proj_fp8_rowwise_bf16_h(GemmSpec spec = {DType::E4M3, Major::K, Major::K});
// gate_up_swiglu on row-wise FP8 operands: z = rstd * a_scale * b_scale * acc, y, y_amax. Bindings: A, B, a_scale,
// b_scale, rstd, z, y, y_amax.
Graph gate_up_swiglu_fp8_rowwise(GemmSpec spec = {DType::E4M3, Major::K, Major::K});
// A plain dgrad on row-wise FP8 operands: D = a_scale * b_scale * acc (bf16). Bindings: A, B, a_scale, b_scale, D.
Graph dgrad_fp8_rowwise(GemmSpec spec = {DType::E4M3, Major::K, Major::K});
// swiglu_backward on row-wise FP8 operands: dz, y, zdz_partials, dz_amax. Bindings: A, B, a_scale, b_scale, z, dz,
// y, zdz_partials, dz_amax.
Graph swiglu_backward_fp8_rowwise(GemmSpec spec = {DType::E4M3, Major::K, Major::K});
// rmsnorm_backward_residual on row-wise FP8 operands: dx (bf16) with dx_amax, o, dgamma_partials. Bindings: A, B,
// a_scale, b_scale, rstd, x, gamma, s, dx_in, dx, dx_amax, o, dgamma_partials.
Graph rmsnorm_backward_residual_fp8_rowwise(GemmSpec spec = {DType::E4M3, Major::K, Major::K});
// The same without dx_amax. Bindings: A, B, a_scale, b_scale, rstd, x, gamma, s, dx_in, dx, o, dgamma_partials.
Graph rmsnorm_backward_residual_fp8_rowwise_bf16_dx(GemmSpec spec = {DType::E4M3, Major::K, Major::K});
// rope_backward_from_output with dz's row amax. Bindings: dqkv, pos, theta, dz, dz_amax, qkv, zdz_partials.
Graph rope_backward_from_output_fp8_rowwise();

// x_fp8_t = (x * x_fp8_inv_scale[n])^T in e4m3 (N x M, saturating): a weight gradient's operand, K-major, with one
// scale per column of x. Bindings: x, x_fp8_inv_scale, x_fp8_t.
Graph quantize_e4m3_colwise_t();
// D += a_scale[m] * b_scale[n] * acc (f32): a weight gradient dY^T X on those copies, added into an f32 buffer (a
// plain one, in bf16, is dgrad_fp8_rowwise). Bindings: A, B, a_scale, b_scale, D.
Graph wgrad_fp8_rowwise_accumulate(GemmSpec spec = {DType::E4M3, Major::K, Major::K});

// Every row-wise graph above, forward then backward.
std::vector<Graph> llama_block_fp8_rowwise();

// ---------------------------------------------------------------------------------------------------------
// The catalog of every graph above, from the one list blocks.def: for what goes through them all by name (the
// Python module coda.blocks, the tools/graphs check). The llama_block* lists are its recipes, in its order.

// Which llama_block* list holds a graph.
enum class BlockRecipe { Bf16, Fp8Tensorwise, Fp8Blockwise, Fp8Rowwise };

// A graph's default GemmSpec by kind (default_spec); None for tile programs and finalizers, which take no spec.
enum class BlockSpec {
    None,
    Bf16,             // GemmSpec{}: bf16, both K-major (the forward GEMMs)
    Bf16Backward,     // bf16, B N-major (the dgrads on the forward's weights)
    Fp8,              // e4m3 x e4m3, both K-major (tensorwise forward; every row-wise GEMM)
    Fp8Backward,      // e5m2 gradients x e4m3 transposed weights, both K-major
    Fp8Block128x128,  // e4m3, ScaleMode::Block128x128
    Fp8Block1x128,    // e4m3, ScaleMode::Block1x128 (the block-wise weight gradient)
};
std::optional<GemmSpec> default_spec(BlockSpec spec);

struct BlockEntry {
    const char* name;  // the function's name, its graph's and its tools/graphs file's (name.coda)
    BlockRecipe recipe;
    BlockSpec spec;
    Graph (*build)(GemmSpec spec);  // calls blocks::name; a graph of BlockSpec::None ignores spec
    // The graph with its default spec, as blocks::name() builds it.
    Graph make() const;
};

// Every block graph, in blocks.def's order.
const std::vector<BlockEntry>& catalog();

}  // namespace coda::blocks
