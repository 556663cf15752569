// The Hopper mainloop's pipelines (hopper_gemm.cuh): its tuning constants, the ring position every mbarrier ring
// shares (PipelineState), and the producer roles (the tile order they follow: tile_order.cuh): the operands' TMA loads
// into the stage ring, the block scales beside them (block-scaled FP8) and the tile inputs' TMA loads into the input
// ring; plus one stage's wgmmas, which the consumers issue. sm_90a; NVRTC, no host headers.
#pragma once

#include "coda/hopper_rules.cuh"
#include "coda/hopper_staging.cuh"
#include "coda/sm90_ops.cuh"
#include "coda/tile_order.cuh"

namespace coda {

constexpr int kHopperBK = hopper_rules::kBK;
constexpr int kHopperMaxSmemBytes = hopper_rules::kSmemBudgetBytes;
constexpr int kWarpgroupThreads = 128;        // four warps issue one wgmma together
constexpr int kSwizzleRowBytes = 128;         // a row of a TMA box in 128-byte swizzle mode: 64 16-bit elements
constexpr int kSwizzleAtomBytes = 1024;       // 8 such rows: swizzled boxes and wgmma operands start on these
constexpr int kHopperProducerRegisters = 40;  // the producer thread needs addresses and loop counters only
constexpr int kHopperConsumerRegisters = 232; // 128 accumulators plus the epilogue; 40 + 2 * 232 fits 512 / thread-slot
constexpr int kHopperBatchRegisters = 16;     // registers the epilogue may spend on inputs loaded ahead of use
constexpr int kHopperPrefetchLead = 8;        // k-tiles before a tile's epilogue at which its tile inputs are prefetched
// Staging tile outputs in shared memory (hopper_staging.cuh) may cost pipeline stages down to 3, and loading tile
// inputs by TMA down to kHopperMinStagesInputs. Both go a chunk of 4 column slots (32 columns) at a time; the
// input ring holds kHopperInputSlots chunks, so the loader runs that far ahead of the visits. At most
// kHopperMaxTileMaps tile inputs travel as tensor maps (kernel parameters); more are read from global memory.
constexpr int kHopperMinStagesOutputs = 3;
constexpr int kHopperMinStagesInputs = 4;
constexpr int kHopperChunkSlots = 4;
// Bytes a consumer thread may keep of an epilogue's reduction state, row values (all its row slots) and column
// values (a chunk's column slots) beside the accumulators; beyond that row and column values are computed at the
// visits (hopper_epilogue.cuh). More spilled rmsnorm_backward at bn=256.
constexpr int kHopperKeptValueBytes = 128;
constexpr int kHopperInputSlots = 2;
constexpr int kHopperMaxTileMaps = hopper_rules::kMaxTileMaps;
// Registers staging needs on top of the accumulators and the epilogue's reduction state (ptxas spills below it:
// rmsnorm_backward's column reduction at 64x256 ping-pong keeps 64 partials next to 128 accumulators).
constexpr int kHopperStagingRegisters = 48;

namespace detail {

// A position in a ring of kSlots buffers, each with a "full" and an "empty" mbarrier: which buffer, and the parity
// its barriers wait for. Position p is buffer p % kSlots in phase (p / kSlots) % 2. The producers, the consumers and
// the input ring all count positions this way.
template <int kSlots>
struct PipelineState {
    int index;
    unsigned phase;

    __device__ static PipelineState at(int position) {
        return {position % kSlots, static_cast<unsigned>(position / kSlots) & 1u};
    }
    __device__ void advance() {
        if (++index == kSlots) {
            index = 0;
            phase ^= 1u;
        }
    }
};

// The parity to wait for on a barrier that completes once per use, before its use number `use` (0, 1, ...).
__device__ __forceinline__ unsigned parity_of_use(int use) { return static_cast<unsigned>(use) & 1u; }

// One box of an operand into this CTA's stage, or (shared by kCtas CTAs of a cluster) into every CTA's.
template <int kCtas>
__device__ __forceinline__ void hopper_load_box(unsigned dst, const TmaDescriptor* map, unsigned bar, int c0, int c1) {
    if constexpr (kCtas == 1)
        sm90::tma_load_2d(dst, map, bar, c0, c1);
    else
        sm90::tma_load_2d_multicast(dst, map, bar, c0, c1, static_cast<unsigned short>((1u << kCtas) - 1));
}

// The operand producer (one thread of warpgroup 0): for every k-tile of every item of this CTA, waits until the
// next stage is free (in a cluster: free in every CTA, since this producer's multicast writes into all of them),
// then loads A and B into it by TMA, completing on the stage's full barrier.
template <class Tr>
__device__ __forceinline__ void hopper_produce(unsigned stages_base, unsigned full, unsigned empty,
                                               const TileOrder<Tr::kClusterM, Tr::kClusterN, Tr::kStreamK>& order,
                                               int rank,
                                               const TmaDescriptor* tma_a, const TmaDescriptor* tma_b) {
    constexpr int BM = Tr::kBM, BN = Tr::kBN;
    PipelineState<Tr::kStages> stage{0, 0};
    const auto load_item = [&](const WorkItem& w) {
        // A tile beyond M or N (second of a pair) loads the last valid rows or columns instead: what it computes
        // is discarded.
        const int m0 = (w.tm < order.tiles_m ? w.tm : order.tiles_m - 1) * BM;
        const int n0 = (w.tn < order.tiles_n ? w.tn : order.tiles_n - 1) * BN;
        // The rank along the dimension that shares the operand: which share of it this CTA loads.
        const int a_share = Tr::kClusterN > 1 ? rank : 0, b_share = Tr::kClusterM > 1 ? rank : 0;
        for (int kt = w.k_begin; kt < w.k_begin + w.k_tiles; ++kt, stage.advance()) {
            sm90::mbarrier_wait(empty + 8 * stage.index, stage.phase ^ 1);
            const unsigned bar = full + 8 * stage.index;
            // Each CTA's stage receives all of A and B, whoever issues the copies.
            sm90::mbarrier_arrive_expect_tx(bar, Tr::kStageBytes);
            const unsigned a_dst = stages_base + stage.index * Tr::kStageBytes;
            const unsigned b_dst = a_dst + Tr::kABytes;
            const int k0 = kt * Tr::BK;
            constexpr int kBoxBytes = 64 * kSwizzleRowBytes;  // an M/N-major box: 64 k-rows of 64 elements
            if constexpr (Tr::kAKMajor) {
                constexpr int kRows = Tr::kABoxRows;  // BM / kClusterN: this CTA's share
                hopper_load_box<Tr::kClusterN>(a_dst + a_share * kRows * kSwizzleRowBytes, tma_a, bar, k0,
                                               m0 + a_share * kRows);
            } else {
#pragma unroll
                for (int c = 0; c < BM / 64; c += Tr::kClusterN)
                    hopper_load_box<Tr::kClusterN>(a_dst + (c + a_share) * kBoxBytes, tma_a, bar,
                                                   m0 + 64 * (c + a_share), k0);
            }
            if constexpr (Tr::kBKMajor) {
                constexpr int kRows = Tr::kBBoxRows;  // BN / kClusterM: this CTA's share
                hopper_load_box<Tr::kClusterM>(b_dst + b_share * kRows * kSwizzleRowBytes, tma_b, bar, k0,
                                               n0 + b_share * kRows);
            } else {
#pragma unroll
                for (int c = 0; c < BN / 64; c += Tr::kClusterM)
                    hopper_load_box<Tr::kClusterM>(b_dst + (c + b_share) * kBoxBytes, tma_b, bar,
                                                   n0 + 64 * (c + b_share), k0);
            }
        }
    };
    for (int local = 0; local < order.count; ++local) load_item(order.item(local, rank));
}

// The block-scale loader (one warp of warpgroup 0, block-scaled FP8: GemmSpec::block_scales): for every k-tile of
// every item of this CTA, in the operand producer's order, once the stage is free, copies the block's scales into
// the stage's slot beside it by cp.async: A_scale[kb][row] of the tile's BM rows (0 past M), then B_scale[nb][kb] of
// each of the tile's 128-column blocks nb, or (kBScaleRows) B_scale[kb][col] of its BN columns (0 past N: a tile
// past N is a cluster partner's), from the epilogue's parameter slots (kernel_abi.cuh: A_scale's pointer
// and leading dimension, then B_scale's). Each lane's copies arrive on the stage's full barrier when they are done,
// so the loader runs as far ahead as the operand producer, and a consumer that has waited for the stage reads its
// scales from shared memory instead of loading them itself.
template <class Tr>
__device__ __forceinline__ void hopper_load_block_scales(const GemmProblem& problem,
                                                         const typename Tr::Epilogue::Args& args, unsigned slots,
                                                         unsigned full, unsigned empty,
                                                         const TileOrder<Tr::kClusterM, Tr::kClusterN, Tr::kStreamK>&
                                                             order,
                                                         int rank) {
    constexpr int kSlot = Tr::Epilogue::kBlockScaleSlot;
    constexpr int kRowsPerLane = Tr::kBM / 32;
    const float* const a_scale = reinterpret_cast<const float*>(args.slot[kSlot]);
    const long long lda = static_cast<long long>(args.slot[kSlot + 1]);
    const float* const b_scale = reinterpret_cast<const float*>(args.slot[kSlot + 2]);
    const long long ldb = static_cast<long long>(args.slot[kSlot + 3]);
    const int lane = static_cast<int>(threadIdx.x) % 32;
    PipelineState<Tr::kStages> stage{0, 0};
    for (int local = 0; local < order.count; ++local) {
        const WorkItem w = order.item(local, rank);
        const int row = w.tm * Tr::kBM + lane;  // this lane's first row; then every 32nd
        for (int kt = w.k_begin; kt < w.k_begin + w.k_tiles; ++kt, stage.advance()) {
            sm90::mbarrier_wait(empty + 8 * stage.index, stage.phase ^ 1);
            const unsigned slot = slots + static_cast<unsigned>(stage.index * Tr::kScaleSlotBytes);
            const float* const a_block = a_scale + kt * lda;
#pragma unroll
            for (int j = 0; j < kRowsPerLane; ++j) {
                const bool in_m = row + 32 * j < problem.m;
                sm90::cp_async_f32(slot + 4u * (lane + 32 * j), in_m ? a_block + row + 32 * j : a_scale, in_m);
            }
            if constexpr (Tr::kBScaleRows) {  // B_scale[kb][col] of the tile's BN columns, as A's of its rows
                const int col = w.tn * Tr::kBN + lane;
                const float* const b_block = b_scale + kt * ldb;
#pragma unroll
                for (int j = 0; j < Tr::kBN / 32; ++j) {
                    const bool in_n = col + 32 * j < problem.n;
                    sm90::cp_async_f32(slot + 4u * (Tr::kBM + lane + 32 * j), in_n ? b_block + col + 32 * j : b_scale,
                                       in_n);
                }
            } else if (lane < Tr::kScaleBlocksN) {  // B's scale of each 128-column block of the tile
                const int nb = w.tn * Tr::kScaleBlocksN + lane;
                const bool in_n = nb * kScaleBlockK < problem.n;
                sm90::cp_async_f32(slot + 4u * (Tr::kBM + lane), in_n ? b_scale + nb * ldb + kt : b_scale, in_n);
            }
            sm90::cp_async_arrive(full + 8 * stage.index);
        }
    }
}

// The tile-input loader (one thread of the producer warpgroup, beside the operand producer): for every tile of
// this CTA in order, every chunk of kChunkColumns columns, loads the tile
// inputs' BM rows of the chunk into the next buffer of the ring once its visits are done with it. Ring position p
// uses buffer p % kHopperInputSlots.
template <class Tr>
__device__ __forceinline__ void hopper_load_tile_inputs(const TmaDescriptor* maps, unsigned buffers, unsigned full,
                                                        unsigned empty,
                                                        const TileOrder<Tr::kClusterM, Tr::kClusterN, Tr::kStreamK>&
                                                            order,
                                                        int rank, int n) {
    using In = typename Tr::StagedIn;
    constexpr int BM = Tr::kBM, BN = Tr::kBN;
    int position = 0;
    for (int local = 0; local < order.count; ++local) {
        const WorkItem w = order.item(local, rank);
        if (w.piece == Piece::Tail) continue;  // no epilogue, so no inputs (and no ring positions)
        const int tm = w.tm, tn = w.tn;
        for (int chunk = 0; chunk < Tr::kChunks; ++chunk, ++position) {
            const auto slot = PipelineState<kHopperInputSlots>::at(position);
            sm90::mbarrier_wait(empty + 8 * slot.index, slot.phase ^ 1);
            const int n0 = tn * BN + chunk * Tr::kChunkColumns;
            if (n0 < n && order.valid(tm, tn)) {
                sm90::mbarrier_arrive_expect_tx(full + 8 * slot.index, In::kBytes);
                In::issue(maps, buffers + slot.index * Tr::kInputSlotBytes, full + 8 * slot.index, tm * BM, n0);
            } else {
                // Beyond N or M: nothing to load. Visits past N (kVisitsBeyondN) read what the buffer holds; nothing
                // they make of it leaves the tile (add_in_columns, clipped TMA stores).
                sm90::mbarrier_arrive(full + 8 * slot.index);
            }
        }
    }
}

// wgmma descriptors of one operand (sm90::smem_descriptor_low). K-major: rows of 128 bytes, 8-row groups 1024
// bytes apart, a k16 step is 32 bytes along the (swizzled) row. M/N-major: 64-element chunks of 64 k-rows (8 KB)
// side by side, a k16 step is 16 k-rows (2 KB).
template <bool kKMajor>
struct HopperOperand {
    static constexpr unsigned kHigh = sm90::smem_descriptor_high(kSwizzleAtomBytes);
    // The low half of the descriptor of the tile at `tile`.
    __device__ static unsigned low(unsigned tile) {
        return sm90::smem_descriptor_low(tile, kKMajor ? 16 : 64 * kSwizzleRowBytes);
    }
    // What to add to a tile's low half for its rows from `first_row` (a multiple of 64) and k16 step kk.
    __host__ __device__ static constexpr unsigned offset(int first_row, int kk) {
        return kKMajor ? static_cast<unsigned>(first_row * kSwizzleRowBytes + kk * 32) >> 4
                       : static_cast<unsigned>((first_row / 64) * 64 * kSwizzleRowBytes + kk * 16 * kSwizzleRowBytes) >> 4;
    }
};

// One stage's wgmmas. a_low and b_low are the low descriptor halves of the stage's A (at this warpgroup's first
// row) and B tiles: every descriptor below adds a constant to them, so the loop spends few instructions on
// addressing (measured: ~130 per warp and k-tile when each descriptor was built from an address). kFresh (8-bit
// types): the stage's first wgmma overwrites acc instead of adding to it (a block-scaled k-block's own sum). BN: the
// columns multiplied, from b_low's first row on (a block-scaled 128 x 256 tile takes its B in two halves of 128).
template <class Tr, bool kFresh = false, int BN = Tr::kBN>
__device__ __forceinline__ void hopper_mma_stage(unsigned a_low, unsigned b_low, float (&acc)[Tr::kM64][BN / 2]) {
    using T = typename Tr::Element;
    constexpr bool kAKMajor = Tr::kAKMajor, kBKMajor = Tr::kBKMajor;
    using A = HopperOperand<kAKMajor>;
    using B = HopperOperand<kBKMajor>;
    // A wgmma takes 32 bytes of K: k16 of a 16-bit type, k32 of an 8-bit one (K-major: offset() steps 32 bytes).
    constexpr bool kEightBit = sizeof(T) == 1;
    static_assert(!kFresh || kEightBit, "coda: only the 8-bit wgmma forms take scale-d here");
#pragma unroll
    for (int kk = 0; kk < Tr::BK * static_cast<int>(sizeof(T)) / 32; ++kk) {
        const unsigned long long b_desc = sm90::smem_descriptor_join(b_low + B::offset(0, kk), B::kHigh);
#pragma unroll
        for (int i = 0; i < Tr::kM64; ++i) {
            const unsigned long long a_desc = sm90::smem_descriptor_join(a_low + A::offset(64 * i, kk), A::kHigh);
            const int scale_d = kFresh && kk == 0 ? 0 : 1;
            if constexpr (kEightBit && BN == 256)
                sm90::wgmma_m64n256k32<T>(acc[i], a_desc, b_desc, scale_d);
            else if constexpr (kEightBit)
                sm90::wgmma_m64n128k32<T>(acc[i], a_desc, b_desc, scale_d);
            else if constexpr (BN == 256)
                sm90::wgmma_m64n256k16<T, kAKMajor ? 0 : 1, kBKMajor ? 0 : 1>(acc[i], a_desc, b_desc);
            else
                sm90::wgmma_m64n128k16<T, kAKMajor ? 0 : 1, kBKMajor ? 0 : 1>(acc[i], a_desc, b_desc);
        }
    }
}

// A consumer warp's release of a stage: to its own CTA's producer, and in a cluster to every CTA's (each one's
// multicast wrote into this CTA's copy of the stage).
template <int kCluster>
__device__ __forceinline__ void free_stage(unsigned bar) {
    if constexpr (kCluster == 1) {
        sm90::mbarrier_arrive(bar);
    } else {
#pragma unroll
        for (int r = 0; r < kCluster; ++r) sm90::mbarrier_arrive_cluster(bar, r);
    }
}

}  // namespace detail
}  // namespace coda
