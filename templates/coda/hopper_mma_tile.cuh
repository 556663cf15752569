// One tile's mainloop on a consumer warpgroup of the Hopper GEMM (hopper_gemm.cuh's hopper_consume runs one per work
// item): it waits for each k-tile's stage, issues the stage's wgmmas and frees it. Two policies of one pipeline:
//   - fast (hopper_mma_tile): every k-tile's products go into the fp32 accumulator acc by wgmma itself;
//   - promoted (hopper_mma_tile_promoted, 8-bit T = block_scaled<...> or promoted<...>): each k-tile (128 k) is
//     summed by wgmma apart from acc and then added into it by the thread, with the block's scales (block-scaled FP8)
//     or as it is (promoted per-tensor FP8). Hopper's FP8 wgmma keeps fewer bits than fp32 in its accumulator, so
//     adding a k-block at a time bounds the error a long K would grow.
// sm_90a; NVRTC, no host headers.
#pragma once

#include "coda/hopper_pipeline.cuh"
#include "coda/numeric.cuh"
#include "coda/sm90_ops.cuh"

namespace coda {

// Named barriers (0 is __syncthreads): one over both consumer warpgroups (a cooperative tile's), one per
// consumer warpgroup (a ping-pong tile's, and each consumer's staged output chunks), and the order in which a
// promoted tile's consumers issue each block (hopper_mma_tile_promoted).
constexpr int kConsumersBarrier = 1;
__device__ __forceinline__ int warpgroup_barrier(int warpgroup) { return 1 + warpgroup; }
constexpr int kIssueOrderBarrier = 4;

namespace detail {

// The shared-window addresses of the storage's parts (32-bit, as TMA, mbarriers and wgmma descriptors take them:
// generic 64-bit pointers would cost registers). Each is the base plus a member's offset, a constant.
struct HopperSmem {
    unsigned stages, staging, full, empty, turn, visits_done, input_full, input_empty, block_scales;
    float* scratch;

    template <class Storage>
    __device__ static HopperSmem at(unsigned base, Storage* s) {
        const auto address = [&](const void* member) {
            return base + static_cast<unsigned>(static_cast<const char*>(member) - reinterpret_cast<const char*>(s));
        };
        return {address(s->stages),      address(s->staging),     address(s->full),
                address(s->empty),       address(s->turn),        address(s->visits_done),
                address(s->input_full),  address(s->input_empty), address(s->block_scales),
                s->scratch};
    }
};

template <class Tr>
__device__ __forceinline__ void clear_accumulator(float (&acc)[Tr::kM64][Tr::kBN / 2]) {
#pragma unroll
    for (int i = 0; i < Tr::kM64; ++i)
#pragma unroll
        for (int r = 0; r < Tr::kBN / 2; ++r) acc[i][r] = 0.0f;
}

// Waits until the stage at `stage` is loaded and issues its wgmmas into sum as one committed group (kFresh: the first
// one overwrites sum, a block-scaled k-block's own sum).
template <class Tr, bool kFresh = false>
__device__ __forceinline__ void hopper_issue_stage(const HopperSmem& smem, const PipelineState<Tr::kStages>& stage,
                                                   unsigned a_low, unsigned b_low,
                                                   float (&sum)[Tr::kM64][Tr::kBN / 2]) {
    sm90::mbarrier_wait(smem.full + 8 * stage.index, stage.phase);
    sm90::wgmma_fence();
    const unsigned stage_offset = static_cast<unsigned>(stage.index) * (Tr::kStageBytes >> 4);
    hopper_mma_stage<Tr, kFresh>(a_low + stage_offset, b_low + stage_offset, sum);
    sm90::wgmma_commit();
}

// One tile's mainloop on a consumer warpgroup: waits for each of the tile's k_tiles stages (from ring position
// `start`), issues their wgmmas into acc and frees each stage once the next one's are in flight.
template <class Tr, class Prefetch>
__device__ __forceinline__ void hopper_mma_tile(const HopperSmem& smem, unsigned a_low, unsigned b_low, int start,
                                                int k_tiles, int prefetch_at, float (&acc)[Tr::kM64][Tr::kBN / 2],
                                                const Prefetch& prefetch) {
    clear_accumulator<Tr>(acc);
    const bool warp_leader = threadIdx.x % 32 == 0;
    auto stage = PipelineState<Tr::kStages>::at(start);
    int previous = -1;
    for (int kt = 0; kt < k_tiles; ++kt) {
        if (kt == prefetch_at) prefetch();
        hopper_issue_stage<Tr>(smem, stage, a_low, b_low, acc);
        // The previous stage's wgmmas are done once at most this stage's group is pending: free it.
        sm90::wgmma_wait<1>();
        if (previous >= 0 && warp_leader) free_stage<Tr::kCluster>(smem.empty + 8 * previous);
        previous = stage.index;
        stage.advance();
    }
    sm90::wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < Tr::kM64; ++i) sm90::fence_registers(acc[i]);
    if (warp_leader) free_stage<Tr::kCluster>(smem.empty + 8 * previous);
}

// A stage's block scales as this thread reads them from the stage's slot (hopper_load_block_scales wrote them):
// A_scale[kb][row] of each of its row slots times B_scale[nb][kb] of each of the tile's 128-column blocks nb. Read
// once the stage's full barrier has completed, before the stage is freed.
// With B's scales per column (kBScaleRows) only A's: scale[0][row slot], B's being read column by column as each
// block is promoted (promote_block_columns), from the slot that columns() gives.
template <class Tr>
struct BlockScaleSlots {
    static constexpr int kRows = 2 * Tr::kM64;  // row slots of this thread
    static constexpr int kBlocksN = Tr::kScaleBlocksN;
    static constexpr int kScales = Tr::kBScaleRows ? 1 : kBlocksN;  // what read() gives per row slot
    unsigned slots;                             // stage 0's slot
    unsigned row_offset[kRows];                 // bytes from a slot's start to each row slot's A scale

    __device__ explicit BlockScaleSlots(unsigned block_scales) : slots(block_scales) {
#pragma unroll
        for (int rs = 0; rs < kRows; ++rs) row_offset[rs] = 4u * static_cast<unsigned>(Tr::Layout::slot_row(rs));
    }
    __device__ void read(int stage, float (&scale)[kScales][kRows]) const {
        const unsigned slot = slots + static_cast<unsigned>(stage * Tr::kScaleSlotBytes);
        float a[kRows];
#pragma unroll
        for (int rs = 0; rs < kRows; ++rs) a[rs] = sm90::load_shared_f32(slot + row_offset[rs]);
        if constexpr (Tr::kBScaleRows) {
#pragma unroll
            for (int rs = 0; rs < kRows; ++rs) scale[0][rs] = a[rs];
            return;
        }
#pragma unroll
        for (int nb = 0; nb < kScales; ++nb) {
            const float b = sm90::load_shared_f32(slot + 4u * (Tr::kBM + nb));
#pragma unroll
            for (int rs = 0; rs < kRows; ++rs) scale[nb][rs] = a[rs] * b;
        }
    }
    // kBScaleRows: the address of B_scale of this thread's first column (column slot 0) of 128-column block nb.
    __device__ unsigned columns(int stage, int nb) const {
        return slots + static_cast<unsigned>(stage * Tr::kScaleSlotBytes) +
               4u * static_cast<unsigned>(Tr::kBM + nb * kScaleBlockK + Tr::Layout::slot_col(0));
    }
};

// The columns of one 128-column block of B in a promoted tile: a k-block's sum of them, kept beside acc.
constexpr int kBlockSumColumns = kScaleBlockK;

// acc's columns of block nb += sum * scale of its row slot: element r of an m64 fragment is in row slot
// 2i + (r / 2) % 2 and column 8 (r / 4) + ... (WgmmaLayout), so block nb's are acc's elements from nb * 64 on.
template <class Tr, int nb>
__device__ __forceinline__ void promote_block(float (&acc)[Tr::kM64][Tr::kBN / 2],
                                              const float (&sum)[Tr::kM64][kBlockSumColumns / 2],
                                              const float (&scale)[2 * Tr::kM64]) {
#pragma unroll
    for (int i = 0; i < Tr::kM64; ++i)
#pragma unroll
        for (int r = 0; r < kBlockSumColumns / 2; ++r)
            acc[i][nb * kBlockSumColumns / 2 + r] = fmaf(sum[i][r], scale[2 * i + (r / 2) % 2],
                                                         acc[i][nb * kBlockSumColumns / 2 + r]);
}

// promote_block with B's scales per column (kBScaleRows): acc's columns of block nb += sum * (the A scale of its row
// slot * the B scale of its column), element r of an m64 fragment being in column slot r / 4 at column + r % 2
// (WgmmaLayout); B's are read from the stage's slot, two a column slot, at `columns` (BlockScaleSlots::columns).
// The scales' product first: multiplying the sum by B's scale first spilled at 128 x 256 (ptxas, 108-120 bytes).
template <class Tr, int nb>
__device__ __forceinline__ void promote_block_columns(float (&acc)[Tr::kM64][Tr::kBN / 2],
                                                      const float (&sum)[Tr::kM64][kBlockSumColumns / 2],
                                                      const float (&a)[2 * Tr::kM64], unsigned columns) {
#pragma unroll
    for (int j = 0; j < kBlockSumColumns / 8; ++j) {
        const float2 b = sm90::load_shared_f32x2(columns + 32u * j);
#pragma unroll
        for (int i = 0; i < Tr::kM64; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                float& out = acc[i][nb * kBlockSumColumns / 2 + 4 * j + e];
                out = fmaf(sum[i][4 * j + e], a[2 * i + e / 2] * (e % 2 ? b.y : b.x), out);
            }
    }
}

// promote_block with unit scales (promoted<...>: no block scales): acc's columns of block nb += sum.
template <class Tr, int nb>
__device__ __forceinline__ void promote_block_unscaled(float (&acc)[Tr::kM64][Tr::kBN / 2],
                                                       const float (&sum)[Tr::kM64][kBlockSumColumns / 2]) {
#pragma unroll
    for (int i = 0; i < Tr::kM64; ++i)
#pragma unroll
        for (int r = 0; r < kBlockSumColumns / 2; ++r) acc[i][nb * kBlockSumColumns / 2 + r] += sum[i][r];
}

// hopper_mma_tile for promoted FP8 (Tr::kPromoted): k-tile kt is the k-block k_begin + kt (128 k). Its wgmmas, one
// 128-column block of B at a time (a unit: the tile's BN / 128 of them per k-tile), write a sum of their own (the
// first one overwrites it); once they are done each thread adds that sum into acc's columns of the block: every
// block is promoted to fp32. Block-scaled FP8 (GemmSpec::block_scales, Tr::kBlockScaled) adds it times
// A_scale[kb][row] * B_scale[nb][kb], as DeepSeek-V3's recipe has it (with B's scales per column, kBScaleRows, the
// same loop: only the promotion and the stage's release differ); promoted per-tensor FP8 (GemmSpec::accumulation,
// T = promoted<...>) adds it as it is, and reads no scales: the same loop with unit scales. One sum of 64 registers
// serves every block of a 128 x 256 tile (beside its 128 accumulators), units taking turns. The loop is turned so that
// a unit is waited for and promoted only after the next one's stage has arrived and its scales are read (from shared
// memory: no global load in the loop), just before the next one's wgmmas are issued.
// The two consumer warpgroups of the tile issue each unit in a fixed order, consumer 0 first (a named barrier
// between consumer 0's issue and consumer 1's): the tensor cores then run consumer 0's unit before consumer 1's,
// and each one promotes its previous unit while the other's wgmmas run. Issued together, the two units' wgmmas
// interleaved, both finished at once and both promoted while the tensor cores idled. Both consumers take the
// barrier once a unit, in the same order as every other barrier of theirs.
template <class Tr, class Prefetch>
__device__ __forceinline__ void hopper_mma_tile_promoted(const HopperSmem& smem, unsigned a_low, unsigned b_low,
                                                         int start, int k_tiles, int prefetch_at, int consumer,
                                                         float (&acc)[Tr::kM64][Tr::kBN / 2],
                                                         const Prefetch& prefetch) {
    using Slots = BlockScaleSlots<Tr>;  // read only where there are scales (Tr::kBlockScaled)
    constexpr int kRows = Slots::kRows, kScales = Slots::kScales, kBlocksN = Tr::kBN / kBlockSumColumns;
    clear_accumulator<Tr>(acc);
    const bool warp_leader = threadIdx.x % 32 == 0;
    const Slots slots(smem.block_scales);
    float sum[Tr::kM64][kBlockSumColumns / 2];
    float scale[kScales][kRows];  // the stage in flight's
    auto stage = PipelineState<Tr::kStages>::at(start);
    // Unit nb of the current stage: B's rows from nb * 128 on (K-major: 128 bytes a row).
    const auto issue = [&](int nb) {
        if (consumer == 1) sm90::named_barrier_sync(kIssueOrderBarrier, 2 * kWarpgroupThreads);
        sm90::wgmma_fence();
        const unsigned stage_offset = static_cast<unsigned>(stage.index) * (Tr::kStageBytes >> 4);
        const unsigned block_offset = HopperOperand<true>::offset(nb * kBlockSumColumns, 0);
        hopper_mma_stage<Tr, true, kBlockSumColumns>(a_low + stage_offset, b_low + stage_offset + block_offset, sum);
        sm90::wgmma_commit();
        if (consumer == 0) sm90::named_barrier_sync(kIssueOrderBarrier, 2 * kWarpgroupThreads);
    };
    const auto wait_sum = [&] {
        sm90::wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < Tr::kM64; ++i) sm90::fence_registers(sum[i]);
    };
    // The stage's other units, each after promoting the one before it.
    const auto issue_rest = [&] {
        if constexpr (kBlocksN == 2) {
            wait_sum();
            if constexpr (!Tr::kBlockScaled)
                promote_block_unscaled<Tr, 0>(acc, sum);
            else if constexpr (Tr::kBScaleRows)
                promote_block_columns<Tr, 0>(acc, sum, scale[0], slots.columns(stage.index, 0));
            else
                promote_block<Tr, 0>(acc, sum, scale[0]);
            issue(1);
        }
    };
    // The last unit of stage `done` (its wgmmas waited for), promoted, and the stage freed. B's scales per column
    // come from the stage's slot: read (by every lane of the warp) before the warp frees it.
    const auto finish_stage = [&](int done) {
        if constexpr (Tr::kBScaleRows) {
            promote_block_columns<Tr, kBlocksN - 1>(acc, sum, scale[0], slots.columns(done, kBlocksN - 1));
            __syncwarp();
            if (warp_leader) free_stage<Tr::kCluster>(smem.empty + 8 * done);
        } else {
            if (warp_leader) free_stage<Tr::kCluster>(smem.empty + 8 * done);
            if constexpr (Tr::kBlockScaled)
                promote_block<Tr, kBlocksN - 1>(acc, sum, scale[kBlocksN - 1]);
            else
                promote_block_unscaled<Tr, kBlocksN - 1>(acc, sum);
        }
    };
    static_assert(kBlocksN == 1 || kBlocksN == 2, "coda: a promoted tile has one or two 128-column blocks");
    if (prefetch_at == 0) prefetch();
    sm90::mbarrier_wait(smem.full + 8 * stage.index, stage.phase);
    if constexpr (Tr::kBlockScaled) slots.read(stage.index, scale);
    issue(0);
    issue_rest();
    int previous = stage.index;
    stage.advance();
    for (int kt = 1; kt < k_tiles; ++kt) {
        if (kt == prefetch_at) prefetch();
        sm90::mbarrier_wait(smem.full + 8 * stage.index, stage.phase);
        float next[kScales][kRows];
        if constexpr (Tr::kBlockScaled) slots.read(stage.index, next);
        wait_sum();
        finish_stage(previous);
        if constexpr (Tr::kBlockScaled) {
#pragma unroll
            for (int nb = 0; nb < kScales; ++nb)
#pragma unroll
                for (int rs = 0; rs < kRows; ++rs) scale[nb][rs] = next[nb][rs];
        }
        issue(0);
        issue_rest();
        previous = stage.index;
        stage.advance();
    }
    wait_sum();
    finish_stage(previous);
}

}  // namespace detail
}  // namespace coda
