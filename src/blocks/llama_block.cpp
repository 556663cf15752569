// The LLaMA-style block's epilogues, written with the public builder exactly as a user would.
// tools/graphs/*.coda hold their canonical text; a test keeps the two identical.
#include "coda/blocks.hpp"

#include "blocks/block_parts.hpp"

namespace coda::blocks {
namespace {

using parts::NormBackward;
using parts::Rotation;
using parts::norm_backward_outputs;
using parts::rotate_pairs;

// Where the cross-entropy backward reads d(loss)/d(row loss): one scalar `scale` (dloss / M, the mean over all
// rows), or a row vector `row_scale` (dloss / n_valid, and 0 for rows whose label is ignored).
enum class LossScale { Scalar, PerRow };

// dlogits = (exp(logits - lse) - onehot(label)) * scale, stored; row partials of logits * dlogits (the RMSNorm
// backward's s, through rms_backward_finalize). The exponential is exp2 of logits * log2(e) - lse * log2(e): one FMA
// (lse * log2(e) is a row value, computed once per row) and exp2's four instructions a logit, where exp of the
// difference took a subtraction and eight. The scaled lse's rounding (2^-24 of it) scales every probability of a row
// alike, by about 2e-6 at lse = 30.
void cross_entropy_gradient(Graph& g, Value logits, LossScale how) {
    Value lse = g.row_input("lse", DType::F32);
    Value log2e = g.constant(1.4426950408889634f, "log2e");
    Value lse_log2 = g.mul(lse, log2e, "lse_log2");
    Value shifted = g.sub(g.mul(logits, log2e, "logit_log2"), lse_log2, "shifted_log2");
    Value p = g.exp2(shifted, "probability");
    Value column = g.col_index();
    Value labels = g.row_input("labels", DType::I32);
    Value onehot = g.eq(column, labels, "onehot");
    Value scale = how == LossScale::Scalar ? g.scalar("scale") : g.row_input("row_scale", DType::F32);
    Value dlogits = g.mul(g.sub(p, onehot, "p_minus_onehot"), scale, "dlogits_value");
    g.store(dlogits, "dlogits", DType::BF16);
    g.reduce_row(g.mul(logits, dlogits, "z_dz"), ReduceOp::Sum, "zdz_partials");
}

}  // namespace

Graph out_proj(GemmSpec spec) {
    Graph g = Graph::gemm("out_proj", spec);
    parts::residual_outputs(g, g.accumulator(), [](Graph& gr, Value h) { gr.store(h, "h", DType::BF16); });
    return g;
}

Graph rms_finalize() {
    Graph g = Graph::finalize("rms_finalize");
    Value sum = g.partials("x1_sumsq", ReduceOp::Sum);
    Value inv_d = g.scalar("inv_d");
    Value eps = g.scalar("eps");
    Value mean = g.mul(sum, inv_d, "mean_square");
    Value shifted = g.add(mean, eps, "mean_square_eps");
    g.store(g.rsqrt(shifted, "rstd_value"), "rstd", DType::F32);
    return g;
}

Graph gate_up_swiglu(GemmSpec spec) {
    Graph g = Graph::gemm("gate_up_swiglu", spec);
    parts::swiglu_outputs(g, parts::rms_scaled(g, g.accumulator(), "z_value"));
    return g;
}

Graph qkv_rope(GemmSpec spec) {
    Graph g = Graph::gemm("qkv_rope", spec);
    Value z = parts::rms_scaled(g, g.accumulator(), "z_value");
    g.store(rotate_pairs(g, z, Rotation::Forward), "qkv", DType::BF16);
    return g;
}

Graph lm_head_ce(GemmSpec spec) {
    Graph g = Graph::gemm("lm_head_ce", spec);
    Value logits = parts::rms_scaled(g, g.accumulator(), "logit");
    g.store(logits, "logits", DType::BF16);
    g.reduce_row(logits, ReduceOp::Lse, "lse_partials");
    Value column = g.col_index();
    Value labels = g.row_input("labels", DType::I32);
    Value is_label = g.eq(column, labels, "is_label");
    g.reduce_row(g.mul(is_label, logits, "label_logit"), ReduceOp::Sum, "target_partials");
    return g;
}

// The same statistics without the logits: what a training step needs when lm_head_ce_backward recomputes them.
Graph lm_head_ce_stats(GemmSpec spec) {
    Graph g = Graph::gemm("lm_head_ce_stats", spec);
    Value logits = parts::rms_scaled(g, g.accumulator(), "logit");
    g.reduce_row(logits, ReduceOp::Lse, "lse_partials");
    Value column = g.col_index();
    Value labels = g.row_input("labels", DType::I32);
    Value is_label = g.eq(column, labels, "is_label");
    g.reduce_row(g.mul(is_label, logits, "label_logit"), ReduceOp::Sum, "target_partials");
    return g;
}

// cross_entropy_backward on logits recomputed by the LM head GEMM (rstd * acc, in fp32) instead of read back.
Graph lm_head_ce_backward(GemmSpec spec) {
    Graph g = Graph::gemm("lm_head_ce_backward", spec);
    cross_entropy_gradient(g, parts::rms_scaled(g, g.accumulator(), "logit"), LossScale::Scalar);
    return g;
}

Graph lm_head_ce_backward_row_scale(GemmSpec spec) {
    Graph g = Graph::gemm("lm_head_ce_backward_row_scale", spec);
    cross_entropy_gradient(g, parts::rms_scaled(g, g.accumulator(), "logit"), LossScale::PerRow);
    return g;
}

Graph ce_finalize() {
    Graph g = Graph::finalize("ce_finalize");
    Value lse = g.partials("lse_partials", ReduceOp::Lse);
    Value target = g.partials("target_partials", ReduceOp::Sum);
    g.store(lse, "lse", DType::F32);
    g.store(g.sub(lse, target, "loss_value"), "loss", DType::F32);
    return g;
}

Graph swiglu_backward(GemmSpec spec) {
    Graph g = Graph::gemm("swiglu_backward", spec);
    parts::swiglu_gradient(g, g.accumulator("dy"));
    return g;
}

Graph swiglu_backward_tile() {
    Graph g = Graph::tile("swiglu_backward_tile");
    parts::swiglu_gradient(g, g.tile_input("dy", DType::BF16));
    return g;
}

Graph rms_backward_finalize() {
    Graph g = Graph::finalize("rms_backward_finalize");
    Value sum = g.partials("zdz_partials", ReduceOp::Sum);
    Value inv_d = g.scalar("inv_d");
    g.store(g.mul(sum, inv_d, "s_value"), "s", DType::F32);
    return g;
}

Graph rmsnorm_backward(GemmSpec spec) {
    Graph g = Graph::gemm("rmsnorm_backward", spec);
    const NormBackward v = parts::norm_backward_values(g, g.accumulator("d_out"), "dx");
    g.accumulate(v.dx, "dx_residual", DType::F32);
    norm_backward_outputs(g, v);
    return g;
}

Graph rmsnorm_backward_bf16(GemmSpec spec) {
    Graph g = Graph::gemm("rmsnorm_backward_bf16", spec);
    const NormBackward v = parts::norm_backward_values(g, g.accumulator("d_out"), "dx_norm");
    g.store(v.dx, "dx", DType::BF16);
    norm_backward_outputs(g, v);
    return g;
}

Graph rmsnorm_backward_residual(GemmSpec spec) {
    Graph g = Graph::gemm("rmsnorm_backward_residual", spec);
    norm_backward_outputs(g, parts::residual_norm_backward(g, g.accumulator("d_out"), nullptr));
    return g;
}

Graph dgamma_finalize() {
    Graph g = Graph::finalize("dgamma_finalize");
    g.store(g.partials("dgamma_partials", ReduceOp::Sum), "dgamma", DType::BF16);
    return g;
}

Graph rope_backward() {
    Graph g = Graph::tile("rope_backward");
    Value dqkv = g.tile_input("dqkv", DType::BF16);
    Value dz = rotate_pairs(g, dqkv, Rotation::Inverse);
    g.store(dz, "dz", DType::BF16);
    Value z = g.tile_input("z", DType::BF16);
    g.reduce_row(g.mul(z, dz, "z_dz"), ReduceOp::Sum, "zdz_partials");
    return g;
}

// Same rotation as rope_backward; the row partials from the saved rotated output instead of the pre-RoPE z:
// sum_j z_j dz_j = sum_j qkv_j dqkv_j, since each pair is rotated by an orthogonal matrix.
Graph rope_backward_from_output() {
    return parts::rope_backward_from_output("rope_backward_from_output",
                                            [](Graph& g, Value dz) { g.store(dz, "dz", DType::BF16); });
}

Graph rms_entry() {
    Graph g = Graph::tile("rms_entry");
    Value x = g.tile_input("x", DType::BF16);
    Value gamma = g.col_input("gamma", DType::BF16);
    g.store(g.mul(x, gamma, "h_value"), "h", DType::BF16);
    g.reduce_row(x, ReduceOp::SumSq, "x1_sumsq");
    return g;
}

Graph cross_entropy_backward() {
    Graph g = Graph::tile("cross_entropy_backward");
    cross_entropy_gradient(g, g.tile_input("logits", DType::BF16), LossScale::Scalar);
    return g;
}

Graph cross_entropy_backward_row_scale() {
    Graph g = Graph::tile("cross_entropy_backward_row_scale");
    cross_entropy_gradient(g, g.tile_input("logits", DType::BF16), LossScale::PerRow);
    return g;
}

}  // namespace coda::blocks
