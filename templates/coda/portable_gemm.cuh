// Portable tensor-core GEMM mainloop for sm_80 and newer (mma.sync m16n8k16, cp.async pipeline, ldmatrix)
// whose output tile is handed, still in registers, to a generated epilogue (epilogue_contract.cuh).
//
// Contract:
//   - Computes acc = A * B in fp32 for 16-bit T (bf16 or f16). A is logically M x K, stored M x K row-major
//     (kAKMajor, lda >= K) or K x M row-major (lda >= M); B is logically K x N, stored N x K row-major
//     (kBKMajor, ldb >= K) or K x N row-major (ldb >= N). Any M, N, K >= 1 with N even.
//   - Launch: grid = (ceil(M / BM), ceil(N / BN)), block = kThreads, dynamic shared memory = kSmemBytes
//     (the host raises the per-kernel limit when it exceeds 48 KB).
//   - 16-byte cp.async reads an operand only when problem.flags has kGemmVectorA / kGemmVectorB (base
//     16-byte aligned, leading dimension a multiple of 8); otherwise that operand takes a 2-byte path.
//     Elements outside the matrices are zero-filled in shared memory and never read from global memory.
//   - Epilogue: after the mainloop the pipeline's shared memory becomes the epilogue's scratch. Every thread
//     calls begin_tile, then visit for each (row_slot, col_slot) of Layout inside [M] x [N], then end_tile.
//     Layout is the mma.sync accumulator layout: in its warp tile, a thread holds for m16 fragment i and n8
//     fragment j rows lane/4 and lane/4 + 8 and columns 2 * (lane % 4) + {0, 1}.
#pragma once

#include "coda/epilogue_contract.cuh"
#include "coda/mma_sync_ops.cuh"
#include "coda/numeric.cuh"
#include "coda/portable_rules.cuh"
#include "coda/smem_tile.cuh"

namespace coda {

// Tuning. The host's default config (PortableConfig{}, include/coda/kernel_config.hpp) is BM = BN = 128, BK = 32, 2 x 2 warps,
// 4 stages: 64 x 64 warp tiles load 8 ldmatrix.x4 per 32 mma (enough reuse to keep the tensor pipe fed),
// and 3 k-tiles in flight (48 KB) cover global-memory latency at 2 CTAs per SM. Named constants:
constexpr int kSmRegisters = 65536;        // 32-bit registers per SM on sm_80 .. sm_90
constexpr int kGemmRegisterHeadroom = 64;  // registers beyond the accumulators: fragments, addresses, epilogue
// Ask for 2 CTAs per SM when the accumulators plus headroom fit in half the register file: one CTA's
// prologue and epilogue then overlap the other's mainloop. Larger warp tiles get 1 rather than spill.
__host__ __device__ constexpr int portable_gemm_min_ctas(int bm, int bn, int warps_m, int warps_n) {
    return ((bm / warps_m) * (bn / warps_n) / 32 + kGemmRegisterHeadroom) * 32 * warps_m * warps_n * 2 <=
                   kSmRegisters
               ? 2
               : 1;
}

// The mma.sync accumulator layout of a BM x BN tile split into WARPS_M x WARPS_N warp tiles. Warps are
// numbered row-major over the warp grid (warp = warp_m * WARPS_N + warp_n).
template <int BM, int BN, int WARPS_M, int WARPS_N>
struct MmaSyncLayout {
    static constexpr int kBM = BM;
    static constexpr int kBN = BN;
    static constexpr int kThreads = 32 * WARPS_M * WARPS_N;
    static constexpr int kWarpM = BM / WARPS_M;  // rows of one warp tile
    static constexpr int kWarpN = BN / WARPS_N;  // columns of one warp tile
    static constexpr int kFragsM = kWarpM / 16;  // m16 fragments per warp tile
    static constexpr int kFragsN = kWarpN / 8;   // n8 fragments per warp tile
    static constexpr int kRowSlots = 2 * kFragsM;
    static constexpr int kColSlots = kFragsN;
    static constexpr int kRowSharers = 4 * WARPS_N;
    static constexpr int kColSharers = 8 * WARPS_M;
    static_assert(BM % (16 * WARPS_M) == 0, "coda: BM must be a multiple of 16 * WARPS_M");
    static_assert(BN % (16 * WARPS_N) == 0, "coda: BN must be a multiple of 16 * WARPS_N (n8 fragments go in pairs)");

    __device__ static int thread_index() { return static_cast<int>(threadIdx.x); }
    __device__ static int lane() { return thread_index() % 32; }
    __device__ static int warp_m() { return (thread_index() / 32) / WARPS_N; }
    __device__ static int warp_n() { return (thread_index() / 32) % WARPS_N; }
    // Row slot 2i + h is row lane/4 + 8h of m16 fragment i.
    __device__ static int slot_row(int row_slot) {
        return warp_m() * kWarpM + (row_slot / 2) * 16 + (row_slot % 2) * 8 + lane() / 4;
    }
    __device__ static int slot_col(int col_slot) { return warp_n() * kWarpN + col_slot * 8 + 2 * (lane() % 4); }
    // A row is visited by the 4 lanes of one quad in each of the WARPS_N warps of its warp row.
    __device__ static int row_sharer() { return warp_n() * 4 + lane() % 4; }
    // A column pair is visited by the 8 quads of each of the WARPS_M warps of its warp column.
    __device__ static int col_sharer() { return warp_m() * 8 + lane() / 4; }
    __device__ static void sync() { __syncthreads(); }
};

template <class T, bool kAKMajor, bool kBKMajor, int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES,
          class Epilogue>
struct PortableGemmTraits {
    using Layout = MmaSyncLayout<BM, BN, WARPS_M, WARPS_N>;
    static constexpr int kThreads = Layout::kThreads;
    // Shared-memory tiles keep the stored orientation (contiguous dimension along a tile row), so every
    // 16-byte global chunk lands in one 16-byte shared chunk; ldmatrix(.trans) does the reorientation.
    using ATile = detail::SmemTile<kAKMajor ? BM : BK, kAKMajor ? BK : BM>;
    using BTile = detail::SmemTile<kBKMajor ? BN : BK, kBKMajor ? BK : BN>;
    static constexpr int kStageBytes = ATile::kBytes + BTile::kBytes;
    static constexpr int kPipelineBytes = STAGES * kStageBytes;
    static constexpr int kScratchBytes = Epilogue::template scratch_floats<Layout>() * 4;
    static constexpr int kSmemBytes = kPipelineBytes > kScratchBytes ? kPipelineBytes : kScratchBytes;
    // What the kernel reports to the host (coda_kernel_info).
    __host__ __device__ static constexpr KernelInfo info() {
        return KernelInfo(KernelKind::PortableGemm, kThreads, kSmemBytes, BM, BN, 1, 1, STAGES, TmaTileInfo{});
    }

    static_assert(sizeof(T) == 2, "coda: portable_gemm takes 16-bit inputs (coda::bf16 or coda::f16)");
    // reduce_group's pass over the accumulator runs on the Hopper mainloop alone (the host says so first).
    static_assert(Epilogue::kGroupReductions == 0, "coda: reduce_group needs the Hopper mainloop");
    // The host checks the same rules first (src/mainloop/portable.cpp) and says which one a config breaks.
    static_assert(portable_rules::check(BM, BN, BK, WARPS_M, WARPS_N, STAGES) == portable_rules::Rule::Ok,
                  "coda: this tile config breaks a rule of portable_rules.cuh");
};

namespace detail {

// Loads stage `stage` (k-tile kt) of both operands. Stored coordinates: a K-major operand's tile rows are
// M (or N) and its columns K; an M/N-major operand's tile rows are K.
template <class Tr, bool kAKMajor, bool kBKMajor, int BM, int BN, int BK>
__device__ __forceinline__ void gemm_load_stage(unsigned smem, int stage, int kt, const GemmProblem& p,
                                                int tile_m, int tile_n) {
    using ALoader = TileLoader<typename Tr::ATile, Tr::kThreads>;
    using BLoader = TileLoader<typename Tr::BTile, Tr::kThreads>;
    const unsigned a_dst = smem + stage * Tr::kStageBytes;
    const unsigned b_dst = a_dst + Tr::ATile::kBytes;
    const auto* a = static_cast<const unsigned short*>(p.a);
    const auto* b = static_cast<const unsigned short*>(p.b);
    const bool va = (p.flags & kGemmVectorA) != 0;
    const bool vb = (p.flags & kGemmVectorB) != 0;
    const int k0 = kt * BK;
    if constexpr (kAKMajor)
        ALoader::load(a_dst, a, p.lda, tile_m * BM, k0, p.m, p.k, va);
    else
        ALoader::load(a_dst, a, p.lda, k0, tile_m * BM, p.k, p.m, va);
    if constexpr (kBKMajor)
        BLoader::load(b_dst, b, p.ldb, tile_n * BN, k0, p.n, p.k, vb);
    else
        BLoader::load(b_dst, b, p.ldb, k0, tile_n * BN, p.k, p.n, vb);
}

// One BK-deep step of the warp tile on the stage at a_tile / b_tile.
template <class T, class Tr, bool kAKMajor, bool kBKMajor, int BK>
__device__ __forceinline__ void gemm_warp_step(unsigned a_tile, unsigned b_tile,
                                               float (&acc)[Tr::Layout::kFragsM][Tr::Layout::kFragsN][4]) {
    using L = typename Tr::Layout;
    using ATile = typename Tr::ATile;
    using BTile = typename Tr::BTile;
    const int lane = L::lane();
    const int m_base = L::warp_m() * L::kWarpM;
    const int n_base = L::warp_n() * L::kWarpN;
    // ldmatrix.x4 takes one row address per lane: lanes 8q..8q+7 address the 8 rows of 8x8 matrix q.
    const int r8 = lane & 7;
    const int q_lo = (lane >> 3) & 1;
    const int q_hi = lane >> 4;
#pragma unroll
    for (int ks = 0; ks < BK / 16; ++ks) {
        unsigned a[L::kFragsM][4];
        unsigned b[L::kFragsN][2];
#pragma unroll
        for (int i = 0; i < L::kFragsM; ++i) {
            // Matrices 0..3 are (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15).
            if constexpr (kAKMajor)
                ldmatrix_x4(a[i], a_tile + ATile::offset(m_base + i * 16 + q_lo * 8 + r8, ks * 2 + q_hi));
            else
                ldmatrix_x4_trans(a[i], a_tile + ATile::offset(ks * 16 + q_hi * 8 + r8, (m_base + i * 16) / 8 + q_lo));
        }
#pragma unroll
        for (int jp = 0; jp < L::kFragsN / 2; ++jp) {
            // Matrices 0..3 are (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15).
            unsigned r[4];
            if constexpr (kBKMajor)
                ldmatrix_x4(r, b_tile + BTile::offset(n_base + jp * 16 + q_hi * 8 + r8, ks * 2 + q_lo));
            else
                ldmatrix_x4_trans(r, b_tile + BTile::offset(ks * 16 + q_lo * 8 + r8, (n_base + jp * 16) / 8 + q_hi));
            b[2 * jp][0] = r[0];
            b[2 * jp][1] = r[1];
            b[2 * jp + 1][0] = r[2];
            b[2 * jp + 1][1] = r[3];
        }
#pragma unroll
        for (int i = 0; i < L::kFragsM; ++i) {
#pragma unroll
            for (int j = 0; j < L::kFragsN; ++j) mma_m16n8k16<T>(acc[i][j], a[i], b[j]);
        }
    }
}

}  // namespace detail

template <class T, bool kAKMajor, bool kBKMajor, int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES,
          class Epilogue>
__global__ void __launch_bounds__(32 * WARPS_M * WARPS_N, portable_gemm_min_ctas(BM, BN, WARPS_M, WARPS_N))
    portable_gemm(const GemmProblem problem, const typename Epilogue::Args args) {
    using Tr = PortableGemmTraits<T, kAKMajor, kBKMajor, BM, BN, BK, WARPS_M, WARPS_N, STAGES, Epilogue>;
    using L = typename Tr::Layout;
    extern __shared__ __align__(128) unsigned char coda_gemm_smem[];
    const unsigned smem = detail::shared_address(coda_gemm_smem);
    const int tile_m = static_cast<int>(blockIdx.x);
    const int tile_n = static_cast<int>(blockIdx.y);
    const int k_tiles = (problem.k + BK - 1) / BK;

    float acc[L::kFragsM][L::kFragsN][4];
#pragma unroll
    for (int i = 0; i < L::kFragsM; ++i)
#pragma unroll
        for (int j = 0; j < L::kFragsN; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

    // Pipeline: STAGES - 1 k-tiles in flight while one is consumed. One commit group per k-tile (empty ones
    // past the end keep the wait_group count uniform).
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < k_tiles)
            detail::gemm_load_stage<Tr, kAKMajor, kBKMajor, BM, BN, BK>(smem, s, s, problem, tile_m, tile_n);
        detail::cp_async_commit();
    }
    for (int kt = 0; kt < k_tiles; ++kt) {
        detail::cp_async_wait<STAGES - 2>();
        // Publishes k-tile kt to every warp, and guarantees that every warp is done with k-tile kt - 1,
        // whose stage the next load overwrites.
        __syncthreads();
        const int next = kt + STAGES - 1;
        if (next < k_tiles)
            detail::gemm_load_stage<Tr, kAKMajor, kBKMajor, BM, BN, BK>(smem, next % STAGES, next, problem,
                                                                        tile_m, tile_n);
        detail::cp_async_commit();
        const unsigned a_tile = smem + (kt % STAGES) * Tr::kStageBytes;
        detail::gemm_warp_step<T, Tr, kAKMajor, kBKMajor, BK>(a_tile, a_tile + Tr::ATile::kBytes, acc);
    }
    detail::cp_async_wait<0>();
    __syncthreads();  // the pipeline's shared memory becomes epilogue scratch

    typename Epilogue::template State<L> st;
    Epilogue::template begin_tile<L>(st);
    const int m0 = tile_m * BM;
    const int n0 = tile_n * BN;
#pragma unroll
    for (int i = 0; i < L::kFragsM; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row_slot = 2 * i + h;
            const int m = m0 + L::slot_row(row_slot);
            if (m >= problem.m) continue;
#pragma unroll
            for (int j = 0; j < L::kFragsN; ++j) {
                const int n = n0 + L::slot_col(j);
                if (n < problem.n)
                    Epilogue::template visit<L>(args, st, Coord{m, n, problem.m, problem.n}, row_slot, j,
                                                acc[i][j][2 * h], acc[i][j][2 * h + 1]);
            }
        }
    }
    Epilogue::template end_tile<L>(args, st, reinterpret_cast<float*>(coda_gemm_smem),
                                   TileCoord{tile_m, tile_n, problem.m, problem.n});
}

}  // namespace coda
