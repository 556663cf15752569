// Pieces the block epilogues share (llama_block.cpp, the BF16 block; fp8_epilogues.cpp and llama_block_fp8*.cpp, FP8).
// Every node is created in a statement of its own: C++ leaves the order in which a call's arguments are evaluated
// unspecified, and node order is part of the canonical text and the cache key.
#pragma once

#include <functional>
#include <string>

#include "coda/graph.hpp"

namespace coda::blocks::parts {

enum class Rotation { Forward, Inverse };

// RoPE: rotates each (even, odd) column pair of x by pos_i * theta_j (Inverse: by its negative, which is the
// backward pass). The angle comes from a row vector of positions and a column vector of frequencies, so no
// cos/sin table is streamed; theta_j = 0 leaves a pair as it is (V columns).
Value rotate_pairs(Graph& g, Value x, Rotation rotation);

// The RMSNorm backward's values in the epilogue of do = dz * W (DESIGN.md section 3), from do = `d_out`:
// n = x * rstd and dx = rstd * (do * gamma - n * s), named `dx_name`.
struct NormBackward {
    Value d_out;
    Value dx;
    Value normed;
    Value gamma;
};
NormBackward norm_backward_values(Graph& g, Value d_out, const std::string& dx_name);

// The outputs every RMSNorm backward variant shares after its dx: o = n * gamma and dgamma's column partials.
void norm_backward_outputs(Graph& g, const NormBackward& v);

// How an FP8 block hands on a tensor the next GEMM reads (its recipe's quantized store), given the graph and the value.
using EmitOperand = std::function<void(Graph&, Value)>;

// out_proj's epilogue after the accumulator `acc` (its recipe's scaling done): x1 = acc + residual (stored), h = x1 *
// gamma given to emit_h, the row partials of x1^2.
void residual_outputs(Graph& g, Value acc, const EmitOperand& emit_h);

// rmsnorm_backward_residual's dx from do = `d_out`: dx = dx_in + rstd * (do * gamma - n * s), stored in bf16 and,
// where emit_dx is set, given to it. Returns the norm's values for the caller's o and dgamma.
NormBackward residual_norm_backward(Graph& g, Value d_out, const EmitOperand& emit_dx);

// RoPE's backward as a tile program from the rotated output's gradient dqkv: dz = dqkv rotated back, given to emit_dz
// (its stores), and the row partials of sum_j qkv * dqkv (= sum_j z * dz, RMSNorm backward's s).
Graph rope_backward_from_output(const std::string& name, const EmitOperand& emit_dz);

// z = rstd * acc: the row scale that completes the previous RMSNorm (DESIGN.md section 3). `acc` is the
// accumulator, or an FP8 GEMM's accumulator times its operands' scales.
Value rms_scaled(Graph& g, Value acc, const std::string& name);

// SwiGLU's forward from the interleaved z = (gate, up) columns: stores z (for the backward) and y = silu(gate) * up.
// Returns y (half width).
Value swiglu_outputs(Graph& g, Value z);

// SwiGLU's backward values from dy (the gradient of y = silu(gate) * up) and the saved interleaved z (a double-width
// tile input): dz = join(dgate, dup), and what y = silu_gate * up is recomputed from.
struct SwigluBackward {
    Value z;
    Value up;
    Value silu_gate;
    Value dz;
};
SwigluBackward swiglu_backward_values(Graph& g, Value dy);

// SwiGLU's backward: stores dz and the recomputed y; row partials of sum_j z * dz for the RMSNorm backward. Returns
// dz.
Value swiglu_gradient(Graph& g, Value dy);

// t for a block-scaled GEMM that reads it in e4m3 (blocks.hpp, "block-wise"): {name}_fp8 = t / {name}_scale, where
// {name}_scale = max(amax of t's row group of 128 columns / 448, 2^-126) (reduce_group; the floor keeps an all-zero
// group finite), and the scales' row partials (Max) {name}_scale_partials: on 128-column tiles one per group, the
// next GEMM's block scales of A [ceil(N / 128) x M].
void store_fp8_grouped(Graph& g, Value t, const std::string& name);

}  // namespace coda::blocks::parts
