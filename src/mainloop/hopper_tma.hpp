// Tensor maps (CUtensorMap) of the Hopper mainloop: its operands', in the layout templates/coda/hopper_gemm.cuh
// documents (2-D, the stored rows' contiguous dimension innermost, 128-byte swizzle, zeros outside the tensor), and
// its staged tile tensors', in the layout of hopper_staging.cuh's SwizzledChunk.
#pragma once

#include <cuda.h>

#include <vector>

#include "coda/graph.hpp"
#include "coda/kernel_abi.cuh"
#include "runtime/launch_plan.hpp"

namespace coda {

struct TmaOperands {
    CUtensorMap a;
    CUtensorMap b;
};

// `problem` must have passed the Hopper launcher's checks (aligned bases and leading dimensions). `info` is the
// kernel's: its tile, and its cluster, whose CTAs each load a share of a K-major operand they share (B along M, A
// along N) and multicast it.
TmaOperands encode_tma_operands(const GemmProblem& problem, const GemmSpec& spec, const KernelInfo& info);

// The maps of the graph's tile inputs (when the kernel loads them by TMA), then of its staged tile outputs and
// transposed outputs (TransposedChunk's boxes), each in
// the order the generated epilogue numbers them (graph order), as `how` (the kernel's KernelInfo::tma) says: each
// tensor's rows as bytes, a box of the chunk's row bytes (at most 128, in parts beyond) by the rows `how` gives,
// swizzled in the mode of that span, bounded by the logical N (never the row pitch). All zero when the kernel moves
// nothing by TMA or some tile tensor is not 16-byte aligned in base and row pitch; the kernel then reads and writes
// tile tensors in global memory (it checks the same rule).
std::vector<CUtensorMap> encode_tile_maps(const CheckedGraph& g, const LaunchPlan& plan, const TmaTileInfo& how);

// Whether a kernel may stage the tile tensors (tile inputs and stores, and with `transposed_outputs` the
// store_transposed outputs) `plan` binds: each 16-byte aligned in base and row pitch, each stored row whole 16-byte
// units (a transposed output's rows are M elements). The kernel's own check (hopper_gemm.cuh) is the same rule.
bool tile_tensors_stageable(const CheckedGraph& g, const LaunchPlan& plan, bool transposed_outputs = false);

}  // namespace coda
