// The FP8 block epilogues once, for every recipe (blocks.hpp: tensorwise, row-wise, block-wise): a recipe is a small
// policy (how the accumulator is scaled, how a tensor the next GEMM reads is written), the dataflow is the same.
#pragma once

#include <string>

#include "coda/graph.hpp"

namespace coda::blocks::fp8 {

struct Recipe {
    // How the epilogue scales the accumulator into the operands' units.
    enum class Accumulator {
        Scalars,   // acc * (a_scale * b_scale): per-tensor dequantization factors (scalars)
        RowCol,    // acc * a_scale[m] * b_scale[n]: A's row scale, B's column (output channel) scale
        Mainloop,  // acc as it is: the mainloop applied the block scales (GemmSpec::scales)
    };
    // How a tensor t that the next GEMM reads in FP8 is handed on.
    enum class Operand {
        InverseScale,  // t_fp8 = t * t_fp8_inv_scale (delayed scaling) and t_amax row partials (Max of |t|)
        RowAmax,       // only t_amax: t stays in bf16 and a quantize tile program applies its rows' scales
        Grouped,       // t_fp8 with each 128-column row group's own scale and t_scale_partials (store_fp8_grouped)
    };
    Accumulator accumulator;
    Operand operand;
    const char* name;  // the recipe's part of its graphs' names: out_proj_{name}, dgrad_{name}, ...
    DType gradient;    // the FP8 type of a gradient under InverseScale (an activation is always e4m3)
};

constexpr Recipe kTensorwise{Recipe::Accumulator::Scalars, Recipe::Operand::InverseScale, "fp8", DType::E5M2};
constexpr Recipe kRowwise{Recipe::Accumulator::RowCol, Recipe::Operand::RowAmax, "fp8_rowwise", DType::E4M3};
constexpr Recipe kBlockwise{Recipe::Accumulator::Mainloop, Recipe::Operand::Grouped, "fp8_blockwise", DType::E4M3};

// The accumulator source `name`, scaled as the recipe says.
Value scaled_accumulator(Graph& g, const Recipe& r, const char* name);

// t for a GEMM that reads it in `fp8`: t_fp8 = t * t_fp8_inv_scale (saturating), and the row partials of |t| (Max)
// in t_amax, from which the caller's delayed scaling takes the next step's scale. With `transposed`, also
// t_fp8_t = the same values transposed (N x M): a weight gradient's K-major operand.
void store_fp8_operand(Graph& g, Value t, const std::string& name, DType fp8, bool transposed = false);

// Which tensor a hand-on is: an activation (e4m3) or a gradient (the recipe's gradient type).
enum class Role { Activation, Gradient };
// t handed on to the next GEMM as the recipe says.
void hand_on(Graph& g, const Recipe& r, Value t, const std::string& name, Role role);

// The epilogues every recipe has (blocks.hpp says what each computes and binds), each graph named after its
// epilogue and the recipe: out_proj(kRowwise, spec, false) is out_proj_fp8_rowwise_bf16_h.
Graph rms_entry(const Recipe& r);
Graph qkv_rope(const Recipe& r, GemmSpec spec);
Graph out_proj(const Recipe& r, GemmSpec spec, bool fp8_h);
Graph gate_up_swiglu(const Recipe& r, GemmSpec spec);
Graph dgrad(const Recipe& r, GemmSpec spec);
Graph swiglu_backward(const Recipe& r, GemmSpec spec);
Graph rmsnorm_backward_residual(const Recipe& r, GemmSpec spec, bool fp8_dx);
Graph wgrad_accumulate(const Recipe& r, GemmSpec spec);
// The recipes that quantize RoPE's backward output (tensorwise, row-wise): dz in bf16 and handed on.
Graph rope_backward_from_output(const Recipe& r);

}  // namespace coda::blocks::fp8
