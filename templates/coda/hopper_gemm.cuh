// Hopper GEMM mainloop for sm_90a: TMA loads into 128-byte-swizzled shared memory through an mbarrier
// pipeline, wgmma with fp32 accumulators in registers, one producer warp and two consumer warpgroups, and a
// persistent tile scheduler. The output tile is handed, still in registers, to the generated epilogue
// (epilogue_contract.cuh) exactly as on the portable path.
//
// Contract:
//   - Computes acc = A * B in fp32 for 16-bit T (bf16 or f16); A and B as stored are described by the
//     GemmProblem (as in portable_gemm.cuh) and by two tensor maps the host encodes (cuTensorMapEncodeTiled,
//     128-byte swizzle, zero fill out of bounds), 2-D with the stored rows' contiguous dimension innermost:
//       A K-major: dims {K, M}, box {64, BM}      A M-major: dims {M, K}, box {64, 64}
//       B K-major: dims {K, N}, box {64, BN / C}  B N-major: dims {N, K}, box {64, 64}     (C: CTAs a cluster)
//     TMA needs the base 16-byte aligned and the leading dimension a multiple of 8 elements (16 bytes): the
//     host checks both. Any M, N, K >= 1 (N even): edges are zero-filled by TMA and masked in the epilogue.
//   - Launch: grid = min(tiles, CTAs that fit on the GPU) (persistent: CTA b owns tiles b, b + grid, ...),
//     block = kThreads (384), dynamic shared memory = kSmemBytes (the host raises the per-kernel limit).
//     hopper_gemm_pair runs clusters of 2 CTAs along M (__cluster_dims__): the grid is whole clusters, at most
//     as many as fit at once, and each cluster walks units of two M-tiles of one N-tile (TileOrder).
//   - Threads: warpgroup 0 is the producer (one thread issues the operands' TMA copies, another the tile
//     inputs'; it gives registers away),
//     warpgroups 1 and 2 consume. Cooperative: both consume every stage and share one BM x BN tile, rows
//     split in halves. Ping-pong: they own alternate tiles; an order barrier makes their mainloops take turns,
//     so one's epilogue overlaps the other's mainloop.
//   - Tile outputs are staged in shared memory a column chunk at a time and written out in whole 16-byte units;
//     tile inputs (residual, saved activations) are loaded by TMA, chunk by chunk, into a ring of buffers by a
//     loader thread of warpgroup 0 ahead of the visits (hopper_staging.cuh), where shared memory allows. The
//     host passes one tensor map per tile input (TileMaps, after the operands' maps).
//   - Epilogue: per tile, the tile's consumer threads call begin_tile, visit for each (row_slot, col_slot)
//     inside [M] x [N], and end_tile with a scratch area of their own (the pipeline keeps running). Layout is
//     WgmmaLayout below; its sync() is a named barrier over exactly those threads.
#pragma once

#include "coda/epilogue_contract.cuh"
#include "coda/hopper_staging.cuh"
#include "coda/numeric.cuh"
#include "coda/sm90_ops.cuh"

namespace coda {

constexpr int kHopperBK = 64;                 // one 128-byte swizzle row of 16-bit elements
constexpr int kHopperMaxSmemBytes = 227 * 1024;
constexpr int kHopperProducerRegisters = 40;  // the producer thread needs addresses and loop counters only
constexpr int kHopperConsumerRegisters = 232; // 128 accumulators plus the epilogue; 40 + 2 * 232 fits 512 / thread-slot
constexpr int kHopperRasterBand = 8;          // M-tiles per band of the tile order: concurrent tiles share A and B in L2
constexpr int kHopperBatchRegisters = 16;     // registers the epilogue may spend on inputs loaded ahead of use
constexpr int kHopperPrefetchLead = 8;        // k-tiles before a tile's epilogue at which its tile inputs are prefetched
// Staging tile outputs in shared memory (hopper_staging.cuh) may cost pipeline stages down to 3, and loading tile
// inputs by TMA down to kHopperMinStagesInputs. Both go a chunk of 4 column slots (32 columns) at a time; the
// input ring holds kHopperInputSlots chunks, so the loader runs that far ahead of the visits. At most
// kHopperMaxTileMaps tile inputs travel as tensor maps (kernel parameters); more are read from global memory.
constexpr int kHopperMinStagesOutputs = 3;
constexpr int kHopperMinStagesInputs = 4;
constexpr int kHopperChunkSlots = 4;
constexpr int kHopperInputSlots = 2;
constexpr int kHopperMaxTileMaps = 16;
// Registers staging needs on top of the accumulators and the epilogue's reduction state (ptxas spills below it:
// rmsnorm_backward's column reduction at 64x256 ping-pong keeps 64 partials next to 128 accumulators).
constexpr int kHopperStagingRegisters = 48;

// The wgmma accumulator layout of a BM x BN tile owned by kGroups consumer warpgroups, each holding kWgM rows
// as kWgM / 64 blocks of m64. In block i, warp w of a warpgroup holds rows 16w + lane/4 (+ 8) and, for each n8
// chunk j, columns 8j + 2 (lane % 4) + {0, 1}: the same as mma.sync's per-warp layout.
template <int BM, int BN, int kWgM, int kGroups>
struct WgmmaLayout {
    static constexpr int kBM = BM;
    static constexpr int kBN = BN;
    static constexpr int kThreads = 128 * kGroups;
    static constexpr int kM64 = kWgM / 64;
    static constexpr int kRowSlots = 2 * kM64;
    static constexpr int kColSlots = BN / 8;
    static constexpr int kRowSharers = 4;              // a row lives in one quad of one warp
    static constexpr int kColSharers = 32 * kGroups;   // 8 quads x 4 warps x kGroups
    static_assert(kWgM * kGroups == BM, "coda: the consumer warpgroups must cover BM rows");

    // Cooperative (kGroups = 2): both consumer warpgroups, threads 128..383. Ping-pong: the calling one.
    __device__ static int thread_index() {
        return kGroups == 2 ? static_cast<int>(threadIdx.x) - 128 : static_cast<int>(threadIdx.x) % 128;
    }
    __device__ static int group() { return thread_index() / 128; }
    __device__ static int warp() { return (thread_index() / 32) % 4; }
    __device__ static int lane() { return static_cast<int>(threadIdx.x) % 32; }
    // Row slot 2i + h is row lane/4 + 8h of warp w's 16 rows in m64 block i.
    __device__ static int slot_row(int row_slot) {
        return group() * kWgM + (row_slot / 2) * 64 + warp() * 16 + (row_slot % 2) * 8 + lane() / 4;
    }
    __device__ static int slot_col(int col_slot) { return col_slot * 8 + 2 * (lane() % 4); }
    __device__ static int row_sharer() { return lane() % 4; }
    __device__ static int col_sharer() { return (group() * 4 + warp()) * 8 + lane() / 4; }
    // Barrier 1 spans both consumer warpgroups; 2 and 3 are one ping-pong consumer each (0 is __syncthreads).
    __device__ static void sync() {
        if (kGroups == 2)
            sm90::named_barrier_sync(1, 256);
        else
            sm90::named_barrier_sync(1 + static_cast<int>(threadIdx.x) / 128, 128);
    }
};

template <class T, bool kAKMajor, bool kBKMajor, int BM, int BN, int STAGES, bool kPingPong, int CLUSTER,
          class Epilogue>
struct HopperGemmTraits {
    static constexpr int BK = kHopperBK;
    // CTAs of a cluster along M (1 or 2). A pair works on two M-tiles of one N-tile; each CTA loads half of the B
    // tile and multicasts it to both (K-major B: a box of BN / 2 rows; N-major: alternate 64-column boxes).
    static constexpr int kCluster = CLUSTER;
    static constexpr int kBBoxRows = kBKMajor ? BN / CLUSTER : 64;
    static constexpr int kConsumers = 2;
    static constexpr int kThreads = 128 * (1 + kConsumers);
    static constexpr int kWgM = kPingPong ? BM : BM / 2;  // rows of one consumer warpgroup's accumulator
    using Layout = WgmmaLayout<BM, BN, kWgM, kPingPong ? 1 : 2>;
    static constexpr int kM64 = Layout::kM64;
    static constexpr int kABytes = BM * BK * 2;
    static constexpr int kBBytes = BN * BK * 2;
    static constexpr int kStageBytes = kABytes + kBBytes;
    // Each ping-pong consumer reduces its own tile, so each has its own scratch.
    static constexpr int kScratchPerTile = (Epilogue::template scratch_floats<Layout>() * 4 + 15) / 16 * 16;
    static constexpr int kScratchBytes = kScratchPerTile * (kPingPong ? 2 : 1);
    static constexpr int kAlignSlack = 1024;  // swizzled TMA tiles need 1024-byte alignment
    static constexpr int kBarrierBytes = 8 * (2 * STAGES + 4 + 2 * kHopperInputSlots);
    static constexpr int kFixedBytes = kAlignSlack + kScratchBytes + kBarrierBytes;
    // Pipeline stages that fit beside `staging` bytes of staged tiles.
    static constexpr int stages_beside(int staging) {
        return (kHopperMaxSmemBytes - kFixedBytes - staging) / kStageBytes;
    }
    // Staged tile outputs (hopper_staging.cuh): one column chunk of each consumer warpgroup's rows. Tile inputs:
    // a ring of kHopperInputSlots chunks of BM rows. Each only where it leaves enough stages.
    static constexpr int kStateRegisters = static_cast<int>(sizeof(typename Epilogue::template State<Layout>) / 4);
    static constexpr bool kRoomToStage =
        kM64 * BN / 2 + kStateRegisters + kHopperStagingRegisters <= kHopperConsumerRegisters;
    static constexpr int kChunkColumns = 8 * kHopperChunkSlots;
    static constexpr int kChunks = BN / kChunkColumns;
    using StagedIn = TmaTileInputs<Epilogue, BM, kChunkColumns>;
    using StagedOut = StagedTileOutputs<Epilogue, kWgM, kHopperChunkSlots>;
    // Swizzled TMA boxes start on 1024-byte boundaries: so do the output buffers (after the input ring).
    static constexpr int kStagedOutPerGroup = (StagedOut::kBytes + 1023) / 1024 * 1024;
    static constexpr bool kStageOutputs =
        kRoomToStage && Epilogue::kTileOutputs > 0 && Epilogue::kTileOutputs <= kHopperMaxTileMaps &&
        stages_beside(2 * kStagedOutPerGroup) >= kHopperMinStagesOutputs;
    static constexpr int kOneOutputBufferBytes = kStageOutputs ? 2 * kStagedOutPerGroup : 0;  // both consumers
    // The input ring comes first after the stages, so its chunk buffers keep the stages' 1024-byte alignment.
    static constexpr int kInputSlotBytes = (StagedIn::kBytes + 1023) / 1024 * 1024;
    static constexpr int kInputRingBytes = kHopperInputSlots * kInputSlotBytes;
    static constexpr bool kStageInputs =
        kRoomToStage && Epilogue::kTileInputs > 0 &&
        Epilogue::kTileInputs + (kStageOutputs ? Epilogue::kTileOutputs : 0) <= kHopperMaxTileMaps &&
        stages_beside(kOneOutputBufferBytes + kInputRingBytes) >= kHopperMinStagesInputs;
    static constexpr int kInputBytes = kStageInputs ? kInputRingBytes : 0;
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
    static constexpr int kOutputMaps = kStageOutputs ? Epilogue::kTileOutputs : 0;
    static constexpr int kTileMaps = kInputMaps + kOutputMaps > 0 ? kInputMaps + kOutputMaps : 1;
    static constexpr int kStagingBytes = kInputBytes + kOutputBytes;
    static constexpr int kFitStages = stages_beside(kStagingBytes);
    // Fewer stages than asked when the epilogue's scratch and staged tiles need the room.
    static constexpr int kStages = STAGES < kFitStages ? STAGES : kFitStages;
    static constexpr int kSmemBytes = kFixedBytes + kStages * kStageBytes + kStagingBytes;
    // Visits whose inputs are loaded together: as many as kHopperBatchRegisters hold (1 to 8, a power of two,
    // so that it divides BN / 8). More would cost the accumulators registers.
    static constexpr int kInputRegisters = static_cast<int>(sizeof(typename Epilogue::Inputs) / 4);
    static constexpr int kVisitBatch = kInputRegisters * 8 <= kHopperBatchRegisters   ? 8
                                       : kInputRegisters * 4 <= kHopperBatchRegisters ? 4
                                       : kInputRegisters * 2 <= kHopperBatchRegisters ? 2
                                                                                      : 1;
    // Arrivals that free an input chunk: lane 0 of every warp that reads it. A stage is free once those of every
    // CTA of the cluster have arrived (its producer's multicast writes into all of them).
    static constexpr int kEmptyArrivals = 4 * (kPingPong ? 1 : kConsumers);
    static constexpr int kStageFreeArrivals = kEmptyArrivals * CLUSTER;

    static_assert(sizeof(T) == 2, "coda: hopper_gemm takes 16-bit inputs (coda::bf16 or coda::f16)");
    static_assert(BN == 128 || BN == 256, "coda: hopper_gemm's BN must be 128 or 256 (one wgmma covers it)");
    static_assert(kChunks % kOutputBuffers == 0, "coda: each tile's first chunk must take the first output buffer");
    static_assert(kWgM == 64 || kWgM == 128, "coda: each consumer warpgroup holds 64 or 128 rows");
    static_assert(kWgM * BN <= 128 * 128, "coda: a consumer warpgroup's accumulator must fit 128 registers a thread");
    static_assert(BM <= 256 && BM % 64 == 0, "coda: BM must be 64, 128, 192 or 256 (TMA boxes are at most 256 rows)");
    static_assert(kStages >= 2, "coda: the epilogue's scratch leaves room for fewer than 2 pipeline stages");
    static_assert(CLUSTER == 1 || CLUSTER == 2, "coda: hopper_gemm's clusters are 1 or 2 CTAs along M");
    static_assert(kBKMajor || BN / 64 % CLUSTER == 0, "coda: the CTAs of a cluster split B's 64-column boxes");
};

namespace detail {

// The tile order of a persistent CTA. Work comes in units of kCluster M-tiles of one N-tile (one per CTA of a
// cluster, in rank order); cluster c takes units c, c + clusters, ... Units go in bands of kHopperRasterBand
// M-tiles, column by column inside a band, so that the tiles running at once on all SMs read a few rows of A
// and columns of B that stay in L2. With an odd number of M-tiles, the last pair's second tile is beyond M:
// that CTA still runs the mainloop (its partner needs its half of B) but has no epilogue (valid() is false).
template <int kCluster>
struct TileOrder {
    int tiles_m, tiles_n, units_m, units, first, step;

    __device__ TileOrder(int tiles_m_, int tiles_n_)
        : tiles_m(tiles_m_), tiles_n(tiles_n_), units_m((tiles_m_ + kCluster - 1) / kCluster),
          units(units_m * tiles_n_), first(static_cast<int>(blockIdx.x) / kCluster),
          step(static_cast<int>(gridDim.x) / kCluster) {}

    // The M- and N-tile of unit `unit` for the CTA of cluster rank `rank`.
    __device__ void position(int unit, int rank, int& tm, int& tn) const {
        constexpr int kBand = kHopperRasterBand / kCluster;
        const int band = unit / (kBand * tiles_n);
        const int first_m = band * kBand;
        const int rows = units_m - first_m < kBand ? units_m - first_m : kBand;
        const int in_band = unit - band * kBand * tiles_n;
        tm = (first_m + in_band % rows) * kCluster + rank;
        tn = in_band / rows;
    }
    __device__ bool valid(int tm) const { return tm < tiles_m; }
};

// One box of B into this CTA's stage, or (in a cluster) into every CTA's.
template <int kCluster>
__device__ __forceinline__ void hopper_load_b(unsigned dst, const TmaDescriptor* tma_b, unsigned bar, int c0, int c1) {
    if constexpr (kCluster == 1)
        sm90::tma_load_2d(dst, tma_b, bar, c0, c1);
    else
        sm90::tma_load_2d_multicast(dst, tma_b, bar, c0, c1, static_cast<unsigned short>((1u << kCluster) - 1));
}

template <class Tr, bool kAKMajor, bool kBKMajor, int BM, int BN>
__device__ __forceinline__ void hopper_produce(unsigned stages_base, unsigned full, unsigned empty,
                                               const TileOrder<Tr::kCluster>& order, int rank, int k_tiles,
                                               const TmaDescriptor* tma_a, const TmaDescriptor* tma_b) {
    int stage = 0;
    unsigned phase = 0;
    for (int unit = order.first; unit < order.units; unit += order.step) {
        int tm, tn;
        order.position(unit, rank, tm, tn);
        // A tile beyond M (second of a pair) loads the last valid rows instead: what it computes is discarded.
        const int m0 = (order.valid(tm) ? tm : order.tiles_m - 1) * BM, n0 = tn * BN;
        for (int kt = 0; kt < k_tiles; ++kt) {
            // In a cluster, free means free in every CTA: this producer's multicast writes into all of them.
            sm90::mbarrier_wait(empty + 8 * stage, phase ^ 1);
            const unsigned bar = full + 8 * stage;
            // Each CTA's stage receives all of A and B, whoever issues the copies.
            sm90::mbarrier_arrive_expect_tx(bar, Tr::kStageBytes);
            const unsigned a_dst = stages_base + stage * Tr::kStageBytes;
            const unsigned b_dst = a_dst + Tr::kABytes;
            const int k0 = kt * Tr::BK;
            if constexpr (kAKMajor) {
                sm90::tma_load_2d(a_dst, tma_a, bar, k0, m0);
            } else {
#pragma unroll
                for (int c = 0; c < BM / 64; ++c) sm90::tma_load_2d(a_dst + c * 64 * 128, tma_a, bar, m0 + 64 * c, k0);
            }
            if constexpr (kBKMajor) {
                constexpr int kRows = Tr::kBBoxRows;  // BN / kCluster: this CTA's share
                hopper_load_b<Tr::kCluster>(b_dst + rank * kRows * 128, tma_b, bar, k0, n0 + rank * kRows);
            } else {
#pragma unroll
                for (int c = 0; c < BN / 64; c += Tr::kCluster)
                    hopper_load_b<Tr::kCluster>(b_dst + (c + rank) * 64 * 128, tma_b, bar, n0 + 64 * (c + rank), k0);
            }
            if (++stage == Tr::kStages) {
                stage = 0;
                phase ^= 1;
            }
        }
    }
}

// The tile-input loader (one thread of the producer warpgroup, beside the operand producer): for every tile of
// this CTA in order, every chunk of kChunkColumns columns, loads the tile inputs' BM rows of the chunk into the
// next buffer of the ring once its visits are done with it. Ring position p uses buffer p % kHopperInputSlots.
template <class Tr, int BM, int BN>
__device__ __forceinline__ void hopper_load_tile_inputs(const TmaDescriptor* maps, unsigned buffers, unsigned full,
                                                        unsigned empty, const TileOrder<Tr::kCluster>& order,
                                                        int rank, int n) {
    using In = typename Tr::StagedIn;
    int position = 0;
    for (int unit = order.first; unit < order.units; unit += order.step) {
        int tm, tn;
        order.position(unit, rank, tm, tn);
        for (int chunk = 0; chunk < Tr::kChunks; ++chunk, ++position) {
            const int slot = position % kHopperInputSlots;
            sm90::mbarrier_wait(empty + 8 * slot, ((position / kHopperInputSlots) & 1) ^ 1);
            const int n0 = tn * BN + chunk * Tr::kChunkColumns;
            if (n0 < n && order.valid(tm)) {
                sm90::mbarrier_arrive_expect_tx(full + 8 * slot, In::kBytes);
                In::issue(maps, buffers + slot * Tr::kInputSlotBytes, full + 8 * slot, tm * BM, n0);
            } else {
                sm90::mbarrier_arrive(full + 8 * slot);  // beyond N or M: nothing to load, and no visit reads it
            }
        }
    }
}

// wgmma descriptors of one operand (sm90::smem_descriptor_low). K-major: rows of 128 bytes, 8-row groups 1024
// bytes apart, a k16 step is 32 bytes along the (swizzled) row. M/N-major: 64-element chunks of 64 k-rows (8 KB)
// side by side, a k16 step is 16 k-rows (2 KB).
template <bool kKMajor>
struct HopperOperand {
    static constexpr unsigned kHigh = sm90::smem_descriptor_high(1024);
    // The low half of the descriptor of the tile at `tile`.
    __device__ static unsigned low(unsigned tile) { return sm90::smem_descriptor_low(tile, kKMajor ? 16 : 64 * 128); }
    // What to add to a tile's low half for its rows from `first_row` (a multiple of 64) and k16 step kk.
    __host__ __device__ static constexpr unsigned offset(int first_row, int kk) {
        return kKMajor ? static_cast<unsigned>(first_row * 128 + kk * 32) >> 4
                       : static_cast<unsigned>((first_row / 64) * 64 * 128 + kk * 16 * 128) >> 4;
    }
};

// L2 prefetch of every tile-tensor element this thread's visits of tile (tm, tn) will read.
template <class L, int BM, int BN, class Epilogue>
__device__ __forceinline__ void hopper_prefetch_epilogue(const typename Epilogue::Args& args, const GemmProblem& p,
                                                         int tm, int tn) {
#pragma unroll 1
    for (int row_slot = 0; row_slot < L::kRowSlots; ++row_slot) {
        const int m = tm * BM + L::slot_row(row_slot);
        if (m >= p.m) continue;
#pragma unroll 1
        for (int j = 0; j < L::kColSlots; ++j) {
            const int n = tn * BN + L::slot_col(j);
            if (n < p.n) Epilogue::template prefetch<L>(args, Coord{m, n, p.m, p.n});
        }
    }
}

// Where a consumer finds the chunks of its tile's inputs (TMA-loaded): the ring's buffers and barriers, and the
// ring position of the tile's first chunk (each tile of the CTA takes kChunks positions, in tile order).
struct InputRing {
    unsigned buffers;
    unsigned full;   // kHopperInputSlots barriers: chunk loaded
    unsigned empty;  // kHopperInputSlots barriers: chunk read by every warp that visits it
    int first;
};

template <bool B, class T, class F>
struct Pick {
    using type = T;
};
template <class T, class F>
struct Pick<false, T, F> {
    using type = F;
};

// The visits of one tile (begin_tile .. end_tile excluded), reading and writing tiles through `tiles`. With
// staged inputs or outputs, column chunk by column chunk: each waits for its input chunk in the ring and frees
// it after its visits, and stores its outputs with TMA (output_maps; between two barriers over the warpgroup, id
// `barrier`).
template <class Tr, class L, class Epilogue, int BN, class Tiles>
__device__ __forceinline__ void hopper_visit_tile(const typename Epilogue::Args& args, const GemmProblem& problem,
                                                  typename Epilogue::template State<L>& st, Tiles& tiles, int m0,
                                                  int n0, float (&acc)[Tr::kM64][BN / 2], int barrier,
                                                  const InputRing& ring, const TmaDescriptor* output_maps) {
    constexpr bool kChunked = Tiles::kStagedOutputs || Tiles::kStagedInputs;
    constexpr int kChunk = kChunked ? kHopperChunkSlots : BN / 8;
    // kBatch visits at a time: all their loads first, then their math and stores, so that the loads are in
    // flight together instead of one latency per visit.
    constexpr int kBatch = Tr::kVisitBatch < kChunk ? Tr::kVisitBatch : kChunk;
    unsigned out_buffers = 0;
    if constexpr (Tiles::kStagedOutputs) out_buffers = tiles.out.buffer;
#pragma unroll
    for (int c0 = 0; c0 < BN / 8; c0 += kChunk) {
        if constexpr (Tiles::kStagedOutputs) {
            tiles.out.n0 = n0 + 8 * c0;
            tiles.out.buffer = out_buffers + (c0 / kChunk) % Tr::kOutputBuffers * Tr::kStagedOutPerGroup;
        }
        int slot = 0;
        if constexpr (Tiles::kStagedInputs) {
            const int position = ring.first + c0 / kHopperChunkSlots;
            slot = position % kHopperInputSlots;
            sm90::mbarrier_wait(ring.full + 8 * slot, static_cast<unsigned>(position / kHopperInputSlots) & 1u);
            tiles.in.buffer = ring.buffers + slot * Tr::kInputSlotBytes;
            tiles.in.n0 = n0 + 8 * c0;
        }
#pragma unroll
        for (int i = 0; i < Tr::kM64; ++i) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row_slot = 2 * i + h;
                const int m = m0 + L::slot_row(row_slot);
                // Staged fragments move a whole 8-row group at once: every lane takes part, in M or not.
                if constexpr (Tiles::kStagedInputs) tiles.in.fill(m);
                if (m < problem.m) {
#pragma unroll
                    for (int j0 = c0; j0 < c0 + kChunk; j0 += kBatch) {
                        typename Epilogue::Inputs in[kBatch];
#pragma unroll
                        for (int j = j0; j < j0 + kBatch; ++j) {
                            const int n = n0 + L::slot_col(j);
                            if (n < problem.n)
                                Epilogue::template load<L>(args, Coord{m, n, problem.m, problem.n, j, row_slot}, in[j - j0],
                                                           tiles);
                        }
#pragma unroll
                        for (int j = j0; j < j0 + kBatch; ++j) {
                            const int n = n0 + L::slot_col(j);
                            if (n < problem.n)
                                Epilogue::template visit<L>(args, st, Coord{m, n, problem.m, problem.n, j, row_slot}, row_slot,
                                                            j, acc[i][4 * j + 2 * h], acc[i][4 * j + 2 * h + 1],
                                                            in[j - j0], tiles);
                        }
                    }
                }
                if constexpr (Tiles::kStagedOutputs) tiles.out.flush(m);
            }
        }
        if constexpr (Tiles::kStagedInputs) {
            __syncwarp();  // every lane's reads of the chunk are done
            if (threadIdx.x % 32 == 0) sm90::mbarrier_arrive(ring.empty + 8 * slot);
        }
        if constexpr (Tiles::kStagedOutputs) {
            sm90::fence_async_shared();              // this thread's writes of the chunk, for the TMA to read
            sm90::named_barrier_sync(barrier, 128);  // every thread's
            if (threadIdx.x % 128 == 0) {
                tiles.out.issue(output_maps);
                // The TMA has read the buffer the next chunk writes: this chunk's, or with two, the previous one's.
                sm90::bulk_wait<Tr::kOutputBuffers - 1, true>();
            }
            sm90::named_barrier_sync(barrier, 128);
        }
    }
}

// One stage's wgmmas. a_low and b_low are the low descriptor halves of the stage's A (at this warpgroup's first
// row) and B tiles: every descriptor below adds a constant to them, so the loop spends few instructions on
// addressing (measured: ~130 per warp and k-tile when each descriptor was built from an address).
template <class T, class Tr, bool kAKMajor, bool kBKMajor, int BN>
__device__ __forceinline__ void hopper_mma_stage(unsigned a_low, unsigned b_low, float (&acc)[Tr::kM64][BN / 2]) {
    using A = HopperOperand<kAKMajor>;
    using B = HopperOperand<kBKMajor>;
#pragma unroll
    for (int kk = 0; kk < Tr::BK / 16; ++kk) {
        const unsigned long long b_desc = sm90::smem_descriptor_join(b_low + B::offset(0, kk), B::kHigh);
#pragma unroll
        for (int i = 0; i < Tr::kM64; ++i) {
            const unsigned long long a_desc = sm90::smem_descriptor_join(a_low + A::offset(64 * i, kk), A::kHigh);
            if constexpr (BN == 256)
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

// The kernel's body; hopper_gemm and hopper_gemm_pair below are its entry points without and with clusters.
// The descriptors are the kernel's __grid_constant__ parameters (TMA reads them where they are).
template <class T, bool kAKMajor, bool kBKMajor, int BM, int BN, int STAGES, bool kPingPong, int CLUSTER,
          class Epilogue>
__device__ __forceinline__ void hopper_gemm_body(
    const GemmProblem& problem, const typename Epilogue::Args& args, const TmaDescriptor& tma_a,
    const TmaDescriptor& tma_b,
    const TileMaps<HopperGemmTraits<T, kAKMajor, kBKMajor, BM, BN, STAGES, kPingPong, CLUSTER, Epilogue>::kTileMaps>&
        tile_maps) {
    using Tr = HopperGemmTraits<T, kAKMajor, kBKMajor, BM, BN, STAGES, kPingPong, CLUSTER, Epilogue>;
    using L = typename Tr::Layout;
    extern __shared__ __align__(1024) unsigned char coda_gemm_smem[];
    const unsigned raw = sm90::smem_address(coda_gemm_smem);
    const unsigned base = (raw + 1023u) & ~1023u;
    unsigned char* const base_ptr = coda_gemm_smem + (base - raw);
    // Shared memory: pipeline stages | tile-input ring | staged tile outputs | epilogue scratch | barriers.
    const unsigned ring_buffers = base + Tr::kStages * Tr::kStageBytes;  // the input ring, then staged outputs
    float* const scratch = reinterpret_cast<float*>(base_ptr + Tr::kStages * Tr::kStageBytes + Tr::kStagingBytes);
    const unsigned full = base + Tr::kStages * Tr::kStageBytes + Tr::kStagingBytes + Tr::kScratchBytes;  // stage loaded
    const unsigned empty = full + 8 * Tr::kStages;                                   // kStages barriers: stage free
    const unsigned turn = empty + 8 * Tr::kStages;  // ping-pong: 2 barriers, "consumer c finished a mainloop"
    // Ping-pong with staged inputs: 2 barriers, "consumer c finished the visits of a tile". The consumers share
    // the input ring in tile order; waiting for the other's previous epilogue keeps each within one phase of the
    // ring's barriers (with short mainloops, one's epilogue could otherwise start two ring phases ahead).
    const unsigned visits_done = turn + 16;
    const unsigned in_full = visits_done + 16;        // kHopperInputSlots barriers: input chunk loaded
    const unsigned in_empty = in_full + 8 * kHopperInputSlots;  // and read

    // Broadcast from lane 0, so that ptxas knows it is the same in every lane of a warp: the consumer's loop
    // state (stage, phase, descriptors) then lives in uniform registers and costs one instruction per warp.
    const int warpgroup = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
    if (threadIdx.x == 0) {
        for (int s = 0; s < Tr::kStages; ++s) {
            sm90::mbarrier_init(full + 8 * s, 1);
            sm90::mbarrier_init(empty + 8 * s, Tr::kStageFreeArrivals);
        }
        sm90::mbarrier_init(turn, 1);
        sm90::mbarrier_init(turn + 8, 1);
        sm90::mbarrier_init(visits_done, 4);  // lane 0 of each warp of the consumer
        sm90::mbarrier_init(visits_done + 8, 4);
        for (int s = 0; s < kHopperInputSlots; ++s) {
            sm90::mbarrier_init(in_full + 8 * s, 1);
            sm90::mbarrier_init(in_empty + 8 * s, Tr::kEmptyArrivals);
        }
        sm90::fence_barrier_init();
    }
    // In a cluster, the partner's producer and consumers use this CTA's barriers too: all are set up first.
    if constexpr (CLUSTER > 1)
        sm90::cluster_sync();
    else
        __syncthreads();

    const int rank = CLUSTER > 1 ? sm90::cluster_rank() : 0;
    const TileOrder<CLUSTER> order((problem.m + BM - 1) / BM, (problem.n + BN - 1) / BN);
    const int k_tiles = (problem.k + Tr::BK - 1) / Tr::BK;
    // Staging needs every tile tensor (input or output, staged or not: the host encodes the input maps under the
    // same rule) 16-byte aligned in base and row pitch; otherwise every visit goes to global memory.
    const bool stage_tiles = (Tr::kStageInputs || Tr::kStageOutputs) &&
                             detail::aligned_16<detail::TileInputTable<Epilogue>>(args) &&
                             detail::aligned_16<detail::TileOutputTable<Epilogue>>(args);
    const bool stage_inputs = Tr::kStageInputs && stage_tiles;

    if (warpgroup == 0) {
        sm90::release_registers<kHopperProducerRegisters>();
        if (threadIdx.x == 0) {
            sm90::prefetch_tma_descriptor(&tma_a);
            sm90::prefetch_tma_descriptor(&tma_b);
            hopper_produce<Tr, kAKMajor, kBKMajor, BM, BN>(base, full, empty, order, rank, k_tiles, &tma_a, &tma_b);
        } else if (threadIdx.x == 32 && stage_inputs) {
            for (int i = 0; i < Tr::kTileMaps; ++i) sm90::prefetch_tma_descriptor(&tile_maps.map[i]);
            hopper_load_tile_inputs<Tr, BM, BN>(tile_maps.map, ring_buffers, in_full, in_empty, order, rank,
                                                problem.n);
        }
        // A CTA of a cluster leaves only with its partner: until then, the partner's arrivals and multicasts may
        // still land in this CTA's shared memory. (Each warp gathers first: lanes 0 of warps 0 and 1 are late.)
        if constexpr (CLUSTER > 1) {
            __syncwarp();
            sm90::cluster_sync();
        }
        return;
    }
    sm90::claim_registers<kHopperConsumerRegisters>();
    const int consumer = warpgroup - 1;
    const bool warp_leader = threadIdx.x % 32 == 0;
    // Rows of the tile this warpgroup multiplies: its half (cooperative) or all of them (ping-pong).
    const int first_row = kPingPong ? 0 : consumer * Tr::kWgM;
    // Low descriptor halves of stage 0's operands; a stage adds its offset (hopper_mma_stage).
    const unsigned a_low = HopperOperand<kAKMajor>::low(base) + HopperOperand<kAKMajor>::offset(first_row, 0);
    const unsigned b_low = HopperOperand<kBKMajor>::low(base + Tr::kABytes);
    float* const my_scratch = scratch + (kPingPong ? consumer * Tr::kScratchPerTile / 4 : 0);
    // (The staging views are rebuilt per tile from these: nothing extra stays live across the mainloop.)
    const unsigned out_buffer = ring_buffers + Tr::kInputBytes + consumer * Tr::kOutputBuffers * Tr::kStagedOutPerGroup;
    const int staging_barrier = warpgroup + 1;  // 2 or 3: not 1, the cooperative tile barrier
    // One thread per tile asks L2 for the tile's input chunks ahead of the loader (cooperative: warpgroup 1's).
    const bool prefetcher = threadIdx.x % 128 == 0 && (kPingPong || consumer == 0);

    if (Tr::kStageOutputs && stage_tiles && threadIdx.x % 128 == 0)
        for (int i = 0; i < Tr::kOutputMaps; ++i) sm90::prefetch_tma_descriptor(&tile_maps.map[Tr::kInputMaps + i]);

    float acc[Tr::kM64][BN / 2];
    int local = 0;  // index of the tile among this CTA's tiles
    for (int unit = order.first; unit < order.units; unit += order.step, ++local) {
        if (kPingPong && local % 2 != consumer) continue;
        int tm, tn;
        order.position(unit, rank, tm, tn);
        // Pipeline position of this tile's first k-tile: every tile of the CTA takes k_tiles positions.
        const int start = local * k_tiles;
        int stage = start % Tr::kStages;
        unsigned phase = static_cast<unsigned>(start / Tr::kStages) & 1u;
        // Ping-pong: wait until the other consumer has finished the previous tile's mainloop. Besides taking
        // turns on the tensor cores, this keeps each consumer within one phase of the stages it waits on.
        if (kPingPong && local > 0) sm90::mbarrier_wait(turn + 8 * (1 - consumer), static_cast<unsigned>((local - 1) / 2) & 1u);

#pragma unroll
        for (int i = 0; i < Tr::kM64; ++i)
#pragma unroll
            for (int r = 0; r < BN / 2; ++r) acc[i][r] = 0.0f;

        int previous = -1;
        const int prefetch_at = k_tiles > kHopperPrefetchLead ? k_tiles - kHopperPrefetchLead : 0;
        for (int kt = 0; kt < k_tiles; ++kt) {
            if (kt == prefetch_at) {
                // (With staged inputs, tile tensors read at the visit, i.e. accumulates, go without this hint.)
                if (!stage_inputs) {
                    hopper_prefetch_epilogue<L, BM, BN, Epilogue>(args, problem, tm, tn);
                } else if (prefetcher && order.valid(tm)) {
                    for (int n0 = tn * BN; n0 < tn * BN + BN && n0 < problem.n; n0 += Tr::kChunkColumns)
                        Tr::StagedIn::prefetch(tile_maps.map, tm * BM, n0);
                }
            }
            sm90::mbarrier_wait(full + 8 * stage, phase);
            sm90::wgmma_fence();
            const unsigned stage_offset = static_cast<unsigned>(stage) * (Tr::kStageBytes >> 4);
            hopper_mma_stage<T, Tr, kAKMajor, kBKMajor, BN>(a_low + stage_offset, b_low + stage_offset, acc);
            sm90::wgmma_commit();
            // The previous stage's wgmmas are done once at most this stage's group is pending: free it.
            sm90::wgmma_wait<1>();
            if (previous >= 0 && warp_leader) free_stage<CLUSTER>(empty + 8 * previous);
            previous = stage;
            if (++stage == Tr::kStages) {
                stage = 0;
                phase ^= 1;
            }
        }
        sm90::wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < Tr::kM64; ++i) sm90::fence_registers(acc[i]);
        if (warp_leader) free_stage<CLUSTER>(empty + 8 * previous);
        if (kPingPong && threadIdx.x % 128 == 0) sm90::mbarrier_arrive(turn + 8 * consumer);

        const InputRing ring{ring_buffers, in_full, in_empty, local * Tr::kChunks};
        typename Epilogue::template State<L> st;
        Epilogue::template begin_tile<L>(st);
        // Two instantiations of the visits, so that neither carries the other's addressing in registers.
        if (stage_tiles) {
            if (kPingPong && stage_inputs && local > 0)
                sm90::mbarrier_wait(visits_done + 8 * (1 - consumer), static_cast<unsigned>((local - 1) / 2) & 1u);
            HopperTiles<typename Pick<Tr::kStageInputs, typename Tr::StagedIn, GlobalTiles>::type,
                        typename Pick<Tr::kStageOutputs, typename Tr::StagedOut, GlobalTiles>::type, Epilogue::kColInputs,
                        kHopperChunkSlots>
                tiles{};
            if constexpr (Tr::kStageInputs) tiles.in = typename Tr::StagedIn{{ring_buffers, tm * BM, 0}};
            if constexpr (Tr::kStageOutputs) tiles.out = typename Tr::StagedOut{{out_buffer, tm * BM + first_row, 0}};
            hopper_visit_tile<Tr, L, Epilogue, BN>(args, problem, st, tiles, tm * BM, tn * BN, acc, staging_barrier,
                                                   ring, tile_maps.map + Tr::kInputMaps);
            if (kPingPong && stage_inputs && warp_leader) sm90::mbarrier_arrive(visits_done + 8 * consumer);
        } else {
            HopperTiles<GlobalTiles, GlobalTiles> tiles{};
            hopper_visit_tile<Tr, L, Epilogue, BN>(args, problem, st, tiles, tm * BM, tn * BN, acc, staging_barrier,
                                                   ring, tile_maps.map + Tr::kInputMaps);
        }
        // (A tile beyond M visited nothing; it has no partials to write.)
        if (order.valid(tm)) Epilogue::template end_tile<L>(args, st, my_scratch, TileCoord{tm, tn, problem.m, problem.n});
    }
    // The last TMA stores must be done before the CTA's shared memory goes away.
    if (Tr::kStageOutputs && threadIdx.x % 128 == 0) sm90::bulk_wait<0, false>();
    if constexpr (CLUSTER > 1) sm90::cluster_sync();
}

}  // namespace detail

template <class T, bool kAKMajor, bool kBKMajor, int BM, int BN, int STAGES, bool kPingPong, class Epilogue>
__global__ void __launch_bounds__(384, 1)
    hopper_gemm(const GemmProblem problem, const typename Epilogue::Args args,
                const __grid_constant__ TmaDescriptor tma_a, const __grid_constant__ TmaDescriptor tma_b,
                const __grid_constant__ TileMaps<HopperGemmTraits<T, kAKMajor, kBKMajor, BM, BN, STAGES, kPingPong, 1,
                                                                  Epilogue>::kTileMaps> tile_maps) {
    detail::hopper_gemm_body<T, kAKMajor, kBKMajor, BM, BN, STAGES, kPingPong, 1, Epilogue>(problem, args, tma_a,
                                                                                          tma_b, tile_maps);
}

// Clusters of 2 CTAs along M that share B by TMA multicast. The grid must be a multiple of 2 (the host sizes it
// from the clusters that fit at once).
template <class T, bool kAKMajor, bool kBKMajor, int BM, int BN, int STAGES, bool kPingPong, class Epilogue>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(384, 1)
    hopper_gemm_pair(const GemmProblem problem, const typename Epilogue::Args args,
                     const __grid_constant__ TmaDescriptor tma_a, const __grid_constant__ TmaDescriptor tma_b,
                     const __grid_constant__ TileMaps<HopperGemmTraits<T, kAKMajor, kBKMajor, BM, BN, STAGES,
                                                                       kPingPong, 2, Epilogue>::kTileMaps> tile_maps) {
    detail::hopper_gemm_body<T, kAKMajor, kBKMajor, BM, BN, STAGES, kPingPong, 2, Epilogue>(problem, args, tma_a,
                                                                                          tma_b, tile_maps);
}

}  // namespace coda
