// Finalizers: a generated Program applied to every element l of a length-L vector, typically folding the
// T per-tile reduction partials of element l into one value (rstd, lse, dgamma).
//
// Contract:
//   - Program has `using Args = coda::EpilogueArgs<K>;` and `__device__ static void element(const Args&, int l,
//     const coda::FinalizeProblem&, const coda::FinalizeLane&)`.
//   - G = problem.strands threads of one warp share an element (G a power of two, 1..32): lane j * (32 / G) + i
//     takes element i of the warp's 32 / G consecutive elements and, as strand j, partial rows j, j + G, j + 2G, ...
//     (fold_partials). One warp load thus reads G rows of 32 / G consecutive floats.
//   - All 32 lanes of a warp call element() together, for the same group of elements (a warp-uniform
//     grid-stride loop), since fold_partials shuffles across the warp. A lane past the end of the vector is
//     given l = L - 1, to read in bounds; only lane.writes (strand 0 of an element < L) may store or accumulate,
//     so each element is written exactly once.
//   - Launch: block = kFinalizeThreads, grid = enough warps for ceil(L / (32 / G)) groups, which the host may cap.
//     No shared memory.
//   - The order of a fold depends on T and G only, and the host picks G from L and T (not from the GPU's size):
//     the same shape gives the same bits on every run.
#pragma once

#include "coda/epilogue_contract.cuh"
#include "coda/reduce.cuh"

namespace coda {

// One thread's share of its element.
struct FinalizeLane {
    int strand;   // j: folds partial rows j, j + strands, j + 2 strands, ...
    int strands;  // G, the problem's
    bool writes;  // the element's one writer: strand 0, of an element inside the vector
};

// Element l's T partials (f32 [T][L], element (t, l) at t * L + l) folded into one value. Each strand folds its
// rows in order; the strands then combine across lane offsets 16, 8, ..., 32 / G, strand 0's value always first,
// so the writer's result is one fixed tree for a given T and G. Every lane of the warp must call it.
template <RedOp Op>
__device__ float fold_partials(const float* partials, int l, const FinalizeProblem& p, const FinalizeLane& lane) {
    using R = Reducer<Op>;
    // Loads a batch ahead of the combines that wait on them: the combines are one dependent chain (log1pf and
    // expf each for lse), and a thread with one load in flight at a time leaves memory idle.
    constexpr int kLoadsAhead = 4;
    const float* column = partials + l;
    const long long row = p.l;  // floats from one partial row to the next
    float acc = R::identity();
    int t = lane.strand;
    for (; p.t - t > (kLoadsAhead - 1) * lane.strands; t += kLoadsAhead * lane.strands) {
        float x[kLoadsAhead];
#pragma unroll
        for (int k = 0; k < kLoadsAhead; ++k) x[k] = column[(t + k * lane.strands) * row];
#pragma unroll
        for (int k = 0; k < kLoadsAhead; ++k) acc = R::combine(acc, x[k]);
    }
    for (; t < p.t; t += lane.strands) acc = R::combine(acc, column[t * row]);
    for (int offset = kFinalizeWarpLanes / 2; offset * lane.strands >= kFinalizeWarpLanes; offset /= 2)
        acc = R::combine(acc, __shfl_xor_sync(0xffffffffu, acc, offset));
    return acc;
}

template <class Program>
struct FinalizeTraits {
    static constexpr int kThreads = kFinalizeThreads;
    static constexpr int kSmemBytes = 0;
    // What the kernel reports to the host (coda_kernel_info): no tile, no pipeline.
    __host__ __device__ static constexpr KernelInfo info() {
        return KernelInfo(KernelKind::Finalize, kThreads, kSmemBytes, 0, 0, 1, 1, 0, TmaTileInfo{});
    }
};

template <class Program>
__global__ void __launch_bounds__(kFinalizeThreads) finalize_program(const FinalizeProblem problem,
                                                        const typename Program::Args args) {
    constexpr int kWarps = kFinalizeThreads / kFinalizeWarpLanes;
    // Consecutive elements a warp takes at once, 32 / G; G and so this are powers of two: shifts, not divisions.
    const int per_warp = kFinalizeWarpLanes >> (__ffs(problem.strands) - 1);
    const int per_warp_shift = __ffs(per_warp) - 1;
    const int lane_index = static_cast<int>(threadIdx.x) % kFinalizeWarpLanes;
    const int strand = lane_index >> per_warp_shift;
    const int element = lane_index & (per_warp - 1);
    const long long groups = (static_cast<long long>(problem.l) + per_warp - 1) >> per_warp_shift;
    const long long stride = static_cast<long long>(gridDim.x) * kWarps;
    // One group of elements per warp and round: the loop is the same for all 32 lanes, as the shuffles need.
    for (long long group = static_cast<long long>(blockIdx.x) * kWarps + threadIdx.x / kFinalizeWarpLanes;
         group < groups; group += stride) {
        const long long l = group * per_warp + element;
        const bool inside = l < problem.l;
        const FinalizeLane lane{strand, problem.strands, inside && strand == 0};
        // A lane past the end takes part with the last element's reads, and writes nothing.
        Program::element(args, inside ? static_cast<int>(l) : problem.l - 1, problem, lane);
    }
}

}  // namespace coda
