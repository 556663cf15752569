// The Hopper mainloop's pipelines (hopper_gemm.cuh): its tuning constants, the ring position every mbarrier ring
// shares (PipelineState), the dynamic tile order's feed of items (the order itself: tile_order.cuh), and the two
// producer roles: the operands' TMA loads into the stage ring and the tile inputs' TMA loads into the input ring; plus
// one stage's wgmmas, which the consumers issue. sm_90a; NVRTC, no host headers.
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

// The dynamic tile order (hopper_rules::kDynamicTiles): the operand producer decides its CTA's items as it goes and
// hands each one to the consumers and the tile-input loader through a ring of kTileFeedSlots items in shared memory,
// with a full and an empty mbarrier per slot. A CTA's first unit is its own index, as in the round-robin order; the
// next ones come from a counter in global memory (after GemmProblem::partial_flags), so a CTA that runs faster takes
// more of them. Once the counter passes the stream-K region (TileOrder::shared_first), each CTA goes on with its own
// items of that region, then an end item (tm < 0) for each ping-pong consumer's next turn.
constexpr int kTileFeedSlots = 4;

struct TileFeed {
    WorkItem* items;       // kTileFeedSlots of them, in shared memory
    unsigned full, empty;  // their mbarriers (shared-window addresses)

    // Item `local` for a reader, false at the end. kWholeWarps: every thread of the reading warps calls this, and
    // lane 0 of each frees the slot once the warp has read it; else the one calling thread frees it.
    template <bool kWholeWarps>
    __device__ bool take(int local, WorkItem& w) const {
        const auto slot = PipelineState<kTileFeedSlots>::at(local);
        sm90::mbarrier_wait(full + 8 * slot.index, slot.phase);
        w = items[slot.index];
        if (kWholeWarps) {
            __syncwarp();
            if (threadIdx.x % 32 == 0) sm90::mbarrier_arrive(empty + 8 * slot.index);
        } else {
            sm90::mbarrier_arrive(empty + 8 * slot.index);
        }
        return w.tm >= 0;
    }
    // The producer's side: once every reader has taken the slot's previous item, item `local` is w.
    __device__ void put(int local, const WorkItem& w) const {
        const auto slot = PipelineState<kTileFeedSlots>::at(local);
        sm90::mbarrier_wait(empty + 8 * slot.index, slot.phase ^ 1);
        items[slot.index] = w;
        sm90::mbarrier_arrive(full + 8 * slot.index);  // (arrive releases the item's stores to the readers' wait)
    }
};

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
// then loads A and B into it by TMA, completing on the stage's full barrier. With the dynamic tile order it also
// decides the items and feeds them to the other roles (TileFeed); `counters` are the workspace's (kernel_abi.cuh;
// null without a workspace: the round-robin units, still fed).
template <class Tr>
__device__ __forceinline__ void hopper_produce(unsigned stages_base, unsigned full, unsigned empty,
                                               const TileOrder<Tr::kClusterM, Tr::kClusterN, Tr::kStreamK>& order,
                                               int rank,
                                               const TmaDescriptor* tma_a, const TmaDescriptor* tma_b,
                                               const TileFeed& feed, unsigned* counters) {
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
            // l2_prefetch: the K-major boxes of this item's k-tile kL2PrefetchTiles ahead are asked of L2 before the
            // wait for a free stage, so that DRAM's latency is paid ahead of the load.
            if constexpr (Tr::kL2Prefetch) {
                const int ahead = kt + hopper_rules::kL2PrefetchTiles;
                if (ahead < w.k_begin + w.k_tiles) {
                    if constexpr (Tr::kAKMajor)
                        sm90::tma_prefetch_2d(tma_a, ahead * Tr::BK, m0 + a_share * Tr::kABoxRows);
                    if constexpr (Tr::kBKMajor)
                        sm90::tma_prefetch_2d(tma_b, ahead * Tr::BK, n0 + b_share * Tr::kBBoxRows);
                }
            }
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
    if constexpr (!Tr::kDynamicTiles) {
        for (int local = 0; local < order.count; ++local) load_item(order.item(local, rank));
    } else {
        DynamicOrder<Tr::kClusterM, Tr::kClusterN, Tr::kStreamK> dynamic(order);
        // The counter's value before this claim; null counters: the unit taken now, so that the next is a grid
        // further (the round-robin units, still fed). The address adds the lane, 0 for this thread: one ptxas cannot
        // prove warp-uniform keeps the atomic whole, so that nothing waits for it before advance().
        const auto claim = [&] {
            return counters != nullptr
                       ? static_cast<int>(sm90::fetch_add_relaxed_gpu(counters + sm90::lane_id(), 1u))
                       : dynamic.unit;
        };
        for (int local = 0;; ++local) {
            WorkItem w;
            int ticket = -1;
            if (!dynamic.next(order, local, rank, claim, w, ticket)) {
                // Ends for both ping-pong consumers (each looks at every other item).
                WorkItem end{};
                end.tm = -1;
                feed.put(local, end);
                feed.put(local + 1, end);
                break;
            }
            feed.put(local, w);
            load_item(w);
            dynamic.advance(order, ticket);
        }
        // The last CTA done taking units zeroes the counters for the next launch: every CTA's last atomicAdd on
        // counters[0] (its result already used) precedes its arrival on counters[1].
        if (counters != nullptr) {
            __threadfence();
            if (atomicAdd(counters + 1, 1u) == gridDim.x - 1) {
                atomicExch(counters, 0u);
                atomicExch(counters + 1, 0u);
            }
        }
    }
}

// The tile-input loader (one thread of the producer warpgroup, beside the operand producer): for every tile of
// this CTA in order (as fed, with the dynamic tile order), every chunk of kChunkColumns columns, loads the tile
// inputs' BM rows of the chunk into the next buffer of the ring once its visits are done with it. Ring position p
// uses buffer p % kHopperInputSlots.
template <class Tr>
__device__ __forceinline__ void hopper_load_tile_inputs(const TmaDescriptor* maps, unsigned buffers, unsigned full,
                                                        unsigned empty,
                                                        const TileOrder<Tr::kClusterM, Tr::kClusterN, Tr::kStreamK>&
                                                            order,
                                                        int rank, int n, const TileFeed& feed) {
    using In = typename Tr::StagedIn;
    constexpr int BM = Tr::kBM, BN = Tr::kBN;
    int position = 0;
    for (int local = 0; Tr::kDynamicTiles || local < order.count; ++local) {
        WorkItem w;
        if constexpr (Tr::kDynamicTiles) {
            if (!feed.template take<false>(local, w)) break;
        } else {
            w = order.item(local, rank);
        }
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
// types): the stage's first wgmma overwrites acc instead of adding to it (a block-scaled k-block's own sum).
template <class Tr, bool kFresh = false>
__device__ __forceinline__ void hopper_mma_stage(unsigned a_low, unsigned b_low, float (&acc)[Tr::kM64][Tr::kBN / 2]) {
    using T = typename Tr::Element;
    constexpr bool kAKMajor = Tr::kAKMajor, kBKMajor = Tr::kBKMajor;
    constexpr int BN = Tr::kBN;
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
