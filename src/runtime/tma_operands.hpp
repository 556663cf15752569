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

// `problem` must have passed plan_launch with tma_operands = true (aligned bases and leading dimensions). In a
// cluster of `cluster` CTAs along M, each loads 1 / cluster of a K-major B tile (and multicasts it).
TmaOperands encode_tma_operands(const abi::GemmProblem& problem, const GemmSpec& spec, TileShape tile, int cluster);

// The most tile-tensor maps a Hopper kernel takes (templates/coda/hopper_gemm.cuh's kHopperMaxTileMaps; the
// runtime checks each kernel's count when it loads it).
constexpr int kMaxTileMaps = 16;

// How a Hopper kernel moves its tile tensors by TMA (coda_kernel_info): `count` maps in its parameter; whether it
// loads its tile inputs by TMA, in boxes of `chunk_columns` columns x `input_rows` rows; and how many tile
// outputs it stores by TMA (their maps follow the inputs'), in boxes of `chunk_columns` x `output_rows`.
struct TileTensorMaps {
    int count = 0;
    bool inputs_by_tma = false;
    int chunk_columns = 0;
    int input_rows = 0;
    int outputs = 0;
    int output_rows = 0;
};

// The maps of the graph's tile inputs, then of its tile outputs, each in the order the generated epilogue numbers
// them (graph order), as templates/coda/hopper_staging.cuh's SwizzledChunk lays them out: each tensor's rows as
// bytes, a box of the chunk's row bytes (at most 128, in parts beyond) by the rows above, swizzled in the mode of
// that span. All zero when the kernel moves nothing by TMA or some tile tensor is not 16-byte aligned in base and
// row pitch; the kernel then reads and writes tile tensors in global memory (it checks the same rule).
std::vector<CUtensorMap> encode_tile_maps(const CheckedGraph& g, const LaunchPlan& plan, const TileTensorMaps& how);

}  // namespace coda
