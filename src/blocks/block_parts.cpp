#include "blocks/block_parts.hpp"

namespace coda::blocks::parts {

Value rotate_pairs(Graph& g, Value x, Rotation rotation) {
    Value pos_i32 = g.row_input("pos", DType::I32);
    Value pos = g.to_f32(pos_i32, "position");
    Value theta = g.col_input("theta", DType::F32, Width::Half);
    Value angle = g.mul(pos, theta, "angle");
    Value c = g.cos(angle, "cos_angle");
    Value s = g.sin(angle, "sin_angle");
    if (rotation == Rotation::Inverse) s = g.neg(s, "minus_sin_angle");
    Value e = g.even(x, "x_even");
    Value o = g.odd(x, "x_odd");
    Value ec = g.mul(e, c, "even_cos");
    Value os = g.mul(o, s, "odd_sin");
    Value es = g.mul(e, s, "even_sin");
    Value oc = g.mul(o, c, "odd_cos");
    Value re = g.sub(ec, os, "rotated_even");
    Value ro = g.add(es, oc, "rotated_odd");
    return g.join(re, ro, "rotated");
}

NormBackward norm_backward_values(Graph& g, Value d_out, const std::string& dx_name) {
    Value rstd = g.row_input("rstd", DType::F32);
    Value x = g.tile_input("x", DType::BF16);
    Value n = g.mul(x, rstd, "normed");
    Value gamma = g.col_input("gamma", DType::BF16);
    Value s = g.row_input("s", DType::F32);
    Value dn = g.mul(d_out, gamma, "d_normed");
    Value ns = g.mul(n, s, "normed_s");
    Value dx = g.mul(rstd, g.sub(dn, ns, "d_centered"), dx_name);
    return {d_out, dx, n, gamma};
}

void norm_backward_outputs(Graph& g, const NormBackward& v) {
    g.store(g.mul(v.normed, v.gamma, "o_value"), "o", DType::BF16);
    g.reduce_col(g.mul(v.d_out, v.normed, "dgamma_terms"), ReduceOp::Sum, "dgamma_partials");
}

void residual_outputs(Graph& g, Value acc, const EmitOperand& emit_h) {
    Value residual = g.tile_input("residual", DType::BF16);
    Value gamma = g.col_input("gamma", DType::BF16);
    Value x1 = g.add(acc, residual, "x1_value");
    g.store(x1, "x1", DType::BF16);
    emit_h(g, g.mul(x1, gamma, "h_value"));
    g.reduce_row(x1, ReduceOp::SumSq, "x1_sumsq");
}

NormBackward residual_norm_backward(Graph& g, Value d_out, const EmitOperand& emit_dx) {
    const NormBackward v = norm_backward_values(g, d_out, "dx_norm");
    Value dx_in = g.tile_input("dx_in", DType::BF16);
    Value dx = g.add(v.dx, dx_in, "dx_value");
    g.store(dx, "dx", DType::BF16);
    if (emit_dx) emit_dx(g, dx);
    return v;
}

Graph rope_backward_from_output(const std::string& name, const EmitOperand& emit_dz) {
    Graph g = Graph::tile(name);
    Value dqkv = g.tile_input("dqkv", DType::BF16);
    emit_dz(g, rotate_pairs(g, dqkv, Rotation::Inverse));
    Value qkv = g.tile_input("qkv", DType::BF16);
    g.reduce_row(g.mul(qkv, dqkv, "z_dz"), ReduceOp::Sum, "zdz_partials");
    return g;
}

Value rms_scaled(Graph& g, Value acc, const std::string& name) {
    Value rstd = g.row_input("rstd", DType::F32);
    return g.mul(acc, rstd, name);
}

Value swiglu_outputs(Graph& g, Value z) {
    g.store(z, "z", DType::BF16);
    Value gate = g.even(z, "gate");
    Value up = g.odd(z, "up");
    Value silu_gate = g.silu(gate, "silu_gate");
    Value y = g.mul(silu_gate, up, "y_value");
    g.store(y, "y", DType::BF16);
    return y;
}

SwigluBackward swiglu_backward_values(Graph& g, Value dy) {
    Value z = g.tile_input("z", DType::BF16, Width::Double);
    Value gate = g.even(z, "gate");
    Value up = g.odd(z, "up");
    Value sig = g.sigmoid(gate, "sig");
    Value silu_gate = g.mul(gate, sig, "silu_gate");
    // silu'(g) = sig * (1 + g * (1 - sig))
    Value one = g.constant(1.0f, "one");
    Value one_minus_sig = g.sub(one, sig, "one_minus_sig");
    Value slope = g.add(one, g.mul(gate, one_minus_sig), "slope");
    Value dsilu = g.mul(sig, slope, "dsilu");
    Value dy_up = g.mul(dy, up, "dy_up");
    Value dgate = g.mul(dy_up, dsilu, "dgate");
    Value dup = g.mul(dy, silu_gate, "dup");
    Value dz = g.join(dgate, dup, "dz_value");
    return {z, up, silu_gate, dz};
}

Value swiglu_gradient(Graph& g, Value dy) {
    const SwigluBackward v = swiglu_backward_values(g, dy);
    g.store(v.dz, "dz", DType::BF16);
    g.store(g.mul(v.silu_gate, v.up, "y_value"), "y", DType::BF16);
    g.reduce_row(g.mul(v.z, v.dz, "z_dz"), ReduceOp::Sum, "zdz_partials");
    return v.dz;
}

void store_fp8_grouped(Graph& g, Value t, const std::string& name) {
    Value magnitude = g.abs(t, name + "_magnitude");
    Value amax = g.reduce_group(magnitude, ReduceOp::Max, name + "_group_amax");
    Value inv_largest = g.constant(1.0f / 448.0f, name + "_inv_e4m3_largest");
    Value amax_scaled = g.mul(amax, inv_largest, name + "_amax_scaled");
    Value smallest = g.constant(1.17549435e-38f, name + "_smallest_scale");  // the smallest normal f32
    Value scale = g.max(amax_scaled, smallest, name + "_scale");
    // t times the group's 1 / scale: one division per group. A division per element was 2.5 ms of
    // swiglu_backward_fp8_blockwise's 6.0 at 16384 x 14336 x 4096 (H100; `coda tune`, docs/PERFORMANCE.md).
    Value inv_scale = g.div(g.constant(1.0f, name + "_one"), scale, name + "_inv_scale");
    Value quantized = g.mul(t, inv_scale, name + "_quantized");
    g.store(quantized, name + "_fp8", DType::E4M3);
    g.reduce_row(scale, ReduceOp::Max, name + "_scale_partials");
}

}  // namespace coda::blocks::parts
