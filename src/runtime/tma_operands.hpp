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

// The most tile-input maps a Hopper kernel takes (templates/coda/hopper_gemm.cuh's kHopperMaxTileMaps; the
// runtime checks each kernel's count when it loads it).
constexpr int kMaxTileMaps = 16;

// How a Hopper kernel loads its tile inputs (coda_kernel_info): `count` maps in its parameter, and whether it
// loads them by TMA in boxes of `chunk_columns` columns x `rows` rows.
struct TileInputMaps {
    int count = 0;
    bool loaded_by_tma = false;
    int chunk_columns = 0;
    int rows = 0;
};

// The maps of the graph's tile inputs, in the order the generated epilogue numbers them (graph order), as
// templates/coda/hopper_staging.cuh's TmaTileInputs reads them: each input's rows as bytes, a box of the chunk's
// row bytes (at most 128, in parts beyond) by `rows` rows, swizzled in the mode of that span. All zero when the
// kernel does not load by TMA or some tile tensor is not 16-byte aligned in base and row pitch; the kernel then
// reads tile tensors from global memory (it checks the same rule).
std::vector<CUtensorMap> encode_tile_input_maps(const CheckedGraph& g, const LaunchPlan& plan,
                                                const TileInputMaps& how);

}  // namespace coda
