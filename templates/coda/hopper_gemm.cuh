// Hopper GEMM mainloop for sm_90a: TMA loads into 128-byte-swizzled shared memory through an mbarrier
// pipeline, wgmma with fp32 accumulators in registers, one producer warp and two consumer warpgroups, and a
// persistent tile scheduler. The output tile is handed, still in registers, to the generated epilogue
// (epilogue_contract.cuh) exactly as on the portable path.
//
// Contract:
//   - Computes acc = A * B in fp32 for 16-bit T (bf16 or f16), or 8-bit T (e4m3, e5m2, or fp8_operands<A, B> for
//     two of them; block_scaled<...> and promoted<...> of these add each 128-k block into acc on its own) with A and
//     B both K-major (wgmma reads no other 8-bit layout); A and B as stored are described
//     by the GemmProblem (as in portable_gemm.cuh) and by two tensor maps the host encodes (cuTensorMapEncodeTiled,
//     128-byte swizzle, zero fill out of bounds), 2-D with the stored rows' contiguous dimension innermost:
//       A K-major: dims {K, M}, box {64, BM / Cn}  A M-major: dims {M, K}, box {64, 64}
//       B K-major: dims {K, N}, box {64, BN / Cm}  B N-major: dims {N, K}, box {64, 64}
//     (Cm x Cn: the cluster's CTAs along M and N, at most 2 in all.)
//     TMA needs the base 16-byte aligned and the leading dimension a multiple of 8 elements (16 bytes): the
//     host checks both. Any M, N, K >= 1 (N even): edges are zero-filled by TMA and masked in the epilogue.
//   - Launch: grid = min(tiles, CTAs that fit on the GPU) (persistent: CTA b owns tiles b, b + grid, ...: tile_order.cuh),
//     block = kThreads (384), dynamic shared memory = kSmemBytes (the host raises the per-kernel limit).
//     hopper_gemm_pair runs clusters of 2 CTAs (__cluster_dims__), along M (sharing B) or along N (sharing A):
//     the grid is whole clusters, at most as many as fit at once, and each cluster walks units of two M-tiles of
//     one N-tile or two N-tiles of one M-tile (TileOrder).
//   - Roles: warpgroup 0 produces (one thread issues the operands' TMA copies, another the tile inputs', and for
//     block-scaled FP8 a warp copies each stage's block scales beside it; it gives registers away:
//     hopper_pipeline.cuh), warpgroups 1 and 2 consume (hopper_consume below, each tile's mainloop,
//     hopper_mma_tile.cuh: fast, or promoted a 128-k block at a time for 8-bit T = block_scaled<...> or promoted<...>;
//     then its epilogue: hopper_epilogue.cuh). Cooperative: both consume every stage and share one BM x BN tile, rows
//     split in halves. Ping-pong: they own alternate tiles; an order barrier makes their mainloops take turns,
//     so one's epilogue overlaps the other's mainloop.
//   - Tile outputs are staged in shared memory a column chunk at a time and written out in whole 16-byte units;
//     tile inputs (residual, saved activations) are loaded by TMA, chunk by chunk, into a ring of buffers by a
//     loader thread of warpgroup 0 ahead of the visits (hopper_staging.cuh), where shared memory allows. The
//     host passes one tensor map per tile input (TileMaps, after the operands' maps). Shared memory is laid out
//     by HopperSharedStorage; every ring of mbarriers is walked with a PipelineState.
//   - Epilogue: per tile, the tile's consumer threads call begin_tile, visit for each (row_slot, col_slot)
//     inside [M] x [N], and end_tile with a scratch area of their own (the pipeline keeps running). Layout is
//     WgmmaLayout below; its sync() is a named barrier over exactly those threads.
#pragma once

#include "coda/epilogue_contract.cuh"
#include "coda/hopper_epilogue.cuh"
#include "coda/hopper_mma_tile.cuh"
#include "coda/hopper_pipeline.cuh"
#include "coda/hopper_rules.cuh"
#include "coda/hopper_staging.cuh"
#include "coda/numeric.cuh"
#include "coda/reduce.cuh"
#include "coda/sm90_ops.cuh"

namespace coda {

// The wgmma accumulator layout of a BM x BN tile owned by kGroups consumer warpgroups, each holding kWgM rows
// as kWgM / 64 blocks of m64. In block i, warp w of a warpgroup holds rows 16w + lane/4 (+ 8) and, for each n8
// chunk j, columns 8j + 2 (lane % 4) + {0, 1}: the same as mma.sync's per-warp layout.
template <int BM, int BN, int kWgM, int kGroups>
struct WgmmaLayout {
    static constexpr int kBM = BM;
    static constexpr int kBN = BN;
    static constexpr int kThreads = kWarpgroupThreads * kGroups;
    static constexpr int kM64 = kWgM / 64;
    static constexpr int kRowSlots = 2 * kM64;
    static constexpr int kColSlots = BN / 8;
    static constexpr int kRowSharers = 4;              // a row lives in one quad of one warp
    static constexpr int kColSharers = 32 * kGroups;   // 8 quads x 4 warps x kGroups
    static_assert(kWgM * kGroups == BM, "coda: the consumer warpgroups must cover BM rows");

    // Cooperative (kGroups = 2): both consumer warpgroups, threads 128..383. Ping-pong: the calling one.
    __device__ static int thread_index() {
        return kGroups == 2 ? static_cast<int>(threadIdx.x) - kWarpgroupThreads
                            : static_cast<int>(threadIdx.x) % kWarpgroupThreads;
    }
    __device__ static int group() { return thread_index() / kWarpgroupThreads; }
    __device__ static int warp() { return (thread_index() / 32) % 4; }
    __device__ static int lane() { return static_cast<int>(threadIdx.x) % 32; }
    // Row slot 2i + h is row lane/4 + 8h of warp w's 16 rows in m64 block i (of the thread's warpgroup's rows).
    __device__ static int group_row(int row_slot) {
        return (row_slot / 2) * 64 + warp() * 16 + (row_slot % 2) * 8 + lane() / 4;
    }
    __device__ static int slot_row(int row_slot) { return group() * kWgM + group_row(row_slot); }
    __device__ static int slot_col(int col_slot) { return col_slot * 8 + 2 * (lane() % 4); }
    // A column slot's column within its chunk of kSlots column slots (the staged tiles', hopper_staging.cuh).
    template <int kSlots>
    __device__ static int chunk_col(int col_slot) { return (col_slot % kSlots) * 8 + 2 * (lane() % 4); }
    __device__ static int row_sharer() { return lane() % 4; }
    __device__ static int col_sharer() { return (group() * 4 + warp()) * 8 + lane() / 4; }
    // reduce_group's values of every row slot and group, combined over the row's quad (no shared memory).
    template <RedOp Op, int kRows, int kGroupsPerTile>
    __device__ static void combine_groups(float (&g)[kRows][kGroupsPerTile], float*) {
#pragma unroll
        for (int i = 0; i < kRows; ++i)
#pragma unroll
            for (int j = 0; j < kGroupsPerTile; ++j) g[i][j] = combine_lanes<Op, 4>(g[i][j]);
    }
    // Over both consumer warpgroups (cooperative), or the calling one (ping-pong).
    __device__ static void sync() {
        if (kGroups == 2)
            sm90::named_barrier_sync(kConsumersBarrier, 2 * kWarpgroupThreads);
        else
            sm90::named_barrier_sync(warpgroup_barrier(static_cast<int>(threadIdx.x) / kWarpgroupThreads),
                                     kWarpgroupThreads);
    }
};

// The CTA's dynamic shared memory, from its first swizzle atom on. The stages and the staging buffers are
// multiples of kSwizzleAtomBytes, so every TMA box and wgmma operand in them starts on an atom.
template <int kStages, int kStageBytes, int kStagingBytes, int kScratchBytes, int kScaleBytes>
struct HopperSharedStorage {
    unsigned char stages[kStages][kStageBytes];  // each: A (BM x BK) then B (BN x BK), as TMA swizzled them
    unsigned char staging[kStagingBytes];        // the tile-input ring, then each consumer's output buffers
    float scratch[kScratchBytes / 4];            // end_tile's: one area per ping-pong consumer
    unsigned long long full[kStages];            // stage loaded: the TMA's bytes (and block scales) have arrived
    unsigned long long empty[kStages];           // stage read by every consumer warp (of every CTA of the cluster)
    unsigned long long turn[2];                  // ping-pong: consumer c finished a tile's mainloop
    unsigned long long visits_done[2];           // ping-pong with staged inputs: consumer c finished a tile's visits
    unsigned long long input_full[kHopperInputSlots];   // input chunk loaded
    unsigned long long input_empty[kHopperInputSlots];  // input chunk read by every warp that visits it
    float block_scales[kScaleBytes / 4];                // block-scaled FP8: one slot of scales per stage
};

template <class T, bool A_K_MAJOR, bool B_K_MAJOR, int BM, int BN, int STAGES, bool PING_PONG, int CLUSTER_M,
          int CLUSTER_N, class EPILOGUE, bool DIRECT_TILES = false>
struct HopperGemmTraits {
    using Element = T;
    using Epilogue = EPILOGUE;
    // Promoted FP8 (T = block_scaled<...> or promoted<...>): each k-tile's sum is added into acc on its own
    // (hopper_mma_tile_promoted). Block-scaled FP8 (T = block_scaled<...>) times it by the block's scales, which a
    // loader warp brings into each stage beside the operands; promoted<...> adds it as it is and has neither.
    static constexpr bool kPromoted = detail::PromotesKBlocks<T>::value;
    static constexpr bool kBlockScaled = detail::BlockScaled<T>::value;
    static constexpr bool kBScaleRows = detail::BlockScaled<T>::b_rows;  // B's scales per row of B (one per column)
    static constexpr bool kAKMajor = A_K_MAJOR;
    static constexpr bool kBKMajor = B_K_MAJOR;
    static constexpr bool kPingPong = PING_PONG;
    static constexpr int kBM = BM;
    static constexpr int kBN = BN;
    // A k-tile is one 128-byte swizzle row of each operand: 64 elements of a 16-bit type, 128 of an 8-bit one.
    static constexpr int BK = kHopperBK * 2 / static_cast<int>(sizeof(T));
    // CTAs of a cluster along M and N (2 at most in all). A pair along M works on two M-tiles of one N-tile: each
    // CTA loads half of the B tile and multicasts it to both (K-major B: a box of BN / 2 rows; N-major: alternate
    // 64-column boxes). A pair along N shares A the same way.
    static constexpr int kClusterM = CLUSTER_M;
    static constexpr int kClusterN = CLUSTER_N;
    static constexpr int kCluster = CLUSTER_M * CLUSTER_N;
    static constexpr bool kStreamK = hopper_rules::stream_k(CLUSTER_M, CLUSTER_N, BM, PING_PONG);
    static constexpr int kABoxRows = kAKMajor ? BM / CLUSTER_N : 64;
    static constexpr int kBBoxRows = kBKMajor ? BN / CLUSTER_M : 64;
    static constexpr int kConsumers = 2;
    static constexpr int kThreads = kWarpgroupThreads * (1 + kConsumers);
    static constexpr int kWgM = kPingPong ? BM : BM / 2;  // rows of one consumer warpgroup's accumulator
    using Layout = WgmmaLayout<BM, BN, kWgM, kPingPong ? 1 : 2>;
    static constexpr int kM64 = Layout::kM64;
    static constexpr int kABytes = BM * BK * static_cast<int>(sizeof(T));
    static constexpr int kBBytes = BN * BK * static_cast<int>(sizeof(T));
    static constexpr int kStageBytes = kABytes + kBBytes;
    // Each ping-pong consumer reduces its own tile, so each has its own scratch.
    static constexpr int kScratchPerTile = (Epilogue::template scratch_floats<Layout>() * 4 + 15) / 16 * 16;
    static constexpr int kScratchBytes = kScratchPerTile * (kPingPong ? 2 : 1);
    // HopperSharedStorage's regions: none is empty (a C++ array is not), so an unused one takes kMinRegionBytes.
    static constexpr int kMinRegionBytes = 16;
    static constexpr int kScratchRegionBytes = kScratchBytes > kMinRegionBytes ? kScratchBytes : kMinRegionBytes;
    static constexpr int kAlignSlack = kSwizzleAtomBytes;  // the dynamic shared memory's base, aligned up to an atom
    static constexpr int kBarrierBytes = 8 * (2 * STAGES + 4 + 2 * kHopperInputSlots);
    // Block-scaled FP8: each stage has a slot of its block's scales beside it (hopper_load_block_scales): A's of the
    // tile's BM rows, then B's of its kScaleBlocksN 128-column blocks, padded to 16 bytes, or (kBScaleRows) B's of
    // its BN columns. (Other kernels keep the region's kMinRegionBytes, counted here.)
    static constexpr int kScaleBlocksN = kBlockScaled ? BN / kScaleBlockK : 1;
    static constexpr int kScaleSlotBytes = !kBlockScaled ? 0 : kBScaleRows ? 4 * (BM + BN) : 4 * (BM + 4);
    static constexpr int kFixedBytes = kAlignSlack + kScratchRegionBytes + kBarrierBytes + kMinRegionBytes;
    // Pipeline stages that fit beside `staging` bytes of staged tiles.
    static constexpr int stages_beside(int staging) {
        return (kHopperMaxSmemBytes - kFixedBytes - staging) / (kStageBytes + kScaleSlotBytes);
    }
    // Staged tile outputs (hopper_staging.cuh): one column chunk of each consumer warpgroup's rows. Tile inputs:
    // a ring of kHopperInputSlots chunks of BM rows. Each only where it leaves enough stages.
    static constexpr int kStateRegisters = static_cast<int>(sizeof(typename Epilogue::template State<Layout>) / 4);
    static constexpr bool kRoomToStage =
        kM64 * BN / 2 + kStateRegisters + kHopperStagingRegisters <= kHopperConsumerRegisters;
    static constexpr int kChunkColumns = 8 * kHopperChunkSlots;
    static constexpr int kChunks = BN / kChunkColumns;
    using StagedIn = TmaTileInputs<Epilogue, Layout, BM, kChunkColumns>;
    using StagedOut = StagedTileOutputs<Epilogue, Layout, kWgM, kHopperChunkSlots>;
    // Swizzled TMA boxes start on swizzle atoms: so do the output buffers (after the input ring).
    static constexpr int kStagedOutPerGroup = (StagedOut::kBytes + kSwizzleAtomBytes - 1) / kSwizzleAtomBytes * kSwizzleAtomBytes;
    // DIRECT_TILES: no staging; the visits read and write tile tensors in global memory. The host runs this variant
    // for launches whose tile tensors break the staging rule: a staging kernel carries no direct path, whose second
    // copy of the visits doubled NVRTC's time.
    static constexpr bool kDirectTiles = DIRECT_TILES;
    // Transposed outputs (store_transposed sinks) stage with the others, one tensor map each; only on tiles of 64
    // accumulators a thread: their stores amid the staged fragments of a 128-accumulator tile spilled (ptxas, 32-72
    // bytes, when they went to global memory).
    static constexpr bool kStageBesideTransposed = Epilogue::kTransposedStores == 0 || kM64 * BN / 2 <= 64;
    static constexpr bool kStageOutputs =
        !DIRECT_TILES && kRoomToStage && StagedOut::kMaps > 0 && StagedOut::kMaps <= kHopperMaxTileMaps &&
        kStageBesideTransposed && stages_beside(2 * kStagedOutPerGroup) >= kHopperMinStagesOutputs;
    static constexpr int kOneOutputBufferBytes = kStageOutputs ? 2 * kStagedOutPerGroup : 0;  // both consumers
    // The input ring comes first after the stages, so its chunk buffers keep the stages' 1024-byte alignment.
    static constexpr int kInputSlotBytes = (StagedIn::kBytes + kSwizzleAtomBytes - 1) / kSwizzleAtomBytes * kSwizzleAtomBytes;
    static constexpr int kInputRingBytes = kHopperInputSlots * kInputSlotBytes;
    static constexpr bool kStageInputs =
        !DIRECT_TILES && kRoomToStage && Epilogue::kTileInputs > 0 &&
        Epilogue::kTileInputs + (kStageOutputs ? StagedOut::kMaps : 0) <= kHopperMaxTileMaps &&
        stages_beside(kOneOutputBufferBytes + kInputRingBytes) >= kHopperMinStagesInputs;
    static constexpr int kInputBytes = kStageInputs ? kInputRingBytes : 0;
    static constexpr bool kStagedTiles = kStageInputs || kStageOutputs;  // the visits go through shared memory
    // The visits run on every column pair of their tiles, past N too, without a bounds branch each (five or six
    // instructions a pair: about a third of a light epilogue's): where no visit reads or writes global memory,
    // column inputs aside (read at a clamped column). So every tile tensor is staged, or there is none, and no sink
    // accumulates. Each row reduction then takes a select an element (add_in_columns): with the LM head's two that
    // about evens out with the branches it saves (SASS instruction counts), so at most two.
    static constexpr bool kVisitsBeyondN = (Epilogue::kTileInputs == 0 || kStageInputs) &&
                                           (Epilogue::kTileOutputs == 0 || kStageOutputs) && !Epilogue::kAccumulates &&
                                           Epilogue::kRowReductions <= 2;
    // A second output buffer per consumer lets one chunk's TMA store read a buffer while the visits write the
    // next chunk into the other. Taken only where it costs no pipeline stage.
    static constexpr int kStagesOneBuffer = stages_beside(kInputBytes + kOneOutputBufferBytes);
    static constexpr int kOutputBuffers =
        kStageOutputs && stages_beside(kInputBytes + 2 * kOneOutputBufferBytes) >=
                             (STAGES < kStagesOneBuffer ? STAGES : kStagesOneBuffer)
            ? 2
            : 1;
    static constexpr int kOutputBytes = kOutputBuffers * kOneOutputBufferBytes;
    // Tensor maps the kernel takes (TileMaps): its staged tile inputs', then its staged outputs' (at least one,
    // unused without staging).
    static constexpr int kInputMaps = kStageInputs ? Epilogue::kTileInputs : 0;
    static constexpr int kOutputMaps = kStageOutputs ? StagedOut::kMaps : 0;  // tile outputs', then transposed ones
    static constexpr int kTileMaps = kInputMaps + kOutputMaps > 0 ? kInputMaps + kOutputMaps : 1;
    static constexpr int kStagingBytes = kInputBytes + kOutputBytes;
    static constexpr int kStagingRegionBytes = kStagingBytes > kMinRegionBytes ? kStagingBytes : kMinRegionBytes;
    static constexpr int kFitStages = stages_beside(kStagingRegionBytes);
    // Fewer stages than asked when the epilogue's scratch and staged tiles need the room.
    static constexpr int kStages = STAGES < kFitStages ? STAGES : kFitStages;
    // Visits whose inputs are loaded together: as many as kHopperBatchRegisters hold (1 to 8, a power of two,
    // so that it divides BN / 8). More would cost the accumulators registers. A visit's row and column values
    // count too: where they are not kept across visits, a batch holds them (hopper_epilogue.cuh).
    static constexpr int kInputRegisters = static_cast<int>(
        (sizeof(typename Epilogue::Inputs) + sizeof(typename Epilogue::RowValues) + sizeof(typename Epilogue::ColValues)) / 4);
    static constexpr int kVisitBatch = kInputRegisters * 8 <= kHopperBatchRegisters   ? 8
                                       : kInputRegisters * 4 <= kHopperBatchRegisters ? 4
                                       : kInputRegisters * 2 <= kHopperBatchRegisters ? 2
                                                                                      : 1;
    // Arrivals that free an input chunk: lane 0 of every warp that reads it. A stage is free once those of every
    // CTA of the cluster have arrived (its producer's multicast writes into all of them).
    static constexpr int kEmptyArrivals = kWarpgroupThreads / 32 * (kPingPong ? 1 : kConsumers);
    static constexpr int kStageFreeArrivals = kEmptyArrivals * kCluster;

    // A stage is loaded once the operand producer's arrival (with the TMA bytes) and, block-scaled, the block-scale
    // loader's (one a lane, once its copies are done) are in.
    static constexpr int kFullArrivals = 1 + (kBlockScaled ? 32 : 0);
    static constexpr int kScaleRegionBytes = kBlockScaled ? kStages * kScaleSlotBytes : kMinRegionBytes;
    using Storage =
        HopperSharedStorage<kStages, kStageBytes, kStagingRegionBytes, kScratchRegionBytes, kScaleRegionBytes>;
    static constexpr int kSmemBytes = kAlignSlack + static_cast<int>(sizeof(Storage));

    // What the kernel reports to the host (coda_kernel_info): the tile, the stages left beside the epilogue's shared
    // memory, and how its staged tile tensors travel as tensor maps.
    __host__ __device__ static constexpr KernelInfo info() {
        return KernelInfo(KernelKind::HopperGemm, kThreads, kSmemBytes, BM, BN, CLUSTER_M, CLUSTER_N, kStages,
                          TmaTileInfo{kTileMaps, kStageInputs ? 1 : 0, kChunkColumns, BM,
                                      kStageOutputs ? Epilogue::kTileOutputs : 0, kWgM,
                                      kStageOutputs ? Epilogue::kTransposedStores : 0});
    }

    static_assert(sizeof(T) == 2 || (sizeof(T) == 1 && A_K_MAJOR && B_K_MAJOR),
                  "coda: hopper_gemm takes 16-bit inputs (coda::bf16, coda::f16) or K-major 8-bit ones (coda::e4m3, "
                  "coda::e5m2, coda::fp8_operands)");
    // The host checks the same rules first (src/mainloop/hopper.cpp) and says which one a config breaks.
    static_assert(hopper_rules::check(BM, BN, STAGES, kPingPong, CLUSTER_M, CLUSTER_N, kAKMajor, kBKMajor) ==
                      hopper_rules::Rule::Ok,
                  "coda: this tile config breaks a rule of hopper_rules.cuh");
    static_assert(!kPromoted || (hopper_rules::block_scaled_tile(BM, PING_PONG) && BK == kScaleBlockK),
                  "coda: promoted FP8 (block-scaled or not) takes cooperative 128 x 128 or 128 x 256 tiles");
    static_assert(kChunks % kOutputBuffers == 0, "coda: each tile's first chunk must take the first output buffer");
    static_assert(kStages >= 2, "coda: the epilogue's scratch leaves room for fewer than 2 pipeline stages");
    static_assert(kSmemBytes <= kHopperMaxSmemBytes, "coda: the shared storage exceeds the budget it was fitted to");
};

namespace detail {

// The mbarriers' arrival counts, set once by thread 0 before any role starts.
template <class Tr>
__device__ __forceinline__ void hopper_init_barriers(const HopperSmem& smem) {
    for (int s = 0; s < Tr::kStages; ++s) {
        sm90::mbarrier_init(smem.full + 8 * s, Tr::kFullArrivals);
        sm90::mbarrier_init(smem.empty + 8 * s, Tr::kStageFreeArrivals);
    }
    for (int c = 0; c < Tr::kConsumers; ++c) {
        sm90::mbarrier_init(smem.turn + 8 * c, 1);
        sm90::mbarrier_init(smem.visits_done + 8 * c, kWarpgroupThreads / 32);  // lane 0 of each warp of consumer c
    }
    for (int s = 0; s < kHopperInputSlots; ++s) {
        sm90::mbarrier_init(smem.input_full + 8 * s, 1);
        sm90::mbarrier_init(smem.input_empty + 8 * s, Tr::kEmptyArrivals);
    }
    sm90::fence_barrier_init();
}

// Stream-K's hand-over of a tile's partial sum (TileOrder): the Tail's consumer warpgroup stores its accumulator
// fragment to its CTA's slot of problem.partials and raises its flag; the Head's warpgroup with the same rows
// waits for the flag, adds the fragment to its own and lowers the flag again for the next launch. Each thread
// moves its own registers, 4 at a time, in the order every thread of the warpgroup shares (coalesced). The slot
// holds kGroups fragments, one per consumer warpgroup of a tile (cooperative: 2).
template <class Tr>
__device__ __forceinline__ float* partial_fragment(const GemmProblem& problem, int slot, int consumer) {
    constexpr int kGroups = Tr::kPingPong ? 1 : Tr::kConsumers;
    constexpr int kFloats = Tr::kM64 * Tr::kBN / 2 * kWarpgroupThreads;  // one warpgroup's accumulator
    const int group = Tr::kPingPong ? 0 : consumer;
    return problem.partials + (static_cast<long long>(slot) * kGroups + group) * kFloats +
           4 * (static_cast<int>(threadIdx.x) % kWarpgroupThreads);
}
template <class Tr>
__device__ __forceinline__ unsigned* partial_flag(const GemmProblem& problem, int slot, int consumer) {
    return problem.partial_flags + slot * Tr::kConsumers + (Tr::kPingPong ? 0 : consumer);
}

template <class Tr>
__device__ __forceinline__ void publish_partial(const GemmProblem& problem, int slot, int consumer,
                                                const float (&acc)[Tr::kM64][Tr::kBN / 2], int barrier) {
    float* const out = partial_fragment<Tr>(problem, slot, consumer);
#pragma unroll
    for (int i = 0; i < Tr::kM64; ++i)
#pragma unroll
        for (int r = 0; r < Tr::kBN / 2; r += 4)
            sm90::store_global_cg(out + (i * Tr::kBN / 2 + r) * kWarpgroupThreads, acc[i][r], acc[i][r + 1],
                                  acc[i][r + 2], acc[i][r + 3]);
    __threadfence();  // this thread's partials, before the flag that the leader raises after the barrier
    sm90::named_barrier_sync(barrier, kWarpgroupThreads);
    if (threadIdx.x % kWarpgroupThreads == 0) sm90::store_release_gpu(partial_flag<Tr>(problem, slot, consumer), 1u);
}

template <class Tr>
__device__ __forceinline__ void add_partial(const GemmProblem& problem, int slot, int consumer,
                                            float (&acc)[Tr::kM64][Tr::kBN / 2], int barrier) {
    if (threadIdx.x % kWarpgroupThreads == 0) {
        unsigned* const flag = partial_flag<Tr>(problem, slot, consumer);
        while (sm90::load_acquire_gpu(flag) != 1u) {
        }
        // Nothing else in this launch writes this slot again; the next launch's Tail raises the flag anew.
        *reinterpret_cast<volatile unsigned*>(flag) = 0u;
    }
    sm90::named_barrier_sync(barrier, kWarpgroupThreads);
    const float* const in = partial_fragment<Tr>(problem, slot, consumer);
#pragma unroll
    for (int i = 0; i < Tr::kM64; ++i)
#pragma unroll
        for (int r = 0; r < Tr::kBN / 2; r += 4) {
            const float4 v = sm90::load_global_cg(in + (i * Tr::kBN / 2 + r) * kWarpgroupThreads);
            acc[i][r] += v.x;
            acc[i][r + 1] += v.y;
            acc[i][r + 2] += v.z;
            acc[i][r + 3] += v.w;
        }
}

// A consumer warpgroup (1 or 2): its CTA's items in order (cooperative: every item, its half of the rows;
// ping-pong: every other item), each one's mainloop, then its epilogue: the visits and end_tile; a stream-K Tail
// publishes its partial sum instead, and a Head adds its Tail's before its epilogue.
template <class Tr, int kTileMaps>
__device__ __forceinline__ void hopper_consume(const GemmProblem& problem, const typename Tr::Epilogue::Args& args,
                                               const TileMaps<kTileMaps>& tile_maps, const HopperSmem& smem,
                                               const TileOrder<Tr::kClusterM, Tr::kClusterN, Tr::kStreamK>& order,
                                               int rank, int warpgroup) {
    using L = typename Tr::Layout;
    using Epilogue = typename Tr::Epilogue;
    constexpr int BM = Tr::kBM, BN = Tr::kBN;
    constexpr bool stage_inputs = Tr::kStageInputs;
    const int consumer = warpgroup - 1;
    const bool warp_leader = threadIdx.x % 32 == 0;
    const bool warpgroup_leader = threadIdx.x % kWarpgroupThreads == 0;
    // Rows of the tile this warpgroup multiplies: its half (cooperative) or all of them (ping-pong).
    const int first_row = Tr::kPingPong ? 0 : consumer * Tr::kWgM;
    // Low descriptor halves of stage 0's operands; a stage adds its offset (hopper_mma_stage).
    const unsigned a_low =
        HopperOperand<Tr::kAKMajor>::low(smem.stages) + HopperOperand<Tr::kAKMajor>::offset(first_row, 0);
    const unsigned b_low = HopperOperand<Tr::kBKMajor>::low(smem.stages + Tr::kABytes);
    float* const scratch = smem.scratch + (Tr::kPingPong ? consumer * Tr::kScratchPerTile / 4 : 0);
    // (The staging views are rebuilt per tile from these: nothing extra stays live across the mainloop.)
    const unsigned out_buffer =
        smem.staging + Tr::kInputBytes + consumer * Tr::kOutputBuffers * Tr::kStagedOutPerGroup;
    const int staging_barrier = warpgroup_barrier(warpgroup);  // not kConsumersBarrier, the cooperative tile's
    // One thread per tile asks L2 for the tile's input chunks ahead of the loader (cooperative: warpgroup 1's).
    const bool prefetcher = warpgroup_leader && (Tr::kPingPong || consumer == 0);

    if (Tr::kStageOutputs && warpgroup_leader)
        for (int i = 0; i < Tr::kOutputMaps; ++i) sm90::prefetch_tma_descriptor(&tile_maps.map[Tr::kInputMaps + i]);

    float acc[Tr::kM64][BN / 2];
    // One of this CTA's items (a tile or a piece of one), its `local`-th.
    const auto consume = [&](int local, const WorkItem& w) {
        const int tm = w.tm, tn = w.tn;
        // Ping-pong: wait until the other consumer has finished the previous item's mainloop. Besides taking
        // turns on the tensor cores, this keeps each consumer within one phase of the stages it waits on.
        if (Tr::kPingPong && local > 0)
            sm90::mbarrier_wait(smem.turn + 8 * (1 - consumer), parity_of_use((local - 1) / 2));
        // The tile's inputs are asked of L2 kHopperPrefetchLead k-tiles before its epilogue.
        const auto prefetch = [&] {
            // (With staged inputs, tile tensors read at the visit, i.e. accumulates, go without this hint.)
            if constexpr (!Tr::kStageInputs) {
                hopper_prefetch_epilogue<L, BM, BN, Epilogue>(args, problem, tm, tn);
            } else if (prefetcher && order.valid(tm, tn)) {
                for (int n0 = tn * BN; n0 < tn * BN + BN && n0 < problem.n; n0 += Tr::kChunkColumns)
                    Tr::StagedIn::prefetch(tile_maps.map, tm * BM, n0);
            }
        };
        // (A Tail has no epilogue to prefetch for.)
        const int prefetch_at = w.piece == Piece::Tail           ? -1
                                : w.k_tiles > kHopperPrefetchLead ? w.k_tiles - kHopperPrefetchLead
                                                                  : 0;
        if constexpr (Tr::kPromoted)
            hopper_mma_tile_promoted<Tr>(smem, a_low, b_low, w.position, w.k_tiles, prefetch_at, consumer, acc,
                                             prefetch);
        else
            hopper_mma_tile<Tr>(smem, a_low, b_low, w.position, w.k_tiles, prefetch_at, acc, prefetch);
        if (Tr::kPingPong && warpgroup_leader) sm90::mbarrier_arrive(smem.turn + 8 * consumer);

        if (w.piece == Piece::Tail) {
            publish_partial<Tr>(problem, order.partial_slot(w.piece), consumer, acc, staging_barrier);
            // The other consumer's next visits wait for this item's, which are none.
            if (Tr::kPingPong && stage_inputs) {
                if (local > 0)
                    sm90::mbarrier_wait(smem.visits_done + 8 * (1 - consumer), parity_of_use((local - 1) / 2));
                if (warp_leader) sm90::mbarrier_arrive(smem.visits_done + 8 * consumer);
            }
            return;
        }
        if (w.piece == Piece::Head) add_partial<Tr>(problem, order.partial_slot(w.piece), consumer, acc, staging_barrier);

        const InputRing ring{smem.staging, smem.input_full, smem.input_empty, w.visit_index * Tr::kChunks};
        typename Epilogue::template State<L> st;
        Epilogue::template begin_tile<L>(st);
        // One instantiation of the visits: a staging kernel's or a direct one's (Tr::kDirectTiles), never both.
        if constexpr (Tr::kStagedTiles) {
            if (Tr::kPingPong && stage_inputs && local > 0)
                sm90::mbarrier_wait(smem.visits_done + 8 * (1 - consumer), parity_of_use((local - 1) / 2));
            HopperTiles<typename Pick<Tr::kStageInputs, typename Tr::StagedIn, GlobalTiles>::type,
                        typename Pick<Tr::kStageOutputs, typename Tr::StagedOut, GlobalTiles>::type, Tr::kVisitsBeyondN>
                tiles{};
            if constexpr (Tr::kStageInputs) tiles.in = typename Tr::StagedIn{{smem.staging, tm * BM, 0}};
            if constexpr (Tr::kStageOutputs) tiles.out = typename Tr::StagedOut{{out_buffer, tm * BM + first_row, 0}};
            hopper_visit_tile<Tr, L, Epilogue, BN>(args, problem, st, tiles, tm * BM, tn * BN, acc, staging_barrier,
                                                   ring, tile_maps.map + Tr::kInputMaps);
            if (Tr::kPingPong && stage_inputs && warp_leader) sm90::mbarrier_arrive(smem.visits_done + 8 * consumer);
        } else {
            HopperTiles<GlobalTiles, GlobalTiles, Tr::kVisitsBeyondN> tiles{};
            hopper_visit_tile<Tr, L, Epilogue, BN>(args, problem, st, tiles, tm * BM, tn * BN, acc, staging_barrier,
                                                   ring, tile_maps.map + Tr::kInputMaps);
        }
        // (A tile beyond M or N visited nothing; it has no partials to write.)
        if (order.valid(tm, tn)) Epilogue::template end_tile<L>(args, st, scratch, TileCoord{tm, tn, problem.m, problem.n});
    };
    for (int local = 0; local < order.count; ++local) {
        if (Tr::kPingPong && local % 2 != consumer) continue;
        consume(local, order.item(local, rank));
    }
    // The last TMA stores must be done before the CTA's shared memory goes away.
    if (Tr::kStageOutputs && warpgroup_leader) sm90::bulk_wait<0, false>();
}

// The kernel's body; hopper_gemm and hopper_gemm_pair below are its entry points without and with clusters.
// The descriptors are the kernel's __grid_constant__ parameters (TMA reads them where they are).
template <class Tr>
__device__ __forceinline__ void hopper_gemm_body(const GemmProblem& problem, const typename Tr::Epilogue::Args& args,
                                                 const TmaDescriptor& tma_a, const TmaDescriptor& tma_b,
                                                 const TileMaps<Tr::kTileMaps>& tile_maps) {
    using Epilogue = typename Tr::Epilogue;
    extern __shared__ __align__(1024) unsigned char coda_gemm_smem[];
    const unsigned raw = sm90::smem_address(coda_gemm_smem);
    const unsigned base = (raw + kSwizzleAtomBytes - 1) & ~static_cast<unsigned>(kSwizzleAtomBytes - 1);
    const HopperSmem smem =
        HopperSmem::at(base, reinterpret_cast<typename Tr::Storage*>(coda_gemm_smem + (base - raw)));

    // Broadcast from lane 0, so that ptxas knows it is the same in every lane of a warp: the consumer's loop
    // state (stage, phase, descriptors) then lives in uniform registers and costs one instruction per warp.
    const int warpgroup = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / kWarpgroupThreads, 0);
    if (threadIdx.x == 0) hopper_init_barriers<Tr>(smem);
    // In a cluster, the partner's producer and consumers use this CTA's barriers too: all are set up first.
    if constexpr (Tr::kCluster > 1)
        sm90::cluster_sync();
    else
        __syncthreads();

    const int rank = Tr::kCluster > 1 ? sm90::cluster_rank() : 0;
    const TileOrder<Tr::kClusterM, Tr::kClusterN, Tr::kStreamK> order(
        (problem.m + Tr::kBM - 1) / Tr::kBM, (problem.n + Tr::kBN - 1) / Tr::kBN, (problem.k + Tr::BK - 1) / Tr::BK,
        problem.partials != nullptr, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x));
    // Staging needs every tile tensor (input or output, staged or not) 16-byte aligned in base and row pitch, and
    // every tile output's logical rows whole 16-byte units. The host runs a staging kernel only on launches that
    // meet that rule (hopper_tma.cpp, tile_tensors_stageable) and the direct variant on the others; a launch that
    // slipped through would move whole 16-byte units past its tensors, so it stops here instead.
    if constexpr (Tr::kStagedTiles) {
        if (!(detail::aligned_16<detail::TileInputTable<Epilogue>>(args) &&
              detail::aligned_16<detail::TileOutputTable<Epilogue>>(args) &&
              detail::whole_row_units<detail::TileOutputTable<Epilogue>>(problem.n) &&
              (!Tr::kStageOutputs || detail::transposed_stageable<Epilogue>(args, problem.m))))
            __trap();
    }

    if (warpgroup == 0) {
        sm90::release_registers<kHopperProducerRegisters>();
        if (threadIdx.x == 0) {
            sm90::prefetch_tma_descriptor(&tma_a);
            sm90::prefetch_tma_descriptor(&tma_b);
            hopper_produce<Tr>(smem.stages, smem.full, smem.empty, order, rank, &tma_a, &tma_b);
        } else if (Tr::kBlockScaled && threadIdx.x / 32 == 2) {
            if constexpr (Tr::kBlockScaled)
                hopper_load_block_scales<Tr>(problem, args, smem.block_scales, smem.full, smem.empty, order, rank);
        } else if (threadIdx.x == 32 && Tr::kStageInputs) {
            for (int i = 0; i < Tr::kTileMaps; ++i) sm90::prefetch_tma_descriptor(&tile_maps.map[i]);
            hopper_load_tile_inputs<Tr>(tile_maps.map, smem.staging, smem.input_full, smem.input_empty, order, rank,
                                        problem.n);
        }
        // A CTA of a cluster leaves only with its partner: until then, the partner's arrivals and multicasts may
        // still land in this CTA's shared memory. (Each warp gathers first: lanes 0 of warps 0 and 1 are late.)
        if constexpr (Tr::kCluster > 1) {
            __syncwarp();
            sm90::cluster_sync();
        }
        return;
    }
    sm90::claim_registers<kHopperConsumerRegisters>();
    hopper_consume<Tr>(problem, args, tile_maps, smem, order, rank, warpgroup);
    if constexpr (Tr::kCluster > 1) sm90::cluster_sync();
}

}  // namespace detail

template <class T, bool kAKMajor, bool kBKMajor, int BM, int BN, int STAGES, bool kPingPong, class Epilogue,
          bool kDirectTiles>
using HopperTraits1 = HopperGemmTraits<T, kAKMajor, kBKMajor, BM, BN, STAGES, kPingPong, 1, 1, Epilogue, kDirectTiles>;
// A pair along N (kShareA) or along M.
template <class T, bool kAKMajor, bool kBKMajor, int BM, int BN, int STAGES, bool kPingPong, bool kShareA,
          class Epilogue, bool kDirectTiles>
using HopperTraits2 = HopperGemmTraits<T, kAKMajor, kBKMajor, BM, BN, STAGES, kPingPong, kShareA ? 1 : 2,
                                       kShareA ? 2 : 1, Epilogue, kDirectTiles>;

template <class T, bool kAKMajor, bool kBKMajor, int BM, int BN, int STAGES, bool kPingPong, class Epilogue,
          bool kDirectTiles = false>
__global__ void __launch_bounds__(HopperTraits1<T, kAKMajor, kBKMajor, BM, BN, STAGES, kPingPong, Epilogue, kDirectTiles>::kThreads, 1)
    hopper_gemm(const GemmProblem problem, const typename Epilogue::Args args,
                const __grid_constant__ TmaDescriptor tma_a, const __grid_constant__ TmaDescriptor tma_b,
                const __grid_constant__ TileMaps<
                    HopperTraits1<T, kAKMajor, kBKMajor, BM, BN, STAGES, kPingPong, Epilogue, kDirectTiles>::kTileMaps> tile_maps) {
    detail::hopper_gemm_body<HopperTraits1<T, kAKMajor, kBKMajor, BM, BN, STAGES, kPingPong, Epilogue, kDirectTiles>>(
        problem, args, tma_a, tma_b, tile_maps);
}

// Clusters of 2 CTAs that share B (along M) or A (along N, kShareA) by TMA multicast. The grid must be a
// multiple of 2 (the host sizes it from the clusters that fit at once).
template <class T, bool kAKMajor, bool kBKMajor, int BM, int BN, int STAGES, bool kPingPong, bool kShareA,
          class Epilogue, bool kDirectTiles = false>
__global__ void __cluster_dims__(2, 1, 1)
    __launch_bounds__(HopperTraits2<T, kAKMajor, kBKMajor, BM, BN, STAGES, kPingPong, kShareA, Epilogue, kDirectTiles>::kThreads, 1)
        hopper_gemm_pair(const GemmProblem problem, const typename Epilogue::Args args,
                         const __grid_constant__ TmaDescriptor tma_a, const __grid_constant__ TmaDescriptor tma_b,
                         const __grid_constant__ TileMaps<
                             HopperTraits2<T, kAKMajor, kBKMajor, BM, BN, STAGES, kPingPong, kShareA, Epilogue, kDirectTiles>::kTileMaps>
                             tile_maps) {
    detail::hopper_gemm_body<HopperTraits2<T, kAKMajor, kBKMajor, BM, BN, STAGES, kPingPong, kShareA, Epilogue, kDirectTiles>>(
        problem, args, tma_a, tma_b, tile_maps);
}

}  // namespace coda
