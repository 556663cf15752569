// The LLaMA-style block's epilogues, written with the public builder exactly as a user would.
// tools/graphs/*.coda hold their canonical text; a test keeps the two identical.
#include "coda/blocks.hpp"

namespace coda::blocks {
namespace {

enum class Rotation { Forward, Inverse };

// RoPE: rotates each (even, odd) column pair of x by pos_i * theta_j (Inverse: by its negative, which is the
// backward pass). The angle comes from a row vector of positions and a column vector of frequencies, so no
// cos/sin table is streamed; theta_j = 0 leaves a pair as it is (V columns).
Value rotate_pairs(Graph& g, Value x, Rotation rotation) {
    Value pos = g.to_f32(g.row_input("pos", DType::I32), "position");
    Value angle = g.mul(pos, g.col_input("theta", DType::F32, Width::Half), "angle");
    Value c = g.cos(angle, "cos_angle");
    Value s = g.sin(angle, "sin_angle");
    if (rotation == Rotation::Inverse) s = g.neg(s, "minus_sin_angle");
    Value e = g.even(x, "x_even");
    Value o = g.odd(x, "x_odd");
    Value re = g.sub(g.mul(e, c), g.mul(o, s), "rotated_even");
    Value ro = g.add(g.mul(e, s), g.mul(o, c), "rotated_odd");
    return g.join(re, ro, "rotated");
}

}  // namespace

Graph out_proj(GemmSpec spec) {
    Graph g = Graph::gemm("out_proj", spec);
    Value acc = g.accumulator();
    Value residual = g.tile_input("residual", DType::BF16);
    Value gamma = g.col_input("gamma", DType::BF16);
    Value x1 = g.add(acc, residual, "x1_value");
    g.store(x1, "x1", DType::BF16);
    g.store(g.mul(x1, gamma, "h_value"), "h", DType::BF16);
    g.reduce_row(x1, ReduceOp::SumSq, "x1_sumsq");
    return g;
}

Graph rms_finalize() {
    Graph g = Graph::finalize("rms_finalize");
    Value sum = g.partials("x1_sumsq", ReduceOp::Sum);
    Value mean = g.mul(sum, g.scalar("inv_d"), "mean_square");
    g.store(g.rsqrt(g.add(mean, g.scalar("eps")), "rstd_value"), "rstd", DType::F32);
    return g;
}

Graph gate_up_swiglu(GemmSpec spec) {
    Graph g = Graph::gemm("gate_up_swiglu", spec);
    Value z = g.mul(g.accumulator(), g.row_input("rstd", DType::F32), "z_value");
    g.store(z, "z", DType::BF16);
    Value gate = g.even(z, "gate");
    Value up = g.odd(z, "up");
    g.store(g.mul(g.silu(gate), up, "y_value"), "y", DType::BF16);
    return g;
}

Graph qkv_rope(GemmSpec spec) {
    Graph g = Graph::gemm("qkv_rope", spec);
    Value z = g.mul(g.accumulator(), g.row_input("rstd", DType::F32), "z_value");
    g.store(rotate_pairs(g, z, Rotation::Forward), "qkv", DType::BF16);
    return g;
}

Graph lm_head_ce(GemmSpec spec) {
    Graph g = Graph::gemm("lm_head_ce", spec);
    Value logits = g.mul(g.accumulator(), g.row_input("rstd", DType::F32), "logit");
    g.store(logits, "logits", DType::BF16);
    g.reduce_row(logits, ReduceOp::Lse, "lse_partials");
    Value is_label = g.eq(g.col_index(), g.row_input("labels", DType::I32), "is_label");
    g.reduce_row(g.mul(is_label, logits, "label_logit"), ReduceOp::Sum, "target_partials");
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
    Value dy = g.accumulator("dy");
    Value z = g.tile_input("z", DType::BF16, Width::Double);
    Value gate = g.even(z, "gate");
    Value up = g.odd(z, "up");
    Value sig = g.sigmoid(gate, "sig");
    Value silu_gate = g.mul(gate, sig, "silu_gate");
    // silu'(g) = sig * (1 + g * (1 - sig))
    Value dsilu = g.mul(sig, 1.0f + gate * (1.0f - sig), "dsilu");
    Value dgate = g.mul(g.mul(dy, up), dsilu, "dgate");
    Value dup = g.mul(dy, silu_gate, "dup");
    Value dz = g.join(dgate, dup, "dz_value");
    g.store(dz, "dz", DType::BF16);
    g.store(g.mul(silu_gate, up, "y_value"), "y", DType::BF16);
    g.reduce_row(g.mul(z, dz, "z_dz"), ReduceOp::Sum, "zdz_partials");
    return g;
}

Graph rms_backward_finalize() {
    Graph g = Graph::finalize("rms_backward_finalize");
    Value sum = g.partials("zdz_partials", ReduceOp::Sum);
    g.store(g.mul(sum, g.scalar("inv_d"), "s_value"), "s", DType::F32);
    return g;
}

Graph rmsnorm_backward(GemmSpec spec) {
    Graph g = Graph::gemm("rmsnorm_backward", spec);
    Value d_out = g.accumulator("d_out");
    Value rstd = g.row_input("rstd", DType::F32);
    Value n = g.mul(g.tile_input("x", DType::BF16), rstd, "normed");
    Value gamma = g.col_input("gamma", DType::BF16);
    Value dx = g.mul(rstd, g.sub(g.mul(d_out, gamma), g.mul(n, g.row_input("s", DType::F32))), "dx");
    g.accumulate(dx, "dx_residual", DType::F32);
    g.store(g.mul(n, gamma, "o_value"), "o", DType::BF16);
    g.reduce_col(g.mul(d_out, n, "dgamma_terms"), ReduceOp::Sum, "dgamma_partials");
    return g;
}

Graph rope_backward() {
    Graph g = Graph::tile("rope_backward");
    Value dz = rotate_pairs(g, g.tile_input("dqkv", DType::BF16), Rotation::Inverse);
    g.store(dz, "dz", DType::BF16);
    g.reduce_row(g.mul(g.tile_input("z", DType::BF16), dz, "z_dz"), ReduceOp::Sum, "zdz_partials");
    return g;
}

Graph cross_entropy_backward() {
    Graph g = Graph::tile("cross_entropy_backward");
    Value logits = g.tile_input("logits", DType::BF16);
    Value p = g.exp(g.sub(logits, g.row_input("lse", DType::F32)), "probability");
    Value onehot = g.eq(g.col_index(), g.row_input("labels", DType::I32), "onehot");
    Value dlogits = g.mul(g.sub(p, onehot), g.scalar("scale"), "dlogits_value");
    g.store(dlogits, "dlogits", DType::BF16);
    g.reduce_row(g.mul(logits, dlogits, "z_dz"), ReduceOp::Sum, "zdz_partials");
    return g;
}

std::vector<Graph> llama_block() {
    return {out_proj(),        rms_finalize(),          gate_up_swiglu(), qkv_rope(),
            lm_head_ce(),      ce_finalize(),           swiglu_backward(), rms_backward_finalize(),
            rmsnorm_backward(), rope_backward(),         cross_entropy_backward()};
}

}  // namespace coda::blocks
