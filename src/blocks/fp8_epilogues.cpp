// The FP8 block epilogues of every recipe (fp8_epilogues.hpp): one builder per epilogue, the recipe choosing how the
// accumulator is scaled and how a tensor is handed on. Node names and order are each recipe's as they always were.
#include "blocks/fp8_epilogues.hpp"

#include "blocks/block_parts.hpp"

namespace coda::blocks::fp8 {
namespace {

// The row partials (Max) of |t| in t_amax: each row's amax, once they are combined over the row's tiles.
void row_amax(Graph& g, Value t, const std::string& name) {
    Value magnitude = g.abs(t, name + "_magnitude");
    g.reduce_row(magnitude, ReduceOp::Max, name + "_amax");
}

std::string named(const char* epilogue, const Recipe& r, const char* variant = "") {
    return std::string(epilogue) + "_" + r.name + variant;
}

}  // namespace

Value scaled_accumulator(Graph& g, const Recipe& r, const char* name) {
    Value acc = g.accumulator(name);
    switch (r.accumulator) {
        case Recipe::Accumulator::Scalars: {
            // The product of two per-tensor dequantization factors, one multiply a visit.
            Value a_scale = g.scalar("a_scale");
            Value b_scale = g.scalar("b_scale");
            Value scale = g.mul(a_scale, b_scale, "operand_scale");
            return g.mul(acc, scale, "scaled_acc");
        }
        case Recipe::Accumulator::RowCol: {
            Value a_scale = g.row_input("a_scale", DType::F32);
            Value b_scale = g.col_input("b_scale", DType::F32);
            Value row_scaled = g.mul(acc, a_scale, "row_scaled_acc");
            return g.mul(row_scaled, b_scale, "scaled_acc");
        }
        case Recipe::Accumulator::Mainloop: return acc;
    }
    return acc;
}

void store_fp8_operand(Graph& g, Value t, const std::string& name, DType fp8, bool transposed) {
    Value inv_scale = g.scalar(name + "_fp8_inv_scale");
    Value quantized = g.mul(t, inv_scale, name + "_quantized");
    g.store(quantized, name + "_fp8", fp8);
    if (transposed) g.store_transposed(quantized, name + "_fp8_t", fp8);
    row_amax(g, t, name);
}

void hand_on(Graph& g, const Recipe& r, Value t, const std::string& name, Role role) {
    switch (r.operand) {
        case Recipe::Operand::InverseScale:
            store_fp8_operand(g, t, name, role == Role::Gradient ? r.gradient : DType::E4M3);
            return;
        case Recipe::Operand::RowAmax: row_amax(g, t, name); return;
        case Recipe::Operand::Grouped: parts::store_fp8_grouped(g, t, name); return;
    }
}

Graph rms_entry(const Recipe& r) {
    Graph g = Graph::tile(named("rms_entry", r));
    Value x = g.tile_input("x", DType::BF16);
    Value gamma = g.col_input("gamma", DType::BF16);
    hand_on(g, r, g.mul(x, gamma, "h_value"), "h", Role::Activation);
    g.reduce_row(x, ReduceOp::SumSq, "x1_sumsq");
    return g;
}

Graph qkv_rope(const Recipe& r, GemmSpec spec) {
    Graph g = Graph::gemm(named("qkv_rope", r), spec);
    Value z = parts::rms_scaled(g, scaled_accumulator(g, r, "acc"), "z_value");
    g.store(parts::rotate_pairs(g, z, parts::Rotation::Forward), "qkv", DType::BF16);
    return g;
}

Graph out_proj(const Recipe& r, GemmSpec spec, bool fp8_h) {
    Graph g = Graph::gemm(named("out_proj", r, fp8_h ? "" : "_bf16_h"), spec);
    parts::residual_outputs(g, scaled_accumulator(g, r, "acc"), [&r, fp8_h](Graph& gr, Value h) {
        if (fp8_h)
            hand_on(gr, r, h, "h", Role::Activation);
        else
            gr.store(h, "h", DType::BF16);
    });
    return g;
}

Graph gate_up_swiglu(const Recipe& r, GemmSpec spec) {
    Graph g = Graph::gemm(named("gate_up_swiglu", r), spec);
    Value y = parts::swiglu_outputs(g, parts::rms_scaled(g, scaled_accumulator(g, r, "acc"), "z_value"));
    // A half-width FP8 tile is too narrow to stage: the recipes that store one quantize y in a tile program; its row
    // amax costs no store.
    if (r.operand == Recipe::Operand::RowAmax) hand_on(g, r, y, "y", Role::Activation);
    return g;
}

Graph dgrad(const Recipe& r, GemmSpec spec) {
    Graph g = Graph::gemm(named("dgrad", r), spec);
    g.store(scaled_accumulator(g, r, "acc"), "D", DType::BF16);
    return g;
}

Graph swiglu_backward(const Recipe& r, GemmSpec spec) {
    Graph g = Graph::gemm(named("swiglu_backward", r), spec);
    hand_on(g, r, parts::swiglu_gradient(g, scaled_accumulator(g, r, "dy")), "dz", Role::Gradient);
    return g;
}

Graph rmsnorm_backward_residual(const Recipe& r, GemmSpec spec, bool fp8_dx) {
    Graph g = Graph::gemm(named("rmsnorm_backward_residual", r, fp8_dx ? "" : "_bf16_dx"), spec);
    parts::EmitOperand emit_dx;
    if (fp8_dx) emit_dx = [&r](Graph& gr, Value dx) { hand_on(gr, r, dx, "dx", Role::Gradient); };
    parts::norm_backward_outputs(g, parts::residual_norm_backward(g, scaled_accumulator(g, r, "d_out"), emit_dx));
    return g;
}

Graph wgrad_accumulate(const Recipe& r, GemmSpec spec) {
    Graph g = Graph::gemm(std::string("wgrad_") + r.name + "_accumulate", spec);
    g.accumulate(scaled_accumulator(g, r, "acc"), "D", DType::F32);
    return g;
}

Graph rope_backward_from_output(const Recipe& r) {
    return parts::rope_backward_from_output(named("rope_backward_from_output", r), [&r](Graph& g, Value dz) {
        g.store(dz, "dz", DType::BF16);
        hand_on(g, r, dz, "dz", Role::Gradient);
    });
}

}  // namespace coda::blocks::fp8
