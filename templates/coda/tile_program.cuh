// Tile programs: the epilogue contract applied to an M x N index space with no GEMM (acc0 = acc1 = 0), for
// graphs that only read tile inputs (RoPE backward, dlogits, the first RMSNorm statistic).
//
// Contract:
//   - Launch: grid = (ceil(M / 64), ceil(N / 128)), block = 256, dynamic shared memory = kSmemBytes.
//   - Each CTA owns one 64 x 128 tile: begin_tile, visit for every (row_slot, col_slot) inside [M] x [N]
//     (N even), end_tile with the whole dynamic shared memory as scratch.
//   - Layout: a warp covers 32 consecutive column pairs of one row, so each visit's loads and stores are
//     coalesced (128 bytes per warp for a full-width bf16 tile); the 8 warps cover 4 rows x 64 pairs at a
//     time, and a thread walks 16 rows, 4 apart.
#pragma once

#include "coda/epilogue_contract.cuh"

namespace coda {

struct TileProgramLayout {
    static constexpr int kBM = kTileProgramBM;
    static constexpr int kBN = kTileProgramBN;
    static constexpr int kThreads = kTileProgramThreads;
    static constexpr int kPairsPerWarp = 32;                            // one column pair per lane
    static constexpr int kWarpsPerRow = (kBN / 2) / kPairsPerWarp;      // 2
    static constexpr int kRowsAtOnce = (kThreads / 32) / kWarpsPerRow;  // 4
    static constexpr int kRowSlots = kBM / kRowsAtOnce;                 // 16
    static constexpr int kColSlots = 1;
    static constexpr int kRowSharers = kWarpsPerRow * kPairsPerWarp;  // every pair of the row
    static constexpr int kColSharers = kRowsAtOnce;

    __device__ static int thread_index() { return static_cast<int>(threadIdx.x); }
    __device__ static int pair() { return thread_index() % (kWarpsPerRow * kPairsPerWarp); }
    __device__ static int row_group() { return thread_index() / (kWarpsPerRow * kPairsPerWarp); }
    __device__ static int slot_row(int row_slot) { return row_slot * kRowsAtOnce + row_group(); }
    __device__ static int slot_col(int) { return 2 * pair(); }
    __device__ static int row_sharer() { return pair(); }
    __device__ static int col_sharer() { return row_group(); }
    __device__ static void sync() { __syncthreads(); }
};

template <class Epilogue>
struct TileProgramTraits {
    using Layout = TileProgramLayout;
    static constexpr int kThreads = Layout::kThreads;
    static constexpr int kBM = Layout::kBM;
    static constexpr int kBN = Layout::kBN;
    static constexpr int kSmemBytes = Epilogue::template scratch_floats<Layout>() * 4;
    // What the kernel reports to the host (coda_kernel_info): the fixed tile, no pipeline.
    __host__ __device__ static constexpr KernelInfo info() {
        return {kKernelInfoVersion, KernelKind::TileProgram, kThreads, kSmemBytes, kBM, kBN, 1, 0, {}};
    }
};

template <class Epilogue>
__global__ void __launch_bounds__(TileProgramLayout::kThreads)
    tile_program(const TileProblem problem, const typename Epilogue::Args args) {
    using L = TileProgramLayout;
    extern __shared__ __align__(16) unsigned char coda_tile_smem[];
    const int tile_m = static_cast<int>(blockIdx.x);
    const int tile_n = static_cast<int>(blockIdx.y);
    typename Epilogue::template State<L> st;
    Epilogue::template begin_tile<L>(st);
    const int n = tile_n * L::kBN + L::slot_col(0);
    if (n < problem.n) {
#pragma unroll
        for (int rs = 0; rs < L::kRowSlots; ++rs) {
            const int m = tile_m * L::kBM + L::slot_row(rs);
            if (m < problem.m)
                Epilogue::template visit<L>(args, st, Coord{m, n, problem.m, problem.n}, rs, 0, 0.0f, 0.0f);
        }
    }
    Epilogue::template end_tile<L>(args, st, reinterpret_cast<float*>(coda_tile_smem),
                                   TileCoord{tile_m, tile_n, problem.m, problem.n});
}

}  // namespace coda
