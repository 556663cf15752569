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
//   - Outputs (TmaTileOutputs): the visits of one chunk write a consumer warpgroup's rows of it into shared
//     memory; then one thread stores the chunk with TMA, while the visits of the next chunk go on (two buffers
//     per warpgroup where shared memory allows, else one).
//
// Contract:
//   - Tensors are numbered as in the Epilogue's tables (kTileInputs / tile_input_pair_bytes / tile_input, and
//     likewise for outputs); the layout of a chunk in shared memory is SwizzledChunk's.
//   - Staging needs 16-byte units: every tile tensor's base and row pitch must be multiples of 16 bytes (TMA's
//     rule). detail::aligned_16 checks that at run time; the mainloop otherwise visits with GlobalTiles.
//   - Rows outside M and columns outside N are never written (TMA zero-fills them on input); no visit reads them.
//   - Synchronization is the caller's (hopper_gemm.cuh): the input ring's mbarriers between a chunk's load and
//     its visits and between its visits and the next load into its buffer; for outputs, a proxy fence and a
//     barrier over the warpgroup between a chunk's visits and its store, and the storing thread's bulk-group
//     wait plus a barrier between the store's reading of a buffer and the next visits that write it.
#pragma once

#include "coda/epilogue_contract.cuh"
#include "coda/sm90_ops.cuh"

namespace coda {

namespace detail {

// The Epilogue's table of tile inputs or of tile outputs, seen alike.
template <class Epilogue>
struct TileInputTable {
    static constexpr int kCount = Epilogue::kTileInputs;
    __host__ __device__ static constexpr int pair_bytes(int i) { return Epilogue::tile_input_pair_bytes(i); }
    __device__ static TileView view(const typename Epilogue::Args& args, int i) { return Epilogue::tile_input(args, i); }
};
template <class Epilogue>
struct TileOutputTable {
    static constexpr int kCount = Epilogue::kTileOutputs;
    __host__ __device__ static constexpr int pair_bytes(int i) { return Epilogue::tile_output_pair_bytes(i); }
    __device__ static TileView view(const typename Epilogue::Args& args, int i) { return Epilogue::tile_output(args, i); }
};

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

}  // namespace detail

// The layout of one chunk of kChunkColumns columns x kRows rows of the tensors of Table, as TMA moves it: tensor
// i as boxes of span(i) bytes a row (32, 64 or 128: the chunk's row, or 128-byte parts of it), one after the
// other, each kRows x span(i) bytes and swizzled in the TMA mode of that span (16-byte unit u of row r sits at
// unit u ^ (bits 7.. of r * span)), so the 8 rows a warp visits at once fall in different banks. Every box
// starts on a 1024-byte boundary when the buffer does. The host encodes each tensor's map to match (tma_operands).
template <class Table, int kRows, int kChunkColumns>
struct SwizzledChunk {
    static constexpr int kCount = Table::kCount;
    __host__ __device__ static constexpr int pair_bytes(int i) { return Table::pair_bytes(i); }
    __host__ __device__ static constexpr int row_bytes(int i) { return kChunkColumns / 2 * pair_bytes(i); }
    __host__ __device__ static constexpr int span(int i) { return row_bytes(i) < 128 ? row_bytes(i) : 128; }
    __host__ __device__ static constexpr int boxes(int i) { return row_bytes(i) / span(i); }
    __host__ __device__ static constexpr int offset(int i) { return i == 0 ? 0 : offset(i - 1) + kRows * row_bytes(i - 1); }
    static constexpr int kBytes = offset(kCount);
    static_assert(kRows % 32 == 0, "coda: a TMA box of the epilogue needs a multiple of 32 rows (1024-byte boxes)");

    // 32-bit shared addresses throughout: generic 64-bit pointers would cost the epilogue registers.
    unsigned buffer;  // shared-window address of the chunk, 1024-byte aligned
    int m0;           // global row of buffer row 0
    int n0;           // global column of the chunk's first column

    // Where tensor i's column pair of the visit at c lies.
    __device__ unsigned at(int i, const Coord& c) const {
        const int r = c.m - m0;
        const int b = ((c.n - n0) / 2) * pair_bytes(i);  // byte of the pair in the chunk's row
        const int s = span(i);
        const int unit = ((b % s) >> 4) ^ ((r * s >> 7) & (s / 16 - 1));
        return buffer + offset(i) + (b / s) * kRows * s + r * s + (unit << 4) + (b & 15);
    }
    // The global coordinates (byte of the row, row) of box b of tensor i for the chunk at (m, n).
    __device__ static int box_x(int i, int b, int n) { return n / 2 * pair_bytes(i) + b * span(i); }
    __device__ static unsigned box_at(unsigned chunk, int i, int b) { return chunk + offset(i) + b * kRows * span(i); }
};

// Tile inputs loaded by TMA (the producer warpgroup's loader thread, hopper_gemm.cuh) into a ring of chunk
// buffers of all BM rows (kRows); the visits read them here.
template <class Epilogue, int kRows, int kChunkColumns>
struct TmaTileInputs : SwizzledChunk<detail::TileInputTable<Epilogue>, kRows, kChunkColumns> {
    using Chunk = SwizzledChunk<detail::TileInputTable<Epilogue>, kRows, kChunkColumns>;
    using Chunk::kCount;

    // The visit's read of tile input i (the generated Epilogue::load calls it); the global pointer is unused.
    template <int V, class T, class R>
    __device__ void load(int i, const T*, const Coord& c, R (&out)[V]) const {
        coda::load_shared<T>(this->at(i, c), out);
    }

    // Loader thread: the copies of the chunk at (m0, n0) into `dst`, completing on `bar` (kBytes in all).
    __device__ static void issue(const TmaDescriptor* maps, unsigned dst, unsigned bar, int m0, int n0) {
#pragma unroll
        for (int i = 0; i < kCount; ++i)
#pragma unroll
            for (int b = 0; b < Chunk::boxes(i); ++b)
                sm90::tma_load_2d(Chunk::box_at(dst, i, b), &maps[i], bar, Chunk::box_x(i, b, n0), m0);
    }
    // L2 prefetch of the chunk at (m0, n0).
    __device__ static void prefetch(const TmaDescriptor* maps, int m0, int n0) {
#pragma unroll
        for (int i = 0; i < kCount; ++i)
#pragma unroll
            for (int b = 0; b < Chunk::boxes(i); ++b) sm90::tma_prefetch_2d(&maps[i], Chunk::box_x(i, b, n0), m0);
    }
};

// Tile outputs: the visits of one chunk write a consumer warpgroup's kRows rows here; then one thread stores the
// chunk with TMA (rows beyond M and columns beyond N are not written).
template <class Epilogue, int kRows, int kChunkColumns>
struct TmaTileOutputs : SwizzledChunk<detail::TileOutputTable<Epilogue>, kRows, kChunkColumns> {
    using Chunk = SwizzledChunk<detail::TileOutputTable<Epilogue>, kRows, kChunkColumns>;
    using Chunk::kCount;

    // The visit's write of tile output i (the generated Epilogue::visit calls it); the global pointer is unused.
    template <int V, class T, class R>
    __device__ void store(int i, T*, const Coord& c, const R (&in)[V]) const {
        coda::store_shared<T>(this->at(i, c), in);
    }

    // The stores of this chunk, as one bulk group of the calling thread. The writes of every visiting thread must
    // be visible to the async proxy first (fence_proxy_async_shared, then a barrier).
    __device__ void issue(const TmaDescriptor* maps) const {
#pragma unroll
        for (int i = 0; i < kCount; ++i)
#pragma unroll
            for (int b = 0; b < Chunk::boxes(i); ++b)
                sm90::tma_store_2d(&maps[i], Chunk::box_at(this->buffer, i, b), Chunk::box_x(i, b, this->n0), this->m0);
        sm90::bulk_commit_group();
    }
};

// The tensor maps of a kernel's TMA-moved tile tensors (at least one, unused when there are none): the staged
// inputs', then the staged outputs', passed as one __grid_constant__ parameter after the operands' maps.
template <int kCount>
struct TileMaps {
    TmaDescriptor map[kCount];
};

// Whether a tile sink stages outputs (the visits then go chunk by chunk, each followed by its store).
template <class Out>
struct StagesOutputs {
    static constexpr bool value = false;
};
template <class Epilogue, int kRows, int kChunkColumns>
struct StagesOutputs<TmaTileOutputs<Epilogue, kRows, kChunkColumns>> {
    static constexpr bool value = true;
};
// Whether a tile source reads inputs from the TMA-loaded ring (the visits then wait for each chunk).
template <class In>
struct StagesInputs {
    static constexpr bool value = false;
};
template <class Epilogue, int kRows, int kChunkColumns>
struct StagesInputs<TmaTileInputs<Epilogue, kRows, kChunkColumns>> {
    static constexpr bool value = true;
};

// What the Hopper mainloop's visits read and write through: tile inputs from In (TmaTileInputs or
// GlobalTiles), tile outputs to Out (TmaTileOutputs or GlobalTiles).
template <class In, class Out>
struct HopperTiles {
    static constexpr bool kStagedOutputs = StagesOutputs<Out>::value;
    static constexpr bool kStagedInputs = StagesInputs<In>::value;
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
};

}  // namespace coda
