// Tile programs: the epilogue contract applied to an M x N index space with no GEMM (acc0 = acc1 = 0), for
// graphs that only read tile inputs (RoPE backward, dlogits, the first RMSNorm statistic).
//
// Contract:
//   - Launch: grid = (ceil(M / 64), ceil(N / 128)), block = 256, dynamic shared memory = kSmemBytes.
//   - Each CTA owns one 64 x 128 tile: begin_tile, visit for every (row_slot, col_slot) inside [M] x [N]
//     (N even), end_tile with the shared memory before the staged outputs as scratch.
//   - Layout: a warp covers 32 consecutive column pairs of one row, so each visit's loads and stores are
//     coalesced (128 bytes per warp for a full-width bf16 tile); the 8 warps cover 4 rows x 64 pairs at a
//     time, and a thread walks 16 rows, 4 apart.
//   - Staging (TileProgramStaging): a tile program is bound by memory bandwidth, and visits that read 4 bytes of
//     a row each, one row after another, keep too few bytes in flight (measured on an H200: a copy reached 0.73 of
//     torch's copy bandwidth). So every thread first issues 16-byte cp.async copies of the whole tile's inputs into
//     shared memory (all of them in flight at once), the visits read and write shared memory, and the outputs go
//     out in 16-byte stores. A CTA stages only when every tile tensor's base and row pitch are multiples of 16 bytes
//     and its tile's rows end on a 16-byte unit (columns past N would otherwise be read or written); otherwise, and
//     for graphs whose staged tile would not fit kMaxStagedBytes, it visits global memory directly. Either way
//     each thread visits the same positions in the same order, so reductions stay deterministic and alike.
//   - Transposed inputs (tile_input_transposed, N x M in memory) stage as they are stored: the tile's kBN columns
//     as rows of its kBM elements, each row's 16-byte units XOR-swizzled by the row (TransposedInput), so that a
//     warp's visit, which reads one element of each of its columns, meets at most 4 lanes in a bank (e4m3: 8), not
//     all 32.
//   - Transposed outputs (store_transposed) stage as transposed tiles: a visit writes its elements into rows of
//     the tile's columns, and the CTA writes each row out in 16-byte stores. Unstaged, each element is a store of
//     its own to another row of the output (a 32-byte sector written for each byte of an FP8 copy).
#pragma once

#include "coda/epilogue_contract.cuh"
#include "coda/mma_sync_ops.cuh"
#include "coda/reduce.cuh"

namespace coda {

struct TileProgramLayout {
    static constexpr int kBM = kTileProgramBM;
    static constexpr int kBN = kTileProgramBN;
    static constexpr int kThreads = kTileProgramThreads;
    static constexpr int kPairsPerWarp = 32;                            // one column pair per lane
    static constexpr int kWarpsPerRow = (kBN / 2) / kPairsPerWarp;      // 2
    static constexpr int kRowsAtOnce = (kThreads / 32) / kWarpsPerRow;  // 4
    static constexpr int kRowSlots = kBM / kRowsAtOnce;                 // 16
    static constexpr int kColSlots = 1;
    static constexpr int kRowSharers = kWarpsPerRow * kPairsPerWarp;  // every pair of the row
    static constexpr int kColSharers = kRowsAtOnce;

    __device__ static int thread_index() { return static_cast<int>(threadIdx.x); }
    __device__ static int pair() { return thread_index() % (kWarpsPerRow * kPairsPerWarp); }
    __device__ static int row_group() { return thread_index() / (kWarpsPerRow * kPairsPerWarp); }
    __device__ static int slot_row(int row_slot) { return row_slot * kRowsAtOnce + row_group(); }
    __device__ static int slot_col(int) { return 2 * pair(); }
    __device__ static int row_sharer() { return pair(); }
    __device__ static int col_sharer() { return row_group(); }
    __device__ static void sync() { __syncthreads(); }
    // Floats of shared memory combine_groups needs: a value per tile row and warp of the row.
    static constexpr int kGroupScratchFloats = kBM * kWarpsPerRow;
    // reduce_group's values of every row slot (one group: the tile is 128 columns), combined over the row's 64
    // sharers: within each warp by shuffles, then the row's two warps through shared memory, in warp order. Called by
    // every thread; leaves `scratch` free again.
    // Within the warp one reduce-scatter butterfly (recursive halving, scatter_step) combines all row slots at once,
    // not a butterfly per row slot: 16 shuffles and combines a thread where there were 80. Lane l ends with row slot
    // rs(l) = l / kLanesPerSlot (16 row slots: (l >> 1) & 15) combined over all 32 lanes; lanes with l %
    // kLanesPerSlot = 0 store it, one store where lane 0 stored 16.
    template <RedOp Op, int kRows, int kGroupsPerTile>
    __device__ static void combine_groups(float (&g)[kRows][kGroupsPerTile], float* scratch) {
        static_assert(kRows == kRowSlots && kGroupsPerTile == 1, "coda: a tile program's tile is one group wide");
        static_assert(kPairsPerWarp == 32, "coda: a warp's 32 lanes are 32 column pairs");
        static_assert(kRowSlots >= 1 && kRowSlots <= kPairsPerWarp && (kRowSlots & (kRowSlots - 1)) == 0,
                      "coda: the reduce-scatter halves the row slots down to one a lane");
        // The lane as unsigned math: pair() % 32, signed, tipped rms_entry_fp8_blockwise's visits into spills at its
        // 64 registers.
        const int lane = static_cast<int>(threadIdx.x % kPairsPerWarp);
        const int warp_in_row = pair() / kPairsPerWarp;
        float v[kRowSlots];
#pragma unroll
        for (int rs = 0; rs < kRowSlots; ++rs) v[rs] = g[rs][0];
        scatter_step<Op, kPairsPerWarp / 2>(v, lane);
        if (lane % kLanesPerSlot == 0) scratch[slot_row(lane / kLanesPerSlot) * kWarpsPerRow + warp_in_row] = v[0];
        __syncthreads();
#pragma unroll
        for (int rs = 0; rs < kRowSlots; ++rs) {
            float v = scratch[slot_row(rs) * kWarpsPerRow];
            for (int w = 1; w < kWarpsPerRow; ++w) v = Reducer<Op>::combine(v, scratch[slot_row(rs) * kWarpsPerRow + w]);
            g[rs][0] = v;
        }
        __syncthreads();
    }

    static constexpr int kLanesPerSlot = kPairsPerWarp / kRowSlots;  // 2: lanes that end with the same row slot
    // combine_groups' shuffle step at xor distance kD, then the steps below it. While the lane holds 2 * kH row
    // slots' partials v[0 .. 2 kH), it keeps one half and sends its partner the other: it keeps the upper half
    // v[kH ..) where lane bit kD is set, the lower one otherwise, and v[i] becomes the kept half's i-th partial
    // combined with the partner's. So each halving step adds (lane & kD) * kRowSlots / 32 to the row slot v[0] ends
    // with: rs(l) = l / kLanesPerSlot (checked by a host simulation of these steps). Once the lane holds one, plain
    // steps combine it over the kLanesPerSlot lanes that hold the same row slot. Each step pairs the lane sets that
    // combine_lanes' step kD pairs, so the bits are combine_lanes' (a step's two values in either order give the
    // same bits). Templated on kD rather than a loop over it: NVRTC kept the first step's 8 combines a loop there,
    // with v[] in local memory.
    template <RedOp Op, int kD>
    __device__ static void scatter_step(float (&v)[kRowSlots], int lane) {
        constexpr int kH = kRowSlots * kD / kPairsPerWarp;  // half the row slots the lane holds; 0 once it holds one
        if constexpr (kH >= 1) {
            const bool upper = (lane & kD) != 0;
#pragma unroll
            for (int i = 0; i < kH; ++i) {
                const float send = upper ? v[i] : v[i + kH];
                const float keep = upper ? v[i + kH] : v[i];
                v[i] = combine_step<Op>(keep, __shfl_xor_sync(0xffffffffu, send, kD));
            }
        } else {
            v[0] = combine_step<Op>(v[0], __shfl_xor_sync(0xffffffffu, v[0], kD));
        }
        if constexpr (kD > 1) scatter_step<Op, kD / 2>(v, lane);
    }
};

namespace detail {

// A compile-time yes or no for the generic lambdas below: in tile programs with a group pass, the staged passes of a
// tile with all its rows skip each row slot's bound check (a branch around every row slot's visit kept its addresses
// from being hoisted: about a quarter of the block-wise quantizers' instructions).
template <bool kValue>
struct Flag {
    static constexpr bool value = kValue;
};

// A transposed tile input's staged tile (tile_input_transposed): the tile's kBN columns as rows of its kBM elements
// (element_bytes each), as the tensor stores them. Unit u (16 bytes) of row r sits at unit u ^ key(r), key(r) =
// (r / 2) mod (units a row): a warp's visit reads element m of rows 2p and 2p + 1 for its 32 column pairs p, which
// unswizzled would all sit in one bank; swizzled they spread over 8 banks (bf16 and f32 rows), at most 4 lanes a
// bank (e4m3's 64-byte rows: 4 banks, 8 lanes). (Whole 16-byte units keep the cp.async copies; a finer swizzle
// would not.)
struct TransposedInput {
    using L = TileProgramLayout;
    __host__ __device__ static constexpr int row_bytes(int element_bytes) { return L::kBM * element_bytes; }
    __host__ __device__ static constexpr int units(int element_bytes) { return row_bytes(element_bytes) / 16; }
    __device__ static int key(int element_bytes, int r) { return (r >> 1) & (units(element_bytes) - 1); }
    // Shared address of element e of row r, the tile starting at `tile`.
    __device__ static unsigned element(unsigned tile, int element_bytes, int r, int e) {
        const int byte = e * element_bytes;
        return tile + r * row_bytes(element_bytes) + (((byte >> 4) ^ key(element_bytes, r)) << 4) + (byte & 15);
    }
};

// The tile inputs (kOutputs = false) or outputs of Epilogue as one CTA stages them: tensor i's kBM rows of
// row_bytes(i) bytes (the tile's kBN / 2 column pairs), one tensor after another; a transposed input's kBN rows of
// kBM elements instead (TransposedInput: the same bytes).
template <class Epilogue, bool kOutputs>
struct StagedTileTable {
    using L = TileProgramLayout;
    static constexpr int kCount = kOutputs ? Epilogue::kTileOutputs : Epilogue::kTileInputs;
    __host__ __device__ static constexpr int pair_bytes(int i) {
        return kOutputs ? Epilogue::tile_output_pair_bytes(i) : Epilogue::tile_input_pair_bytes(i);
    }
    __host__ __device__ static constexpr bool transposed(int i) { return !kOutputs && Epilogue::tile_input_transposed(i); }
    __host__ __device__ static constexpr int element_bytes(int i) {
        return kOutputs ? Epilogue::tile_output_element_bytes(i) : Epilogue::tile_input_element_bytes(i);
    }
    __host__ __device__ static constexpr int row_bytes(int i) { return L::kBN / 2 * pair_bytes(i); }
    __host__ __device__ static constexpr int offset(int i) { return i == 0 ? 0 : offset(i - 1) + L::kBM * row_bytes(i - 1); }
    static constexpr int kBytes = offset(kCount);
    __device__ static TileView view(const typename Epilogue::Args& args, int i) {
        if constexpr (kOutputs)
            return Epilogue::tile_output(args, i);
        else
            return Epilogue::tile_input(args, i);
    }
    // Whether this CTA's rows of every tensor can move in 16-byte units: base and pitch aligned, and the tile's
    // part of a row (n0 .. min(n0 + kBN, N); a transposed input's: its `rows` elements) whole units.
    __device__ static bool movable_in_16(const typename Epilogue::Args& args, int n0, int n, int rows) {
        const int columns = (n - n0 < L::kBN ? n - n0 : L::kBN);
        bool all = true;
#pragma unroll
        for (int i = 0; i < kCount; ++i) {
            const TileView v = view(args, i);
            const int part = transposed(i) ? rows * element_bytes(i) : columns / 2 * pair_bytes(i);
            all = all && ((reinterpret_cast<unsigned long long>(v.base) | static_cast<unsigned long long>(v.row_bytes) |
                           static_cast<unsigned long long>(part)) & 15ull) == 0;
        }
        return all;
    }
    // Every 16-byte unit of the tile's rows < rows and columns < n, as (tensor, smem address, global address),
    // spread over the CTA's threads: f(shared, global).
    template <class F>
    __device__ static void for_each_unit(const typename Epilogue::Args& args, unsigned smem, int m0, int n0, int rows,
                                         int n, F f) {
        const int columns = (n - n0 < L::kBN ? n - n0 : L::kBN);
#pragma unroll
        for (int i = 0; i < kCount; ++i) {
            const TileView v = view(args, i);
            if (transposed(i)) {  // kBN rows (the tile's columns n0..) of kBM elements (its rows m0..), swizzled
                const int eb = element_bytes(i), units = TransposedInput::units(eb), valid = rows * eb / 16;
                unsigned char* first = v.base + static_cast<long long>(n0) * v.row_bytes + static_cast<long long>(m0) * eb;
                // kBN * units = kThreads * pair_bytes(i) (full width: pair_bytes = 2 * eb): as many as below.
#pragma unroll
                for (int k = 0; k < pair_bytes(i); ++k) {
                    const int u = k * L::kThreads + L::thread_index();
                    const int r = u / units, b = u % units;
                    if (r < columns && b < valid)
                        f(smem + offset(i) + r * TransposedInput::row_bytes(eb) + ((b ^ TransposedInput::key(eb, r)) << 4),
                          first + r * v.row_bytes + b * 16);
                }
                continue;
            }
            const int units = row_bytes(i) / 16;
            const int valid = columns / 2 * pair_bytes(i) / 16;
            unsigned char* first = v.base + static_cast<long long>(m0) * v.row_bytes + n0 / 2 * pair_bytes(i);
            // kBM * units = kThreads * pair_bytes(i): pair_bytes(i) units per thread, all issued before any is used.
#pragma unroll
            for (int k = 0; k < pair_bytes(i); ++k) {
                const int u = k * L::kThreads + L::thread_index();
                const int r = u / units, b = u % units;
                if (r < rows && b < valid) f(smem + offset(i) + r * row_bytes(i) + b * 16, first + r * v.row_bytes + b * 16);
            }
        }
    }
};

// The transposed outputs (store_transposed sinks) of Epilogue as one CTA stages them: output j's tile is rows(j) =
// kBN / 2 * lanes(j) rows (the tile's columns, which are the output's rows) of kBM elements (the tile's rows), one
// output after another. A row's 4-byte words are XOR-swizzled by its column pair (key): a warp's 32 lanes each write
// one element of another row at the same m, which unswizzled would all fall in one bank (a row is 64, 128 or 256
// bytes); swizzled, at most two lanes share a bank.
template <class Epilogue>
struct TransposedTileTable {
    using L = TileProgramLayout;
    static constexpr int kCount = Epilogue::kTransposedStores;
    __host__ __device__ static constexpr int lanes(int j) { return Epilogue::transposed_output_lanes(j); }
    __host__ __device__ static constexpr int element_bytes(int j) { return Epilogue::transposed_output_element_bytes(j); }
    __host__ __device__ static constexpr int rows(int j) { return L::kBN / 2 * lanes(j); }
    __host__ __device__ static constexpr int row_bytes(int j) { return L::kBM * element_bytes(j); }
    __host__ __device__ static constexpr int offset(int j) {
        return j == 0 ? 0 : offset(j - 1) + rows(j - 1) * row_bytes(j - 1);
    }
    static constexpr int kBytes = offset(kCount);
    __device__ static int key(int j, int r) { return (r / lanes(j)) & (row_bytes(j) / 4 - 1); }
    // Shared address of element e (the tile's row e) of row r of output j.
    __device__ static unsigned element(unsigned base, int j, int r, int e) {
        const int byte = e * element_bytes(j);
        return base + offset(j) + r * row_bytes(j) + (((byte >> 2) ^ key(j, r)) << 2) + (byte & 3);
    }
    // Whether this CTA's rows (rows of the tile: < rows) can go out in 16-byte units: every output's base and row
    // pitch aligned, and the tile's part of a row whole units.
    __device__ static bool movable_in_16(const typename Epilogue::Args& args, int rows) {
        bool all = true;
#pragma unroll
        for (int j = 0; j < kCount; ++j) {
            const TileView v = Epilogue::transposed_output(args, j);
            all = all && ((reinterpret_cast<unsigned long long>(v.base) | static_cast<unsigned long long>(v.row_bytes) |
                           static_cast<unsigned long long>(rows * element_bytes(j))) & 15ull) == 0;
        }
        return all;
    }
};

__device__ __forceinline__ uint4 ld_shared_16(unsigned address) {
    uint4 r;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "r"(address)
                 : "memory");
    return r;
}

// The words of a 16-byte unit of a swizzled row, in their logical order: word i is at i ^ s.
__device__ __forceinline__ uint4 unswizzle_words(uint4 p, int s) {
    const unsigned lo0 = (s & 1) ? p.y : p.x, lo1 = (s & 1) ? p.x : p.y;
    const unsigned hi0 = (s & 1) ? p.w : p.z, hi1 = (s & 1) ? p.z : p.w;
    return (s & 2) ? make_uint4(hi0, hi1, lo0, lo1) : make_uint4(lo0, lo1, hi0, hi1);
}

}  // namespace detail

// The shared-memory plan of a tile program's CTA: staged inputs, staged outputs, staged transposed outputs, then
// end_tile's scratch.
template <class Epilogue>
struct TileProgramStaging {
    using Inputs = detail::StagedTileTable<Epilogue, false>;
    using Outputs = detail::StagedTileTable<Epilogue, true>;
    using Transposed = detail::TransposedTileTable<Epilogue>;
    // Beyond this a CTA would hold so much shared memory that too few fit on an SM to keep the bandwidth: visit
    // global memory instead (graphs with many or wide tile tensors).
    static constexpr int kMaxStagedBytes = 96 * 1024;
    static constexpr bool kEnabled = Inputs::kBytes + Outputs::kBytes + Transposed::kBytes <= kMaxStagedBytes;
    // end_tile's scratch overlaps the staged inputs (dead once the visits are done), the outputs follow both.
    static constexpr int kScratchBytes = Epilogue::template scratch_floats<TileProgramLayout>() * 4;
    static constexpr int kOutputsOffset = kEnabled && Inputs::kBytes > kScratchBytes ? Inputs::kBytes : kScratchBytes;
    static constexpr int kTransposedOffset = kOutputsOffset + (kEnabled ? Outputs::kBytes : 0);
    static constexpr int kSmemBytes = kTransposedOffset + (kEnabled ? Transposed::kBytes : 0);

    // After the visits (and a barrier): every staged transposed row of the tile < rows (rows of the tile) and < n
    // (columns of the index space) to global memory, 16 bytes a store.
    __device__ static void write_transposed(const typename Epilogue::Args& args, unsigned smem, int m0, int rows,
                                            int n0, int n) {
        using L = TileProgramLayout;
        const int pairs = (n - n0 < L::kBN ? n - n0 : L::kBN) / 2;
#pragma unroll
        for (int j = 0; j < Transposed::kCount; ++j) {
            const int units = Transposed::row_bytes(j) / 16;
            const int valid_units = rows * Transposed::element_bytes(j) / 16;
            const int valid_rows = pairs * Transposed::lanes(j);
            const TileView v = Epilogue::transposed_output(args, j);
            unsigned char* first = v.base + static_cast<long long>(n0 / 2 * Transposed::lanes(j)) * v.row_bytes +
                                   static_cast<long long>(m0) * Transposed::element_bytes(j);
            const unsigned tile = smem + kTransposedOffset + Transposed::offset(j);
            // rows(j) * units = kThreads * lanes(j) * element_bytes(j): a whole number of units per thread.
#pragma unroll
            for (int k = 0; k < Transposed::rows(j) * units / L::kThreads; ++k) {
                const int u = k * L::kThreads + L::thread_index();
                const int r = u / units, b = u % units;
                if (r < valid_rows && b < valid_units) {
                    const int key = Transposed::key(j, r);
                    const uint4 w = detail::ld_shared_16(tile + r * Transposed::row_bytes(j) + ((b ^ (key >> 2)) << 4));
                    *reinterpret_cast<uint4*>(first + r * v.row_bytes + b * 16) = detail::unswizzle_words(w, key & 3);
                }
            }
        }
    }
};

// Where a visit's tile tensors are when the CTA staged them: shared memory, at the visit's row and column pair.
template <class Epilogue>
struct StagedTiles {
    static constexpr bool kVisitsBeyondN = false;
    using S = TileProgramStaging<Epilogue>;
    unsigned smem;  // shared-window address of the staging buffer (inputs, then outputs at kOutputsOffset)
    int m0, n0;     // the tile's first row and column
    template <int V, class T, class R>
    __device__ void load(int i, const T*, const Coord& c, R (&out)[V]) const {
        coda::load_shared<T>(smem + S::Inputs::offset(i) + (c.m - m0) * S::Inputs::row_bytes(i) +
                                 (c.n - n0) / 2 * S::Inputs::pair_bytes(i),
                             out);
    }
    template <int V, class T, class R>
    __device__ void store(int i, T*, const Coord& c, const R (&in)[V]) const {
        coda::store_shared<T>(smem + S::kOutputsOffset + S::Outputs::offset(i) + (c.m - m0) * S::Outputs::row_bytes(i) +
                                  (c.n - n0) / 2 * S::Outputs::pair_bytes(i),
                              in);
    }
    // Transposed input i: the visit's V elements from rows c.n - n0 + v of its staged tile (TransposedInput); the
    // pair's rows (c.n is even) share their key, so they are a row apart.
    template <int V, class T, class R>
    __device__ void load_transposed(int i, const T*, long long, const Coord& c, R (&out)[V]) const {
        using In = detail::TransposedInput;
        const unsigned first = In::element(smem + S::Inputs::offset(i), sizeof(T), c.n - n0, c.m - m0);
#pragma unroll
        for (int v = 0; v < V; ++v) {
            R element[1];
            coda::load_shared<T>(first + v * In::row_bytes(sizeof(T)), element);
            out[v] = element[0];
        }
    }
    // Transposed output j: the visit's V elements into rows (c.n - n0) / 2 * V + v of its transposed tile.
    template <int V, class T, class R>
    __device__ void store_transposed(int j, T*, long long, const Coord& c, int, const R (&in)[V]) const {
        const int r = (c.n - n0) / 2 * V;
#pragma unroll
        for (int v = 0; v < V; ++v) {
            const R element[1] = {in[v]};
            coda::store_shared<T>(S::Transposed::element(smem + S::kTransposedOffset, j, r + v, c.m - m0), element);
        }
    }
};

// What the visits share, read before the tile's wait: its staged loads and these are in flight together. Per visit
// instead, each visit first waited for its own row input from L2 (about 500 cycles, 16 times a thread) while the
// CTA moved no bytes: the tile programs with row inputs ran at 0.68 of torch's copy bandwidth, the plain copy at 0.94
// (docs/PERFORMANCE.md, 2026-12-05). (Batches of row values in registers do not hold: the compiler sinks each load
// to its visit again.)
//   - Row values (row inputs, scalars and what is computed from them): one per tile row, computed by the first kBM
//     threads into shared memory (kRowsOffset); visits read their row's there. Rows past M read row M - 1 (in
//     bounds) and are never visited.
//   - Column values: a thread visits one column pair (kColSlots = 1), so once, in registers.
template <class Epilogue>
struct TileProgramValues {
    using L = TileProgramLayout;
    using Row = typename Epilogue::RowValues;
    static constexpr int kRowsOffset = (TileProgramStaging<Epilogue>::kSmemBytes + 15) / 16 * 16;
    // reduce_group's combine (TileProgramLayout::combine_groups), after the row values.
    static constexpr int kGroupOffset = kRowsOffset + L::kBM * static_cast<int>(sizeof(Row));
    static constexpr int kSmemBytes =
        kGroupOffset + (Epilogue::kGroupReductions > 0 ? L::kGroupScratchFloats * static_cast<int>(sizeof(float)) : 0);
    static_assert(L::kThreads >= L::kBM, "coda: a thread per tile row computes the row values");

    __device__ static void stage_rows(const typename Epilogue::Args& args, const TileProblem& problem, int m0, int n0,
                                      unsigned char* smem) {
        const int r = L::thread_index();
        if (r < L::kBM) {
            const int m = m0 + r < problem.m ? m0 + r : problem.m - 1;
            Epilogue::row_values(args, Coord{m, n0, problem.m, problem.n}, row(smem, r));
        }
    }
    __device__ static Row& row(unsigned char* smem, int r) { return reinterpret_cast<Row*>(smem + kRowsOffset)[r]; }
};

template <class Epilogue>
struct TileProgramTraits {
    using Layout = TileProgramLayout;
    static constexpr int kThreads = Layout::kThreads;
    static constexpr int kBM = Layout::kBM;
    static constexpr int kBN = Layout::kBN;
    static constexpr int kSmemBytes = TileProgramValues<Epilogue>::kSmemBytes;
    // What the kernel reports to the host (coda_kernel_info): the fixed tile, no pipeline.
    __host__ __device__ static constexpr KernelInfo info() {
        return KernelInfo(KernelKind::TileProgram, kThreads, kSmemBytes, kBM, kBN, 1, 1, 0, TmaTileInfo{});
    }
};

template <class Epilogue>
__global__ void __launch_bounds__(TileProgramLayout::kThreads)
    tile_program(const TileProblem problem, const typename Epilogue::Args args) {
    using L = TileProgramLayout;
    using S = TileProgramStaging<Epilogue>;
    using V = TileProgramValues<Epilogue>;
    extern __shared__ __align__(16) unsigned char coda_tile_smem[];
    const int tile_m = static_cast<int>(blockIdx.x);
    const int tile_n = static_cast<int>(blockIdx.y);
    const int m0 = tile_m * L::kBM, n0 = tile_n * L::kBN;
    const int rows = problem.m - m0 < L::kBM ? problem.m - m0 : L::kBM;
    typename Epilogue::template State<L> st;
    Epilogue::template begin_tile<L>(st);
    const int n = n0 + L::slot_col(0);
    const unsigned smem = detail::shared_address(coda_tile_smem);
    bool staged = false;
    if constexpr (S::kEnabled) {
        staged = S::Inputs::movable_in_16(args, n0, problem.n, rows) &&
                 S::Outputs::movable_in_16(args, n0, problem.n, rows) &&
                 S::Transposed::movable_in_16(args, rows);
        // Every input unit of the tile in flight at once; the wait comes after the row and column values' loads.
        if (staged) {
            S::Inputs::for_each_unit(args, smem, m0, n0, rows, problem.n, [](unsigned to, unsigned char* from) {
                detail::cp_async_16(to, from, 16);
            });
            detail::cp_async_commit();
        }
    }
    V::stage_rows(args, problem, m0, n0, coda_tile_smem);
    typename Epilogue::ColValues col;
    if (n < problem.n) Epilogue::col_values(args, Coord{m0, n, problem.m, problem.n}, col);
    if (staged) detail::cp_async_wait<0>();
    __syncthreads();
    // reduce_group's values first: every row slot's group from the tile inputs (staged, or in global memory),
    // then combined over each row's sharers.
    if constexpr (Epilogue::kGroupReductions > 0) {
        const auto group_all = [&](const auto tiles, auto full) {
#pragma unroll
            for (int rs = 0; rs < L::kRowSlots; ++rs) {
                const int m = m0 + L::slot_row(rs);
                if (decltype(full)::value || m < problem.m)
                    Epilogue::template group_visit<L>(args, st, Coord{m, n, problem.m, problem.n, 0, rs}, rs, 0, 0.0f,
                                                      0.0f, tiles);
            }
        };
        if (n < problem.n) {
            if (staged && rows == L::kBM)
                group_all(StagedTiles<Epilogue>{smem, m0, n0}, detail::Flag<true>{});
            else if (staged)
                group_all(StagedTiles<Epilogue>{smem, m0, n0}, detail::Flag<false>{});
            else
                group_all(GlobalTiles{}, detail::Flag<false>{});
        }
        Epilogue::template group_finish<L>(st, reinterpret_cast<float*>(coda_tile_smem + V::kGroupOffset));
    }
    // Every row slot of the thread in order; `tiles`: where the tile tensors are; `full`: Flag<true> when the tile
    // has all kBM rows, so no row slot needs its bound checked.
    const auto visit_all = [&](const auto& tiles, auto full) {
#pragma unroll
        for (int rs = 0; rs < L::kRowSlots; ++rs) {
            const int m = m0 + L::slot_row(rs);
            if (decltype(full)::value || m < problem.m) {
                const Coord c{m, n, problem.m, problem.n, 0, rs};
                typename Epilogue::Inputs in;
                Epilogue::template load<L>(args, c, in, tiles);
                Epilogue::template visit<L>(args, st, c, rs, 0, 0.0f, 0.0f, V::row(coda_tile_smem, L::slot_row(rs)),
                                            col, in, tiles);
            }
        }
    };
    if (staged) {
        if (n < problem.n) {
            // Unchecked visits only where the graph has a group pass (the block-wise quantizers: instruction-bound, 0.5
            // of copy bandwidth before). The others ran at 0.85-0.95 of it already, and a wide one (four values a
            // lane, column reductions, an accumulate) spilled 28 bytes with its visits instantiated twice.
            const StagedTiles<Epilogue> tiles{smem, m0, n0};
            if (Epilogue::kGroupReductions > 0 && rows == L::kBM)
                visit_all(tiles, detail::Flag<(Epilogue::kGroupReductions > 0)>{});
            else
                visit_all(tiles, detail::Flag<false>{});
        }
        __syncthreads();
        S::Outputs::for_each_unit(args, smem + S::kOutputsOffset, m0, n0, rows, problem.n,
                                  [](unsigned from, unsigned char* to) {
                                      *reinterpret_cast<uint4*>(to) = detail::ld_shared_16(from);
                                  });
        if constexpr (S::Transposed::kCount > 0) S::write_transposed(args, smem, m0, rows, n0, problem.n);
    } else if (n < problem.n) {
        visit_all(GlobalTiles{}, detail::Flag<false>{});
    }
    Epilogue::template end_tile<L>(args, st, reinterpret_cast<float*>(coda_tile_smem),
                                   TileCoord{tile_m, tile_n, problem.m, problem.n});
}

}  // namespace coda
