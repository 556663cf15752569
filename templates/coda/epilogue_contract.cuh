// The contract between a mainloop (GEMM or tile program) and a generated epilogue functor.
// Every mainloop template includes this header; every generated epilogue implements it. Compiles under
// NVRTC with no host headers.
//
// ---------------------------------------------------------------------------------------------------------
// Vocabulary. A kernel's output is M x N (N = full columns). A CTA owns one BM x BN tile at a time. Each
// thread owns a fixed set of (row, column pair) positions of that tile, described by a Layout:
//
//   struct Layout {
//     static constexpr int kBM, kBN;          // tile size in rows and full columns
//     static constexpr int kThreads;          // threads that take part in the epilogue of one tile
//     static constexpr int kRowSlots;         // distinct rows one thread visits per tile
//     static constexpr int kColSlots;         // distinct column pairs one thread visits per tile
//     static constexpr int kRowSharers;       // threads that visit any one row
//     static constexpr int kColSharers;       // threads that visit any one column pair
//     __device__ static int slot_row(int row_slot);  // tile-relative row of a row slot
//     __device__ static int slot_col(int col_slot);  // tile-relative EVEN full column of a column slot
//     __device__ static int row_sharer();            // this thread's index among a row's visitors
//     __device__ static int col_sharer();            // this thread's index among a column pair's visitors
//     __device__ static int thread_index();          // 0 .. kThreads-1
//     __device__ static void sync();                 // barrier over exactly the kThreads threads of the tile
//   };
//
// The map (thread, row_slot) -> (slot_row, row_sharer) must be a bijection onto [kBM] x [kRowSharers],
// and likewise (thread, col_slot) -> (slot_col / 2, col_sharer) onto [kBN / 2] x [kColSharers]. That is
// what makes reductions deterministic without atomics: every partial lands in its own shared-memory cell
// and is combined in a fixed order.
//
// ---------------------------------------------------------------------------------------------------------
// The generated functor (struct Epilogue) provides:
//
//   using Args = coda::EpilogueArgs<kSlots>;   // the binding slots, passed as one kernel parameter
//   template <class L> struct State;           // per-thread reduction partials (registers)
//   template <class L> static constexpr int scratch_floats();   // shared memory end_tile needs, in floats
//   template <class L> __device__ static void begin_tile(State<L>& st);
//   template <class L> __device__ static void prefetch(const Args& args, const coda::Coord& c);  // optional
//                                              // hint: L2 prefetch of the tile tensors visit(c) will read
//   struct RowValues;                          // what every visit of one row shares (row inputs and what is
//   __device__ static void row_values(const Args& args, const coda::Coord& c, RowValues& row);  // computed from
//                                              // them, scalars and constants), from c.m alone
//   struct ColValues;                          // likewise for one column pair (column inputs ...), from c.n
//   __device__ static void col_values(const Args& args, const coda::Coord& c, ColValues& col);
//                                              // (a mainloop may compute them once per row / column slot)
//   struct Inputs;                             // what one visit reads from tile inputs
//   template <class L, class Tiles = coda::GlobalTiles>
//   __device__ static void load(const Args& args, const coda::Coord& c, Inputs& in, const Tiles& tiles);
//                                              // tile inputs are read through tiles.load(i, pointer, c, out)
//   static constexpr int kTileInputs;          // tile inputs, numbered 0.. in graph order, for a mainloop that
//   __host__ __device__ static constexpr int tile_input_pair_bytes(int i);  // stages them in shared memory:
//   __host__ __device__ static constexpr int tile_input_element_bytes(int i);  // bytes per column pair and per
//   __device__ static coda::TileView tile_input(const Args& args, int i);    // element, where, and
//   __host__ __device__ static constexpr bool tile_input_transposed(int i);  // whether stored N x M
//                                              // (tile_input_transposed, read through tiles.load_transposed)
//   static constexpr int kTileOutputs;         // likewise the tile outputs (stores), which visit writes through
//   ... tile_output_pair_bytes(i), tile_output_element_bytes(i),            // tiles.store(i, pointer, c, value)
//       tile_output(args, i)
//   template <class L, class Tiles = coda::GlobalTiles>
//   __device__ static void visit(..., float acc1, const RowValues& row, const ColValues& col, const Inputs& in,
//                                const Tiles& tiles);      // visit with `row`, `col` and `in` loaded (a mainloop
//                                              // may load several visits' inputs before visiting)
//   __device__ static void visit(..., float acc1, const Inputs& in, const Tiles& tiles);  // computes row and col
//   template <class L> __device__ static void visit(const Args& args, State<L>& st, const coda::Coord& c,
//                                                   int row_slot, int col_slot, float acc0, float acc1);
//   template <class L> __device__ static void end_tile(const Args& args, State<L>& st, float* scratch,
//                                                      const coda::TileCoord& t);
//
// A mainloop, for every tile it owns:
//   1. calls begin_tile (every thread);
//   2. calls visit once for every (row_slot, col_slot) of this thread whose global row m < M and whose
//      global even column n < N (N is even; coda checks that at launch). acc0/acc1 are the accumulator
//      values at columns n and n+1 (tile programs pass 0.0f: their graphs have no accumulator);
//   3. calls end_tile from every thread of the Layout, with `scratch` pointing at scratch_floats<L>() floats
//      of shared memory that nothing else uses during the call. end_tile synchronizes those threads
//      (L::sync(): the whole CTA on the portable path, a named barrier over one tile's warpgroups on the
//      Hopper path, whose producer warp never joins) and writes the reduction partials of this tile.
// ---------------------------------------------------------------------------------------------------------
#pragma once

#include "coda/kernel_abi.cuh"
#include "coda/numeric.cuh"

namespace coda {

// One parameter slot per binding; pointers, leading dimensions and scalars all travel as 64-bit words,
// so host and device agree on the layout without sharing a struct definition.
template <int kSlots>
struct EpilogueArgs {
    unsigned long long slot[kSlots];
};

// Bit 63 of a scalar slot tags a device pointer to the f32 (user-space and UVA addresses never set it);
// untagged, the slot holds the f32 bits in its low word. A pointer is read when the kernel runs, so a value
// computed on the device (a loss gradient) needs no host sync and a captured CUDA graph sees each replay's value.
constexpr unsigned long long kDeviceScalarTag = 1ull << 63;

// A device scalar is read through the read-only path (nothing writes it while the kernel runs). With a plain load the
// compiler unswitched whole epilogues on the tag, to spare host scalars the load: lm_head_ce_backward carried its
// visits twice. (Codegen reads scalars with the row values, once per row slot: epilogue_codegen.cpp, hoisted.)
__device__ __forceinline__ float scalar_from_slot(unsigned long long slot) {
    if (slot & kDeviceScalarTag) return __ldg(reinterpret_cast<const float*>(slot & ~kDeviceScalarTag));
    return __uint_as_float(static_cast<unsigned int>(slot));
}

// Where a visit happens: global row m, global even full column n, and the problem bounds; col_slot and row_slot
// are the visit's slots (Layout) where a mainloop keeps a few visits' data in registers (the Hopper one's staged
// visits; others leave them 0).
struct Coord {
    int m;
    int n;
    int M;
    int N;
    int col_slot;
    int row_slot;
};

// Which tile end_tile closes: tile indices along M and N, and the problem bounds.
struct TileCoord {
    int tile_m;
    int tile_n;
    int M;
    int N;
};

// Where tile input or output i of an epilogue lives: its first element and the bytes between consecutive rows.
struct TileView {
    unsigned char* base;
    long long row_bytes;
};

// store_transposed (ops.def): a visit's V values of row m, columns first_col .. first_col + V - 1, written to
// out[column][m] (ld: out's row pitch), one element at a time. Pairs past N have no column to write.
template <int V, class T, class R>
__device__ __forceinline__ void store_transposed(T* out, long long ld, const Coord& c, int first_col, const R (&in)[V]) {
    if (c.n >= c.N) return;
#pragma unroll
    for (int v = 0; v < V; ++v) {
        const R element[1] = {in[v]};
        coda::store<1>(out + static_cast<long long>(first_col + v) * ld + c.m, element);
    }
}

// tile_input_transposed (ops.def): a visit's V values of row m, columns c.n .. c.n + V - 1, read from in[column][m]
// (ld: in's row pitch), one element at a time.
template <int V, class T, class R>
__device__ __forceinline__ void load_transposed(const T* in, long long ld, const Coord& c, R (&out)[V]) {
#pragma unroll
    for (int v = 0; v < V; ++v) {
        R element[1];
        coda::load<1>(in + static_cast<long long>(c.n + v) * ld + c.m, element);
        out[v] = element[0];
    }
}

// Where a visit's tile inputs come from and its tile outputs go, as every mainloop can do it: global memory
// at the visit's address. (The Hopper mainloop stages them in shared memory instead: hopper_staging.cuh; tile
// programs too, and their transposed outputs: tile_program.cuh.)
// kVisitsBeyondN: whether the mainloop also visits column pairs at or past N (reduce.cuh, add_in_columns); never
// where a visit touches global memory.
struct GlobalTiles {
    static constexpr bool kVisitsBeyondN = false;
    template <int V, class T, class R>
    __device__ void load(int, const T* p, const Coord&, R (&out)[V]) const {
        coda::load<V>(p, out);
    }
    template <int V, class T, class R>
    __device__ void store(int, T* p, const Coord&, const R (&in)[V]) const {
        coda::store<V>(p, in);
    }
    // tile_input_transposed input i (Epilogue::tile_input(args, i)).
    template <int V, class T, class R>
    __device__ void load_transposed(int, const T* in, long long ld, const Coord& c, R (&out)[V]) const {
        coda::load_transposed<V>(in, ld, c, out);
    }
    // store_transposed sink j (Epilogue::transposed_output(args, j)).
    template <int V, class T, class R>
    __device__ void store_transposed(int, T* out, long long ld, const Coord& c, int first_col, const R (&in)[V]) const {
        coda::store_transposed<V>(out, ld, c, first_col, in);
    }
};

}  // namespace coda
