// The Hopper mainloop's epilogue side (hopper_gemm.cuh): the visits of one output tile, chunk by chunk where tile
// tensors are staged in shared memory (hopper_staging.cuh), and the L2 prefetch of what they will read. sm_90a;
// NVRTC, no host headers.
#pragma once

#include "coda/epilogue_contract.cuh"
#include "coda/hopper_pipeline.cuh"
#include "coda/hopper_staging.cuh"
#include "coda/sm90_ops.cuh"

namespace coda {
namespace detail {

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
// `barrier`). What the visits of a row share (Epilogue::RowValues) is computed once per row slot and tile, what
// those of a column pair share (ColValues) once per column slot and chunk (unchunked, once per visit): not once
// per visit. With Tiles::kVisitsBeyondN, column pairs past N are visited too, with no branch per visit: their
// column values are read at the last pair (in bounds), and row reductions leave their state as it was there
// (add_in_columns).
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
    // Row and column values are kept across visits only where they take few registers (with the reductions'
    // state, kHopperKeptValueBytes a thread); a graph with more computes its row values once per batch of visits, and its column values at
    // every visit: with the batch's loads where a batch of them fits, else just before the visit.
    // The reductions' state counts against the same registers.
    constexpr int kStateBytes = sizeof(typename Epilogue::template State<L>);
    constexpr int kRowBytes = sizeof(typename Epilogue::RowValues) * 2 * Tr::kM64;
    constexpr int kColBytes = sizeof(typename Epilogue::ColValues);
    constexpr bool kKeepRows = kStateBytes + kRowBytes <= kHopperKeptValueBytes;
    constexpr bool kKeepCols =
        kChunked && kStateBytes + (kKeepRows ? kRowBytes : 0) + kColBytes * kChunk <= kHopperKeptValueBytes;
    constexpr bool kColsWithLoads = !kKeepCols && kColBytes * kBatch <= 64;
    constexpr bool kBeyondN = Tiles::kVisitsBeyondN;
    // Where a visit reads its column values: its own pair, or past N the last one (column inputs are read in bounds).
    const auto col_coord = [&](const Coord& c) {
        return kBeyondN && c.n >= problem.n ? Coord{c.m, problem.n - 2, c.M, c.N, c.col_slot, c.row_slot} : c;
    };
    typename Epilogue::RowValues rows[kKeepRows ? 2 * Tr::kM64 : 1];
    if constexpr (kKeepRows) {
#pragma unroll
        for (int row_slot = 0; row_slot < 2 * Tr::kM64; ++row_slot) {
            const int m = m0 + L::slot_row(row_slot);
            if (m < problem.m) Epilogue::row_values(args, Coord{m, n0, problem.m, problem.n, 0, row_slot}, rows[row_slot]);
        }
    }
    // reduce_group's values first: a pass over the accumulator in registers, each row's groups combined over the
    // quad that shares the row (WgmmaLayout::combine_groups). The tile inputs it needs it reads from global memory
    // (L2: hopper_prefetch_epilogue brought them there during the mainloop), not from the ring: their chunks come
    // one at a time, for the visits.
    if constexpr (Epilogue::kGroupReductions > 0) {
#pragma unroll
        for (int i = 0; i < Tr::kM64; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row_slot = 2 * i + h;
                const int m = m0 + L::slot_row(row_slot);
                if (m >= problem.m) continue;
#pragma unroll
                for (int j = 0; j < BN / 8; ++j)
                    Epilogue::template group_visit<L>(args, st,
                                                      Coord{m, n0 + L::slot_col(j), problem.m, problem.n, j, row_slot},
                                                      row_slot, j, acc[i][4 * j + 2 * h], acc[i][4 * j + 2 * h + 1]);
            }
        Epilogue::template group_finish<L>(st, nullptr);
    }
#pragma unroll
    for (int c0 = 0; c0 < BN / 8; c0 += kChunk) {
        if constexpr (Tiles::kStagedOutputs) {
            tiles.out.n0 = n0 + 8 * c0;
            tiles.out.buffer = out_buffers + (c0 / kChunk) % Tr::kOutputBuffers * Tr::kStagedOutPerGroup;
        }
        int slot = 0;
        if constexpr (Tiles::kStagedInputs) {
            const auto chunk = PipelineState<kHopperInputSlots>::at(ring.first + c0 / kHopperChunkSlots);
            slot = chunk.index;
            sm90::mbarrier_wait(ring.full + 8 * slot, chunk.phase);
            tiles.in.buffer = ring.buffers + slot * Tr::kInputSlotBytes;
            tiles.in.n0 = n0 + 8 * c0;
        }
        // Kept: computed by the first row slot's visits with their loads (the lowest row: if it is outside M, so
        // are the others). Unchunked, a whole tile's column values would not fit in registers.
        typename Epilogue::ColValues cols[kKeepCols ? kChunk : 1];
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
                        // Row and column values not kept live in the batch alone: declared here, they cannot look
                        // live from one row slot to the next (their writes and reads are conditional).
                        typename Epilogue::RowValues batch_row;
                        if constexpr (!kKeepRows)
                            Epilogue::row_values(args, Coord{m, n0, problem.m, problem.n, 0, row_slot}, batch_row);
                        typename Epilogue::ColValues batch_cols[kBatch];
#pragma unroll
                        for (int j = j0; j < j0 + kBatch; ++j) {
                            const int n = n0 + L::slot_col(j);
                            if (kBeyondN || n < problem.n) {
                                const Coord c{m, n, problem.m, problem.n, j, row_slot};
                                if ((kKeepCols && row_slot == 0) || kColsWithLoads)
                                    Epilogue::col_values(args, col_coord(c),
                                                         kKeepCols ? cols[j - c0] : batch_cols[j - j0]);
                                Epilogue::template load<L>(args, c, in[j - j0], tiles);
                            }
                        }
#pragma unroll
                        for (int j = j0; j < j0 + kBatch; ++j) {
                            const int n = n0 + L::slot_col(j);
                            if (kBeyondN || n < problem.n) {
                                if constexpr (!kKeepCols && !kColsWithLoads)
                                    Epilogue::col_values(args, col_coord(Coord{m, n, problem.m, problem.n, j, row_slot}),
                                                         batch_cols[j - j0]);
                                Epilogue::template visit<L>(args, st, Coord{m, n, problem.m, problem.n, j, row_slot}, row_slot,
                                                            j, acc[i][4 * j + 2 * h], acc[i][4 * j + 2 * h + 1],
                                                            kKeepRows ? rows[row_slot] : batch_row, kKeepCols ? cols[j - c0] : batch_cols[j - j0],
                                                            in[j - j0], tiles);
                            }
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
            sm90::fence_async_shared();                            // this thread's writes of the chunk, for the TMA
            sm90::named_barrier_sync(barrier, kWarpgroupThreads);  // every thread's
            if (threadIdx.x % kWarpgroupThreads == 0) {
                tiles.out.issue(output_maps);
                // The TMA has read the buffer the next chunk writes: this chunk's, or with two, the previous one's.
                sm90::bulk_wait<Tr::kOutputBuffers - 1, true>();
            }
            sm90::named_barrier_sync(barrier, kWarpgroupThreads);
        }
    }
}

}  // namespace detail
}  // namespace coda
