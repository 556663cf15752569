// Tensor maps (CUtensorMap) for the Hopper mainloop's operands, encoded on the host per launch, in the layout
// templates/coda/hopper_gemm.cuh documents: 2-D, the stored rows' contiguous dimension innermost, 128-byte
// swizzle, zeros outside the tensor.
#pragma once

#include <cuda.h>

#include <vector>

#include "coda/graph.hpp"
#include "runtime/launch_plan.hpp"

namespace coda {

struct TmaOperands {
    CUtensorMap a;
    CUtensorMap b;
};

// `problem` must have passed plan_launch with tma_operands = true (aligned bases and leading dimensions).
TmaOperands encode_tma_operands(const abi::GemmProblem& problem, const GemmSpec& spec, TileShape tile);

// Which tile tensors a Hopper kernel moves by TMA (coda_kernel_info): `count` maps in its parameter; tile
// inputs in boxes of `chunk_columns` columns x `input_rows` rows, tile outputs of `chunk_columns` x `output_rows`.
struct TileMapLayout {
    int count = 0;
    bool inputs = false;
    bool outputs = false;
    int chunk_columns = 0;
    int input_rows = 0;
    int output_rows = 0;
};

// The maps of the graph's TMA-moved tile tensors, as templates/coda/hopper_staging.cuh's SwizzledChunk lays them
// out: the tile inputs, then the tile outputs (stores), each in graph order (the generated epilogue's numbering);
// each tensor's rows as bytes, a box of the chunk's row bytes (at most 128, in parts beyond) by the rows above,
// swizzled in the mode of that span. All zero when some tile tensor is not 16-byte aligned in base and row pitch:
// the kernel then reads and writes tile tensors in global memory (it checks the same rule).
std::vector<CUtensorMap> encode_tile_maps(const CheckedGraph& g, const LaunchPlan& plan, const TileMapLayout& how);

}  // namespace coda
