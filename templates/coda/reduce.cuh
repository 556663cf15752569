// Row and column reductions of an epilogue: per-thread running state, the fp32 partial each tile writes,
// and the deterministic (atomic-free) combination of a tile's per-thread partials through shared memory.
//
// Contract:
//   - Reducer<Op>: init() / add(state, x) fold elements in a thread; partial(state) is what a tile writes;
//     identity() is the partial of an empty set; combine(a, b) folds two partials (finalizers use it too).
//   - write_row_partials<L, Op>: out is f32 [ceil(N / L::kBN)] x [M], element (t.tile_n, row) at
//     out[t.tile_n * M + row]; rows >= M are skipped.
//   - write_col_partials<L, Op, V>: V values per column pair; out is f32 [ceil(M / L::kBM)] x [C], C = (N/2) * V;
//     value v of column slot s goes to column c = ((t.tile_n * L::kBN + L::slot_col(s)) / 2) * V + v at
//     out[t.tile_m * C + c]; c >= C is skipped.
//   - Both must be called by every thread of the Layout (L::kThreads); they L::sync() before writing `scratch`
//     (whose previous users may still be reading it) and after reading it (so the next user may overwrite it).
//     Each thread's partial lands in its own cell (the Layout bijection of epilogue_contract.cuh), and the
//     cells of one row / column are combined in sharer order 0, 1, ...: results are bitwise reproducible.
#pragma once

#include "coda/epilogue_contract.cuh"

namespace coda {

enum class RedOp { Sum, Max, Min, SumSq, Lse };

namespace detail {
__device__ __forceinline__ float pos_inf() {
    return __int_as_float(0x7f800000);
}
__device__ __forceinline__ float neg_inf() {
    return __int_as_float(static_cast<int>(0xff800000u));
}
// max / min that return NaN when either operand is NaN (PTX .NaN, sm_80+), where fmaxf / fminf drop it.
__device__ __forceinline__ float max_nan(float a, float b) {
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
__device__ __forceinline__ float min_nan(float a, float b) {
    float r;
    asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
// 2^x in one MUFU instruction: ex2.approx, exact at x = 0, 0 for x = -inf, results below 2^-126 flushed to 0.
__device__ __forceinline__ float exp2_fast(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
}  // namespace detail

template <RedOp Op>
struct Reducer;

template <>
struct Reducer<RedOp::Sum> {
    struct State {
        float v;
    };
    __device__ static State init() { return State{0.0f}; }
    __device__ static void add(State& s, float x) { s.v += x; }
    __device__ static float partial(const State& s) { return s.v; }
    __device__ static float identity() { return 0.0f; }
    __device__ static float combine(float a, float b) { return a + b; }
};

template <>
struct Reducer<RedOp::SumSq> {
    struct State {
        float v;
    };
    __device__ static State init() { return State{0.0f}; }
    __device__ static void add(State& s, float x) { s.v = fmaf(x, x, s.v); }
    __device__ static float partial(const State& s) { return s.v; }
    __device__ static float identity() { return 0.0f; }
    __device__ static float combine(float a, float b) { return a + b; }
};

template <>
struct Reducer<RedOp::Max> {
    struct State {
        float v;
    };
    __device__ static State init() { return State{detail::neg_inf()}; }
    // Not fmaxf, which drops NaN: a NaN element makes the partial NaN, as it does for Sum. One FMNMX.NAN, where
    // a compare-and-select took three instructions an element.
    __device__ static void add(State& s, float x) { s.v = detail::max_nan(s.v, x); }
    __device__ static float partial(const State& s) { return s.v; }
    __device__ static float identity() { return detail::neg_inf(); }
    // combine stays a compare-and-select: it runs a few times a row, and max_nan there made ptxas spill the FP8
    // rms_entry tile programs (24 bytes, at 48 registers).
    __device__ static float combine(float a, float b) { return (b > a || b != b) ? b : a; }
};

template <>
struct Reducer<RedOp::Min> {
    struct State {
        float v;
    };
    __device__ static State init() { return State{detail::pos_inf()}; }
    __device__ static void add(State& s, float x) { s.v = detail::min_nan(s.v, x); }  // NaN propagates
    __device__ static float partial(const State& s) { return s.v; }
    __device__ static float identity() { return detail::pos_inf(); }
    __device__ static float combine(float a, float b) { return (b < a || b != b) ? b : a; }
};

// Online log-sum-exp: the state is (running max m, sum of exp(x - m)). Per element, one exponential of the
// smaller of (m, x) relative to the larger, in branch-free code: it runs once per logit of an LM head's epilogue,
// where the accurate expf and the NaN / infinity branches cost more issue slots than the rest of the visit.
//   - exp(lo - hi) = ex2.approx((lo - hi) * log2(e)): the difference is taken first, so the two roundings before
//     the exponential err by at most 2 |lo - hi| 2^-24 in its argument, which costs at most 0.74 * 2^-24 of the
//     sum (the worst case is exp(lo - hi) = 1 / e); ex2.approx adds a few ulps of the term. Terms below 2^-126 of
//     the max flush to 0: the sum is at least 1, so they never counted.
//   - Equal operands (also -inf with -inf, +inf with +inf) give exp(0) = 1 instead of NaN; a -inf term below a
//     larger m gives 0. Infinite operands thus need no branch: -inf only ever meets -inf in a sum whose m stays
//     -inf, whose partial is -inf whatever s holds.
//   - A NaN element makes m, and through lo - hi also s, NaN for good (max.NaN / min.NaN), as Sum, Max and Min
//     propagate NaN.
template <>
struct Reducer<RedOp::Lse> {
    struct State {
        float m;
        float s;
    };
    __device__ static State init() { return State{detail::neg_inf(), 0.0f}; }
    __device__ static void add(State& st, float x) {
        constexpr float kLog2e = 1.4426950408889634f;
        const float hi = detail::max_nan(st.m, x);
        const float lo = detail::min_nan(st.m, x);
        const float e = detail::exp2_fast(lo == hi ? 0.0f : (lo - hi) * kLog2e);
        st.s = (x > st.m) ? fmaf(st.s, e, 1.0f) : st.s + e;
        st.m = hi;
    }
    __device__ static float partial(const State& st) {
        return st.s == 0.0f ? detail::neg_inf() : st.m + logf(st.s);
    }
    __device__ static float identity() { return detail::neg_inf(); }
    __device__ static float combine(float a, float b) {
        if (a != a || b != b) return a + b;  // NaN
        const float hi = fmaxf(a, b);
        const float lo = fminf(a, b);
        if (lo == detail::neg_inf() || hi == detail::pos_inf()) return hi;
        return hi + log1pf(expf(lo - hi));
    }
};

// A row reduction's add at the visit c, which is past N only where the mainloop visits such column pairs
// (Tiles::kVisitsBeyondN: the Hopper mainloop, where every tile tensor is staged, runs its visits without a bounds
// branch each; what they write there the TMA stores clip, and a column's reduction past N is never written). Past N
// the state is left as it was: Sum and SumSq add, then select the old state, so that their add stays one FMA of the
// product they sum; the others select the identity as the element.
template <class Tiles, RedOp Op>
__device__ __forceinline__ void add_in_columns(typename Reducer<Op>::State& s, const Coord& c, float x) {
    using R = Reducer<Op>;
    if constexpr (!Tiles::kVisitsBeyondN) {
        R::add(s, x);
    } else if constexpr (Op == RedOp::Sum || Op == RedOp::SumSq) {
        typename R::State t = s;
        R::add(t, x);
        s = c.n < c.N ? t : s;
    } else {
        R::add(s, c.n < c.N ? x : R::identity());
    }
}

// The floats between two rows' cells in write_row_partials' scratch: a row's kRowSharers cells, and four more where
// there are 32 or more of them. Then the threads that combine rows r, r + 1, ... read their cells 16 bytes at a time
// from different banks (a quarter-warp's eight 16-byte reads cover all 32); unpadded, a row stride of a multiple of
// 32 floats put a warp's reads in the same four banks (the tile programs' 64 sharers: 32-way conflicts). The cells
// and the order they are combined in stay as they were.
template <class L>
__host__ __device__ constexpr int row_scratch_stride() {
    return L::kRowSharers >= 32 ? L::kRowSharers + 4 : L::kRowSharers;
}

template <class L>
__host__ __device__ constexpr int row_scratch_floats() {
    return L::kBM * row_scratch_stride<L>();
}

template <class L, int V>
__host__ __device__ constexpr int col_scratch_floats() {
    return (L::kBN / 2) * V * L::kColSharers;
}

template <class L, RedOp Op>
__device__ void write_row_partials(const typename Reducer<Op>::State (&st)[L::kRowSlots], float* scratch,
                                   float* out, const TileCoord& t) {
    using R = Reducer<Op>;
    L::sync();
    const int sharer = L::row_sharer();
#pragma unroll
    for (int s = 0; s < L::kRowSlots; ++s) scratch[L::slot_row(s) * row_scratch_stride<L>() + sharer] = R::partial(st[s]);
    L::sync();
    const long long row0 = static_cast<long long>(t.tile_m) * L::kBM;
    for (int r = L::thread_index(); r < L::kBM; r += L::kThreads) {
        if (row0 + r >= t.M) break;
        const float* cells = scratch + r * row_scratch_stride<L>();
        float acc = cells[0];
        for (int k = 1; k < L::kRowSharers; ++k) acc = R::combine(acc, cells[k]);
        out[static_cast<long long>(t.tile_n) * t.M + row0 + r] = acc;
    }
    L::sync();
}

template <class L, RedOp Op, int V>
__device__ void write_col_partials(const typename Reducer<Op>::State (&st)[L::kColSlots][V], float* scratch,
                                   float* out, const TileCoord& t) {
    using R = Reducer<Op>;
    constexpr int kTileCols = (L::kBN / 2) * V;  // partial columns one tile covers
    L::sync();
    const int sharer = L::col_sharer();
#pragma unroll
    for (int s = 0; s < L::kColSlots; ++s) {
#pragma unroll
        for (int v = 0; v < V; ++v)
            scratch[((L::slot_col(s) / 2) * V + v) * L::kColSharers + sharer] = R::partial(st[s][v]);
    }
    L::sync();
    const long long C = static_cast<long long>(t.N / 2) * V;
    const long long col0 = static_cast<long long>(t.tile_n) * kTileCols;
    for (int c = L::thread_index(); c < kTileCols; c += L::kThreads) {
        if (col0 + c >= C) break;
        const float* cells = scratch + c * L::kColSharers;
        float acc = cells[0];
        for (int k = 1; k < L::kColSharers; ++k) acc = R::combine(acc, cells[k]);
        out[static_cast<long long>(t.tile_m) * C + col0 + c] = acc;
    }
    L::sync();
}

// reduce_group (ops.def): the value of a row's group of kScaleBlockK full columns, made before the visits. Column
// slot j of a layout holds columns 8j .. 8j + 7 (the Hopper one's; a tile program's one slot is its whole 128
// columns), so a group is 16 column slots. Each layout combines a row's groups over the row's sharers itself
// (L::combine_groups: the Hopper layout by shuffles within a quad, the tile program's within a warp and then
// through shared memory across the row's two warps).
template <class L>
__host__ __device__ constexpr int groups_per_tile() {
    return L::kBN >= kScaleBlockK ? L::kBN / kScaleBlockK : 1;
}
template <class L>
__device__ __forceinline__ int group_of_slot(int col_slot) {
    return col_slot * 8 / kScaleBlockK;
}
template <RedOp Op>
__device__ __forceinline__ float group_add(float v, float x) {
    typename Reducer<Op>::State s{v};
    Reducer<Op>::add(s, x);
    return Reducer<Op>::partial(s);
}
// Reducer<Op>::combine for a shuffle step: Max and Min as one FMNMX.NAN, where combine's compare-and-select takes
// three instructions (reduce_group's combines over a warp or a quad run once per row slot and group); the
// compare-and-select stays in combine itself (see Reducer<RedOp::Max>).
template <RedOp Op>
__device__ __forceinline__ float combine_step(float a, float b) {
    if constexpr (Op == RedOp::Max)
        return detail::max_nan(a, b);
    else if constexpr (Op == RedOp::Min)
        return detail::min_nan(a, b);
    else
        return Reducer<Op>::combine(a, b);
}
// v combined over the lanes `lanes` apart, lanes / 2 apart, ..., 1 apart (a butterfly): every lane gets the same
// bits, since each step combines the same two values in either order.
template <RedOp Op, int kLanes>
__device__ __forceinline__ float combine_lanes(float v) {
#pragma unroll
    for (int d = kLanes / 2; d >= 1; d /= 2) v = combine_step<Op>(v, __shfl_xor_sync(0xffffffffu, v, d));
    return v;
}

}  // namespace coda
