// Tile inputs and outputs staged in shared memory for the Hopper mainloop's epilogue. sm_80 and newer
// (cp.async); NVRTC, no host headers.
//
// Why: a visit touches 4-8 bytes of a row at 8 rows per warp, so reading inputs and writing outputs straight
// from the accumulator layout moves half-sectors and waits one memory latency per batch of visits; measured on
// an H200, such an epilogue streams about 1 TB/s and does not overlap the mainloop. Staged, the global side
// moves whole 16-byte units of whole rows.
//
//   - Inputs (StagedTileInputs): the consumer warpgroup that will visit a tile's rows copies them (cp.async,
//     16 bytes a copy) when it starts that tile's mainloop; by the epilogue they have landed, and the visits
//     read shared memory.
//   - Outputs (StagedTileOutputs): the visits of one column chunk (kChunkSlots column slots = 8 * kChunkSlots
//     columns) write shared memory; then the warpgroup writes the chunk's rows out with 16-byte stores.
//
// Contract:
//   - Layout: tile input or output i occupies kRows rows of pitch(i) bytes, in the order of the Epilogue's
//     tables (kTileInputs / tile_input_pair_bytes / tile_input, and likewise for outputs). A row holds the
//     tile's (inputs) or chunk's (outputs) column pairs of pair_bytes(i) bytes each, plus 16 bytes of padding:
//     the 8 rows a warp visits at once then start in 8 different 16-byte bank groups (conflict-free).
//   - Staging needs 16-byte units: every staged tensor's base and row pitch must be multiples of 16 bytes (as
//     for TMA). stageable(args) checks that at run time; the mainloop otherwise visits with GlobalTiles.
//   - Rows outside M and columns outside N are neither copied nor written; no visit touches them.
//   - Synchronization is the caller's (a named barrier over the warpgroup): between the copies' completion
//     (cp.async wait) and the first read; between the last read and the next copy; between a chunk's visits
//     and its write-out; between the write-out and the next chunk's visits.
#pragma once

#include "coda/epilogue_contract.cuh"
#include "coda/mma_sync_ops.cuh"

namespace coda {

namespace detail {

// Copies `bytes` (a multiple of `granule`: 2, 4 or 8) from shared memory to global memory, `granule` bytes at a
// time: the part of a 16-byte unit that lies inside N.
__device__ __forceinline__ void copy_out_partial(unsigned src, unsigned char* dst, int bytes, int granule) {
    for (int b = 0; b < bytes; b += granule) {
        const SharedReader at{src + b};
        if (granule == 2)
            *reinterpret_cast<unsigned short*>(dst + b) = at.get<unsigned short>();
        else if (granule == 4)
            *reinterpret_cast<unsigned*>(dst + b) = at.get<unsigned>();
        else
            *reinterpret_cast<uint2*>(dst + b) = at.get<uint2>();
    }
}

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

}  // namespace detail

// The shared-memory layout both directions use (see the contract above): the tensors of Table, each kRows rows of
// kColumns / 2 column pairs plus 16 bytes of padding, and where the buffer sits in the output.
template <class Table, int kRows, int kColumns>
struct PaddedRows {
    static constexpr int kCount = Table::kCount;
    __host__ __device__ static constexpr int pair_bytes(int i) { return Table::pair_bytes(i); }
    __host__ __device__ static constexpr int row_bytes(int i) { return kColumns / 2 * pair_bytes(i); }
    __host__ __device__ static constexpr int pitch(int i) { return row_bytes(i) + 16; }
    __host__ __device__ static constexpr int offset(int i) { return i == 0 ? 0 : offset(i - 1) + kRows * pitch(i - 1); }
    static constexpr int kBytes = offset(kCount);

    // 32-bit shared addresses throughout: generic 64-bit pointers would cost the epilogue registers.
    unsigned buffer;  // shared-window address of kBytes, 16-byte aligned
    int m0;           // global row of buffer row 0
    int n0;           // global column of buffer column pair 0

    // Whether every tensor's base and row pitch are multiples of 16 bytes.
    template <class Args>
    __device__ static bool stageable(const Args& args) {
        bool all = true;
        for (int i = 0; i < kCount; ++i) {
            const TileView v = Table::view(args, i);
            all = all && ((reinterpret_cast<unsigned long long>(v.base) | static_cast<unsigned long long>(v.row_bytes)) &
                          15ull) == 0;
        }
        return all;
    }

    // Where tensor i's column pair of the visit at c lies in the buffer.
    __device__ unsigned at(int i, const Coord& c) const {
        return buffer + offset(i) + (c.m - m0) * pitch(i) + ((c.n - n0) / 2) * pair_bytes(i);
    }
};

template <class Epilogue, int kRows, int BN>
struct StagedTileInputs : PaddedRows<detail::TileInputTable<Epilogue>, kRows, BN> {
    using Rows = PaddedRows<detail::TileInputTable<Epilogue>, kRows, BN>;
    using Rows::kCount;
    using Rows::offset;
    using Rows::pair_bytes;
    using Rows::pitch;
    using Rows::row_bytes;

    // The visit's read of tile input i (the generated Epilogue::load calls it); the global pointer is unused.
    template <int V, class T, class R>
    __device__ void load(int i, const T*, const Coord& c, R (&out)[V]) const {
        coda::load_shared<T>(this->at(i, c), out);
    }

    // Issues the copies of buffer rows [first, first + rows) (tile rows m0 + first ...) by `threads` threads, this
    // one being `t`, as one cp.async group. The tile is clipped to M x N.
    __device__ void copy(const typename Epilogue::Args& args, int first, int rows, int t, int threads, int M,
                         int N) const {
        const int m0 = this->m0;
        const int n0 = this->n0;
        const int columns = N - n0 < BN ? N - n0 : BN;
#pragma unroll
        for (int i = 0; i < kCount; ++i) {
            const TileView v = Epilogue::tile_input(args, i);
            const int chunks = row_bytes(i) / 16;
            const int valid = columns / 2 * pair_bytes(i);  // bytes of a row inside the problem
            const unsigned char* src = v.base + static_cast<long long>(n0 / 2) * pair_bytes(i);
            const unsigned dst = this->buffer + offset(i);
            for (int idx = t; idx < rows * chunks; idx += threads) {
                const int r = first + idx / chunks;
                const int chunk = idx % chunks;
                const int bytes = valid - chunk * 16;
                if (m0 + r >= M || bytes <= 0) continue;
                detail::cp_async_16(dst + r * pitch(i) + chunk * 16,
                                    src + static_cast<long long>(m0 + r) * v.row_bytes + chunk * 16,
                                    bytes < 16 ? bytes : 16);
            }
        }
        detail::cp_async_commit();
    }
};

template <class Epilogue, int kRows, int kChunkSlots>
struct StagedTileOutputs : PaddedRows<detail::TileOutputTable<Epilogue>, kRows, 8 * kChunkSlots> {
    static constexpr int kChunkColumns = 8 * kChunkSlots;
    using Rows = PaddedRows<detail::TileOutputTable<Epilogue>, kRows, kChunkColumns>;
    using Rows::kCount;
    using Rows::offset;
    using Rows::pair_bytes;
    using Rows::pitch;
    using Rows::row_bytes;

    // The visit's write of tile output i (the generated Epilogue::visit calls it); the global pointer is unused.
    template <int V, class T, class R>
    __device__ void store(int i, T*, const Coord& c, const R (&in)[V]) const {
        coda::store_shared<T>(this->at(i, c), in);
    }

    // Writes the chunk's rows [0, rows) inside M x N to global memory by `threads` threads, this one being `t`:
    // consecutive threads take consecutive 16-byte units of a row, so a warp writes whole sectors. (n0 is the
    // chunk's first column.)
    __device__ void write_out(const typename Epilogue::Args& args, int rows, int t, int threads, int M, int N) const {
        const int m0 = this->m0;
        const int n0 = this->n0;
        const int columns = N - n0 < kChunkColumns ? N - n0 : kChunkColumns;
#pragma unroll
        for (int i = 0; i < kCount; ++i) {
            const TileView v = Epilogue::tile_output(args, i);
            const int units = row_bytes(i) / 16;
            const int valid = columns / 2 * pair_bytes(i);  // bytes of a row inside the problem
            unsigned char* const dst = v.base + static_cast<long long>(n0 / 2) * pair_bytes(i);
            const unsigned src = this->buffer + offset(i);
            for (int idx = t; idx < rows * units; idx += threads) {
                const int r = idx / units;
                const int unit = idx % units;
                const int bytes = valid - unit * 16;
                if (m0 + r >= M || bytes <= 0) continue;
                unsigned char* const to = dst + static_cast<long long>(m0 + r) * v.row_bytes + unit * 16;
                const unsigned from = src + r * pitch(i) + unit * 16;
                if (bytes >= 16)
                    *reinterpret_cast<uint4*>(to) = detail::SharedReader{from}.get<uint4>();
                else
                    detail::copy_out_partial(from, to, bytes, pair_bytes(i) < 8 ? pair_bytes(i) : 8);
            }
        }
    }
};

// Whether a tile sink stages outputs (the visits then go chunk by chunk, each followed by its write-out).
template <class Out>
struct StagesOutputs {
    static constexpr bool value = false;
};
template <class Epilogue, int kRows, int kChunkSlots>
struct StagesOutputs<StagedTileOutputs<Epilogue, kRows, kChunkSlots>> {
    static constexpr bool value = true;
};

// What the Hopper mainloop's visits read and write through: tile inputs from In (StagedTileInputs or
// GlobalTiles), tile outputs to Out (StagedTileOutputs or GlobalTiles).
template <class In, class Out>
struct HopperTiles {
    static constexpr bool kStagedOutputs = StagesOutputs<Out>::value;
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
