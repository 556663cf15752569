// Tile inputs and outputs staged in shared memory for the Hopper mainloop's epilogue. sm_90a (TMA); NVRTC, no
// host headers.
//
// Why: a visit touches 4-8 bytes of a row at 8 rows per warp, so reading inputs and writing outputs straight
// from the accumulator layout moves half-sectors and waits one memory latency per batch of visits; measured on
// an H200, such an epilogue streams about 1 TB/s and does not overlap the mainloop. Staged, the global side
// moves whole rows of a chunk.
//
//   - Inputs (TmaTileInputs): a loader thread of the producer warpgroup copies each chunk of 32 columns of a
//     tile's inputs (all BM rows) with TMA into a small ring of buffers, ahead of the visits; the visits wait for
//     their chunk, read it from shared memory and free it.
//   - Outputs (StagedTileOutputs): the visits of one column chunk (kChunkSlots column slots = 8 * kChunkSlots
//     columns) write shared memory; then one thread of the warpgroup stores the chunk with TMA. (Written out by
//     every thread with 16-byte stores instead, the out-proj epilogue cost its concurrent mainloop ~3% a store.)
//   - 16-bit tensors of two lanes move as mma fragments (detail::moves_as_fragments): one ldmatrix / stmatrix.x4
//     per 8-row group and chunk carries four visits' pairs, and the visits read and write registers.
//   - Transposed outputs (store_transposed sinks) stage beside them as transposed chunks (TransposedChunk): the
//     chunk's columns are their rows, the warpgroup's rows their elements, and the same TMA store writes them out.
//     Written from the visits straight to global memory instead, each element is a store of its own to another row
//     (four 8-byte pieces of sectors a warp store for an FP8 copy).
//
// Contract:
//   - Tensors are numbered as in the Epilogue's tables (kTileInputs / tile_input_pair_bytes / tile_input, and
//     likewise for outputs).
//   - Layout: SwizzledChunk (TMA-swizzled boxes, one tensor map per tensor), for inputs and outputs alike.
//   - A visit's place in a chunk comes from its Coord's row and column slots through the mainloop's layout L
//     (WgmmaLayout: slot_row for the CTA's rows, group_row for a warpgroup's, chunk_col): the visits of a chunk are
//     those of its kChunkSlots column slots, and a chunk's m0 is the first row of the rows it holds.
//   - Staging needs 16-byte units: every tile tensor's base and row pitch must be multiples of 16 bytes (TMA's
//     rule), and every tile output's logical row too (a TMA store writes whole 16-byte units, whatever the tensor
//     map's bounds). detail::aligned_16 and detail::whole_row_units check that at run time; the mainloop otherwise
//     visits with GlobalTiles.
//   - Rows outside M and columns outside N are never written (TMA zero-fills them on input and clips them on
//     output, to the 16-byte units above). Visits past N (HopperTiles' kBeyondN) read them, and what they make
//     of them stays in the tile: a row reduction leaves its state as it was there (add_in_columns).
//   - Synchronization is the caller's: the input ring's mbarriers (hopper_gemm.cuh) between a chunk's load and
//     its visits and between its visits and the next load into its buffer; for outputs, a proxy fence by every
//     thread and a named barrier over the warpgroup between a chunk's visits and its TMA store, and the store's
//     read of shared memory (bulk_wait) and a second barrier before the next chunk's visits overwrite it.
#pragma once

#include "coda/epilogue_contract.cuh"
#include "coda/mma_sync_ops.cuh"
#include "coda/sm90_ops.cuh"

namespace coda {

namespace detail {

// The Epilogue's table of tile inputs or of tile outputs, seen alike.
template <class Epilogue>
struct TileInputTable {
    static constexpr int kCount = Epilogue::kTileInputs;
    __host__ __device__ static constexpr int pair_bytes(int i) { return Epilogue::tile_input_pair_bytes(i); }
    __host__ __device__ static constexpr int element_bytes(int i) { return Epilogue::tile_input_element_bytes(i); }
    __device__ static TileView view(const typename Epilogue::Args& args, int i) { return Epilogue::tile_input(args, i); }
};
template <class Epilogue>
struct TileOutputTable {
    static constexpr int kCount = Epilogue::kTileOutputs;
    __host__ __device__ static constexpr int pair_bytes(int i) { return Epilogue::tile_output_pair_bytes(i); }
    __host__ __device__ static constexpr int element_bytes(int i) { return Epilogue::tile_output_element_bytes(i); }
    __device__ static TileView view(const typename Epilogue::Args& args, int i) { return Epilogue::tile_output(args, i); }
};

// The column pair of the visit at c within its chunk of kSlots column slots (layout L's chunk_col).
template <class L, int kSlots>
__device__ __forceinline__ unsigned chunk_pair(const Coord& c) {
    return static_cast<unsigned>(L::template chunk_col<kSlots>(c.col_slot)) / 2;
}

// Whether every tensor of Table has its base and row pitch on multiples of 16 bytes (as staging and TMA need).
template <class Table, class Args>
__device__ bool aligned_16(const Args& args) {
    bool all = true;
    for (int i = 0; i < Table::kCount; ++i) {
        const TileView v = Table::view(args, i);
        all = all && ((reinterpret_cast<unsigned long long>(v.base) | static_cast<unsigned long long>(v.row_bytes)) &
                      15ull) == 0;
    }
    return all;
}

// Whether every tensor of Table's logical rows (n / 2 column pairs) are whole 16-byte units. A TMA store writes
// whole 16-byte units even where a row ends inside one: the rest of that unit is the row's padding (or the next
// row), someone else's data when the tensor is a view into a wider one. Measured on an H200: an f16 output of
// N = 676 (1352 bytes a row) had columns 676..679 of every row overwritten. So staged outputs need this.
template <class Table>
__device__ bool whole_row_units(int n) {
    bool all = true;
    for (int i = 0; i < Table::kCount; ++i) all = all && (n / 2 * Table::pair_bytes(i)) % 16 == 0;
    return all;
}

// Whether every transposed output (store_transposed sink) of Epilogue has its base and row pitch on multiples of 16
// bytes, and its rows of m elements are whole 16-byte units (a TMA store of a transposed chunk writes whole units).
template <class Epilogue>
__device__ bool transposed_stageable(const typename Epilogue::Args& args, int m) {
    bool all = true;
    for (int j = 0; j < Epilogue::kTransposedStores; ++j) {
        const TileView v = Epilogue::transposed_output(args, j);
        all = all && ((reinterpret_cast<unsigned long long>(v.base) | static_cast<unsigned long long>(v.row_bytes) |
                       static_cast<unsigned long long>(m * Epilogue::transposed_output_element_bytes(j))) & 15ull) == 0;
    }
    return all;
}

// Whether tensor i of Table moves as mma fragments: two 16-bit elements a visit, one 32-bit register, so that one
// ldmatrix / stmatrix.x4 carries four column slots of an 8-row group (four visits) for the whole warp. The staged
// visits then issue a quarter of the shared-memory instructions. Why: on ping-pong, the epilogue's shared-memory
// and L1 instructions slow the other consumer's concurrent mainloop (wgmma reads its operands from shared
// memory). Measured on an H200 (docs/PERFORMANCE.md, 2026-12-03): ldmatrix cut the residual read's cost by a
// quarter; stmatrix left the staged stores' cost where it was (their write-out by every thread remained, until
// TMA stores replaced it).
template <class Table>
__host__ __device__ constexpr bool moves_as_fragments(int i) {
    return Table::pair_bytes(i) == 4 && Table::element_bytes(i) == 2;
}

// The row address lane `lane` gives an ldmatrix / stmatrix.x4 whose matrix k (= lane / 8) is column slot k of a
// chunk: the row of the 8-row group that holds `row` (buffer-relative), and the slot's first byte in that row.
struct FragmentLane {
    int row;   // buffer row this lane addresses
    int byte;  // byte of its column slot's 8 columns in the chunk's row (16 bytes a slot)
    __device__ static FragmentLane of(int row, int lane) { return {row - lane / 4 + lane % 8, lane / 8 * 16}; }
};

}  // namespace detail

// The shared-memory layout of one chunk of staged tile tensors (inputs or outputs), as TMA moves them: for each
// tensor i of Table, kRows rows of the chunk's kChunkColumns columns, as boxes of span(i) bytes a row (32, 64 or
// 128: the chunk's row, or 128-byte parts of it), each swizzled by the TMA in the mode of its span, so that the 8
// rows a warp visits fall in different banks. The host encodes one tensor map per tensor to match (box {span(i)
// bytes, kRows}, coda_kernel_info).
template <class Table, int kRows, int kChunkColumns>
struct SwizzledChunk {
    static constexpr int kCount = Table::kCount;
    __host__ __device__ static constexpr int pair_bytes(int i) { return Table::pair_bytes(i); }
    __host__ __device__ static constexpr int row_bytes(int i) { return kChunkColumns / 2 * pair_bytes(i); }
    __host__ __device__ static constexpr int span(int i) { return row_bytes(i) < 128 ? row_bytes(i) : 128; }
    __host__ __device__ static constexpr int boxes(int i) { return row_bytes(i) / span(i); }
    __host__ __device__ static constexpr int offset(int i) { return i == 0 ? 0 : offset(i - 1) + kRows * row_bytes(i - 1); }
    static constexpr int kBytes = offset(kCount);
    // Swizzled boxes must start on 1024-byte boundaries (the buffer's are; each box is kRows x span bytes).
    static_assert(kRows % 32 == 0, "coda: a staged TMA box needs a multiple of 32 rows");

    // 32-bit shared addresses throughout: generic 64-bit pointers would cost the epilogue registers.
    unsigned buffer;  // shared-window address of this chunk's buffer, 1024-byte aligned
    int m0;           // global row of buffer row 0
    int n0;           // global column of the chunk's first column

    // Where byte b of row r of tensor i's chunk lies: boxes of span(i) bytes a row, each swizzled by the TMA in
    // 16-byte units.
    // Unsigned, with the row's bits XORed into b: the visits' r and b are a few per-thread values plus constants.
    __device__ unsigned address(int i, unsigned r, unsigned b) const {
        const unsigned s = span(i);
        return buffer + box_offset(i, static_cast<int>(b / s)) + r * s + ((b % s) ^ (((r * s >> 7) & (s / 16 - 1)) << 4));
    }
    // Tensor i's box b of a chunk: its offset in the chunk's buffer, and the TMA's byte column of the box in a
    // chunk whose first column is n0 (the row coordinate is the chunk's first row).
    __host__ __device__ static constexpr int box_offset(int i, int b) { return offset(i) + b * kRows * span(i); }
    __host__ __device__ static constexpr int box_column(int n0, int i, int b) {
        return n0 / 2 * pair_bytes(i) + b * span(i);
    }
    // Where this lane points an ldmatrix / stmatrix.x4 of the 8-row group holding global row m (fragment_address).
    __device__ detail::FragmentLane fragment_lane(int m) const {
        return detail::FragmentLane::of(m - m0, static_cast<int>(threadIdx.x) % 32);
    }
    __device__ unsigned fragment_address(int i, const detail::FragmentLane& lane) const {
        return address(i, lane.row, lane.byte);
    }
};

// The shared-memory layout of one chunk's transposed outputs (store_transposed sinks), after the chunk's other
// outputs: for sink j, rows(j) rows (the chunk's kChunkColumns / 2 column pairs times the lanes of j's value: the
// output's rows) of kRows elements (the warpgroup's rows), as boxes of span(j) bytes a row swizzled by the TMA in
// the mode of that span, as SwizzledChunk lays out its tensors. A visit's elements of one row go to 8 rows of the
// chunk at the same byte; the swizzle spreads them over the banks. The host encodes one tensor map per sink (box
// {span(j) bytes, rows(j)}, coordinates {m0 * element_bytes(j), first output row}).
template <class Epilogue, int kRows, int kChunkColumns>
struct TransposedChunk {
    static constexpr int kCount = Epilogue::kTransposedStores;
    __host__ __device__ static constexpr int lanes(int j) { return Epilogue::transposed_output_lanes(j); }
    __host__ __device__ static constexpr int element_bytes(int j) { return Epilogue::transposed_output_element_bytes(j); }
    __host__ __device__ static constexpr int rows(int j) { return kChunkColumns / 2 * lanes(j); }
    __host__ __device__ static constexpr int row_bytes(int j) { return kRows * element_bytes(j); }
    __host__ __device__ static constexpr int span(int j) { return row_bytes(j) < 128 ? row_bytes(j) : 128; }
    __host__ __device__ static constexpr int boxes(int j) { return row_bytes(j) / span(j); }
    __host__ __device__ static constexpr int offset(int j) { return j == 0 ? 0 : offset(j - 1) + rows(j - 1) * row_bytes(j - 1); }
    __host__ __device__ static constexpr int box_offset(int j, int b) { return offset(j) + b * rows(j) * span(j); }
    static constexpr int kBytes = offset(kCount);
    // Swizzled boxes start on 1024-byte boundaries: every sink's part is a multiple of that.
    static_assert(kChunkColumns / 2 * kRows % 1024 == 0, "coda: a transposed chunk must be whole swizzle atoms");

    // Where byte b of row r of sink j's chunk lies (offset from the chunk's transposed part).
    __device__ static unsigned address(int j, unsigned r, unsigned b) {
        const unsigned s = span(j);
        return box_offset(j, static_cast<int>(b / s)) + r * s + ((b % s) ^ (((r * s >> 7) & (s / 16 - 1)) << 4));
    }
};

// Tile inputs loaded by TMA (the producer warpgroup's loader thread, hopper_gemm.cuh) into a ring of chunk
// buffers, one SwizzledChunk of the CTA tile's rows each.
template <class Epilogue, class L, int kRows, int kChunkColumns>
struct TmaTileInputs : SwizzledChunk<detail::TileInputTable<Epilogue>, kRows, kChunkColumns> {
    using Table = detail::TileInputTable<Epilogue>;
    using Chunk = SwizzledChunk<Table, kRows, kChunkColumns>;
    using Chunk::kCount;

    static constexpr int kChunkSlots = kChunkColumns / 8;
    static_assert(kChunkSlots == 4, "coda: a fragment load (ldmatrix.x4) covers 4 column slots");

    // Fragment inputs (detail::moves_as_fragments): the chunk's four column slots of the current 8-row group.
    unsigned frag[kCount > 0 ? kCount : 1][kChunkSlots] = {};

    // Warp-wide, before the visits of the 8-row group holding global row m: loads that group's fragments.
    __device__ void fill(int m) {
        const detail::FragmentLane lane = this->fragment_lane(m);
#pragma unroll
        for (int i = 0; i < kCount; ++i)
            if (detail::moves_as_fragments<Table>(i)) detail::ldmatrix_x4(frag[i], this->fragment_address(i, lane));
    }

    // The visit's read of tile input i (the generated Epilogue::load calls it); the global pointer is unused.
    template <int V, class T, class R>
    __device__ void load(int i, const T*, const Coord& c, R (&out)[V]) const {
        if constexpr (V == 2 && sizeof(T) == 2) {
            if (detail::moves_as_fragments<Table>(i)) {
                coda::unpack_pair<T>(frag[i][c.col_slot % kChunkSlots], out);
                return;
            }
        }
        coda::load_shared<T>(at(i, c), out);
    }

    // Where tensor i's column pair of the visit at c lies: the chunk holds the CTA's rows. From the visit's slots
    // (constants in the unrolled visits) and the lane, not c.m - m0 and c.n - n0: then each address is a few
    // per-thread values and constants. (From the coordinates, signed divisions and swizzles took a fifth of the FP8
    // SwiGLU backward epilogue's instructions.)
    __device__ unsigned at(int i, const Coord& c) const {
        return this->address(i, static_cast<unsigned>(L::slot_row(c.row_slot)),
                             detail::chunk_pair<L, kChunkSlots>(c) * Chunk::pair_bytes(i));
    }

    // Loader thread: the copies of the chunk at (m0, n0) into `dst`, completing on `bar` (kBytes in all).
    __device__ static void issue(const TmaDescriptor* maps, unsigned dst, unsigned bar, int m0, int n0) {
#pragma unroll
        for (int i = 0; i < kCount; ++i)
#pragma unroll
            for (int b = 0; b < Chunk::boxes(i); ++b)
                sm90::tma_load_2d(dst + Chunk::box_offset(i, b), &maps[i], bar, Chunk::box_column(n0, i, b), m0);
    }
    // L2 prefetch of the chunk at (m0, n0).
    __device__ static void prefetch(const TmaDescriptor* maps, int m0, int n0) {
#pragma unroll
        for (int i = 0; i < kCount; ++i)
#pragma unroll
            for (int b = 0; b < Chunk::boxes(i); ++b)
                sm90::tma_prefetch_2d(&maps[i], Chunk::box_column(n0, i, b), m0);
    }
};

// The tensor maps of a kernel's TMA-loaded tile inputs (at least one, unused when there are none), passed as one
// __grid_constant__ parameter after the operands' maps.
template <int kCount>
struct TileMaps {
    TmaDescriptor map[kCount];
};

// Tile outputs staged for TMA stores: the visits of one column chunk write one SwizzledChunk of the consumer
// warpgroup's rows, then one thread stores it (issue). Only the rows and columns inside M x N reach global memory:
// the tensor maps clip the boxes, so slots a visit skipped (beyond N or M) may hold stale values.
template <class Epilogue, class L, int kRows, int kChunkSlots>
struct StagedTileOutputs : SwizzledChunk<detail::TileOutputTable<Epilogue>, kRows, 8 * kChunkSlots> {
    static constexpr int kChunkColumns = 8 * kChunkSlots;
    static_assert(kChunkSlots == 4, "coda: a fragment store (stmatrix.x4) covers 4 column slots");
    using Table = detail::TileOutputTable<Epilogue>;
    using Chunk = SwizzledChunk<Table, kRows, kChunkColumns>;
    using Chunk::kCount;
    using Transposed = TransposedChunk<Epilogue, kRows, kChunkColumns>;
    // The chunk's buffer: the outputs' boxes, then the transposed outputs'.
    static constexpr int kBytes = Chunk::kBytes + Transposed::kBytes;
    static constexpr int kMaps = kCount + Transposed::kCount;

    // Fragment outputs (detail::moves_as_fragments): the chunk's four column slots of the current 8-row group,
    // written by flush(). Mutable: the generated visit holds the tiles by const reference.
    mutable unsigned frag[kCount > 0 ? kCount : 1][kChunkSlots] = {};

    // The visit's write of tile output i (the generated Epilogue::visit calls it); the global pointer is unused.
    template <int V, class T, class R>
    __device__ void store(int i, T*, const Coord& c, const R (&in)[V]) const {
        if constexpr (V == 2 && sizeof(T) == 2) {
            if (detail::moves_as_fragments<Table>(i)) {
                frag[i][c.col_slot % kChunkSlots] = coda::pack_pair<T>(in);
                return;
            }
        }
        coda::store_shared<T>(at(i, c), in);
    }

    // Where tensor i's column pair of the visit at c lies: the chunk holds the warpgroup's rows.
    __device__ unsigned at(int i, const Coord& c) const {
        return this->address(i, static_cast<unsigned>(L::group_row(c.row_slot)),
                             detail::chunk_pair<L, kChunkSlots>(c) * Chunk::pair_bytes(i));
    }

    // The visit's write of transposed output j: its V elements of row c.m into rows p * V + v of j's transposed
    // chunk, p the visit's column pair in the chunk; the global pointer is unused.
    template <int V, class T, class R>
    __device__ void store_transposed(int j, T*, long long, const Coord& c, int, const R (&in)[V]) const {
        const unsigned r = detail::chunk_pair<L, kChunkSlots>(c) * V;
        const unsigned b = static_cast<unsigned>(L::group_row(c.row_slot)) * Transposed::element_bytes(j);
        const unsigned base = this->buffer + Chunk::kBytes;
#pragma unroll
        for (int v = 0; v < V; ++v) {
            const R element[1] = {in[v]};
            coda::store_shared<T>(base + Transposed::address(j, r + v, b), element);
        }
    }

    // Warp-wide, after the visits of the 8-row group holding global row m: writes that group's fragments.
    __device__ void flush(int m) const {
        const detail::FragmentLane lane = this->fragment_lane(m);
#pragma unroll
        for (int i = 0; i < kCount; ++i)
            if (detail::moves_as_fragments<Table>(i)) sm90::stmatrix_x4(this->fragment_address(i, lane), frag[i]);
    }

    // One thread, once every thread's writes of the chunk are fenced (sm90::fence_async_shared) and behind a
    // barrier: the TMA stores of the chunk (maps: the outputs' tensor maps), as one bulk group.
    __device__ void issue(const TmaDescriptor* maps) const {
#pragma unroll
        for (int i = 0; i < kCount; ++i)
#pragma unroll
            for (int b = 0; b < Chunk::boxes(i); ++b)
                sm90::tma_store_2d(&maps[i], this->buffer + Chunk::box_offset(i, b), Chunk::box_column(this->n0, i, b),
                                   this->m0);
        // Transposed output j: the chunk's rows start at output row n0 / 2 * lanes(j), its elements at m0.
#pragma unroll
        for (int j = 0; j < Transposed::kCount; ++j)
#pragma unroll
            for (int b = 0; b < Transposed::boxes(j); ++b)
                sm90::tma_store_2d(&maps[kCount + j], this->buffer + Chunk::kBytes + Transposed::box_offset(j, b),
                                   this->m0 * Transposed::element_bytes(j) + b * Transposed::span(j),
                                   this->n0 / 2 * Transposed::lanes(j));
        sm90::bulk_commit();
    }
};

// What the Hopper mainloop's visits read and write through: tile inputs from In (TmaTileInputs or
// GlobalTiles), tile outputs to Out (StagedTileOutputs or GlobalTiles).
// Anything but GlobalTiles stages: the visits then go chunk by chunk, waiting for each input chunk in the ring
// and followed by each output chunk's TMA store. kBeyondN: the visits also run on column pairs past N (the kernel's
// traits decide: only where no visit reads or writes global memory).
template <class In, class Out, bool kBeyondN = false>
struct HopperTiles {
    static constexpr bool kStagedOutputs = !detail::SameType<Out, GlobalTiles>::value;
    static constexpr bool kStagedInputs = !detail::SameType<In, GlobalTiles>::value;
    static constexpr bool kVisitsBeyondN = kBeyondN;
    In in;
    Out out;
    template <int V, class T, class R>
    __device__ void load(int i, const T* p, const Coord& c, R (&v)[V]) const {
        in.template load<V>(i, p, c, v);
    }
    template <int V, class T, class R>
    __device__ void store(int i, T* p, const Coord& c, const R (&v)[V]) const {
        out.template store<V>(i, p, c, v);
    }
    // Staged with the other outputs (StagedTileOutputs), else straight to global memory.
    template <int V, class T, class R>
    __device__ void store_transposed(int j, T* p, long long ld, const Coord& c, int first_col, const R (&v)[V]) const {
        if constexpr (kStagedOutputs)
            out.template store_transposed<V>(j, p, ld, c, first_col, v);
        else
            coda::store_transposed<V>(p, ld, c, first_col, v);
    }
};

}  // namespace coda
