// Tensor maps (CUtensorMap) for the Hopper mainloop's operands, encoded on the host per launch, in the layout
// templates/coda/hopper_gemm.cuh documents: 2-D, the stored rows' contiguous dimension innermost, 128-byte
// swizzle, zeros outside the tensor.
#pragma once

#include <cuda.h>

#include "coda/graph.hpp"
#include "runtime/launch_plan.hpp"

namespace coda {

struct TmaOperands {
    CUtensorMap a;
    CUtensorMap b;
};

// `problem` must have passed plan_launch with tma_operands = true (aligned bases and leading dimensions).
TmaOperands encode_tma_operands(const abi::GemmProblem& problem, const GemmSpec& spec, TileShape tile);

}  // namespace coda
