// Finalizers: a generated Program applied to every element l of a length-L vector, typically folding the
// T per-tile reduction partials of element l into one value (rstd, lse, dgamma).
//
// Contract:
//   - Program has `using Args = coda::EpilogueArgs<K>;` and
//     `__device__ static void element(const Args&, int l, const coda::FinalizeProblem&)`.
//   - Launch: block = 256, grid = ceil(l / 256), which the host may cap: the grid-stride loop still visits
//     every l < problem.l exactly once. No shared memory.
#pragma once

#include "coda/epilogue_contract.cuh"

namespace coda {

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
    const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
    for (long long l = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; l < problem.l; l += stride)
        Program::element(args, static_cast<int>(l), problem);
}

}  // namespace coda
