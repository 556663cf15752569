// The persistent Hopper GEMM's tile order (hopper_gemm.cuh): which tiles, or pieces of tiles, each CTA multiplies and in
// what order. Integer logic only, callable on the host too (tests/mainloop/tile_order_test.cpp walks whole grids of
// it). NVRTC, no host headers.
#pragma once

#include "coda/kernel_abi.cuh"

namespace coda {

constexpr int kHopperRasterBand = 8;  // M-tiles per band of the tile order: concurrent tiles share A and B in L2

namespace detail {

// A piece of a tile's work on one CTA: all of its k-tiles (Whole), or, in the stream-K region below, its first
// k-tiles (Head: this CTA adds the Tail's partial sum and runs the epilogue) or its last ones (Tail: this CTA
// publishes its partial sum for the Head's CTA, and has no epilogue).
enum class Piece : int { Whole, Head, Tail };

struct WorkItem {
    int tm, tn;
    int k_begin, k_tiles;  // the k-tiles multiplied: [k_begin, k_begin + k_tiles)
    int position;          // ring position of its first stage: the k-tiles of this CTA's earlier items
    int visit_index;       // among this CTA's items with an epilogue (Whole, Head): its tile-input ring position
    Piece piece;
};

// The work of a persistent CTA. Work comes in units of kClusterM x kClusterN tiles (one per CTA of a cluster, in
// rank order; one of the two is 1); cluster c takes units c, c + clusters, ... Units go in bands of
// kHopperRasterBand M-tiles, column by column inside a band, so that the tiles running at once on all SMs read a
// few rows of A and columns of B that stay in L2. With an odd number of M-tiles (N-tiles), the last pair's second
// tile is beyond M (N): that CTA still runs the mainloop (its partner needs its half of the shared operand) but
// has no epilogue (valid() is false).
//
// Stream-K (kernels where hopper_rules::stream_k holds, when the problem carries a workspace): when the units do not
// fill the last round, that round would leave SMs idle. The last round and the one before are then shared out evenly by
// k-tiles instead: CTA c multiplies k-tiles [c * I / G, (c + 1) * I / G) of those 1-2 rounds' units (I k-tiles in all,
// G CTAs), at least one unit's worth, so a unit is cut at most once, between two neighbouring CTAs. The CTA holding a
// unit's first k-tiles (Head, its last item) finishes it with the partial sum of the next CTA (Tail, that CTA's first
// item): the sum is always taken in that order, so the result is the same bits every run. No CTA waits on one that is
// waiting: a Tail is published before its CTA does anything else.
template <int kClusterM, int kClusterN, bool kStreamK>
struct TileOrder {
    static_assert(kClusterM == 1 || kClusterN == 1, "coda: a cluster is a row or a column of CTAs");
    static constexpr int kCtas = kClusterM * kClusterN;
    // (Few fields, all int: the consumers keep them beside 128 accumulators.)
    int tiles_m, tiles_n, units_m, units_n, first, step, k_tiles;
    int whole;                      // this CTA's round-robin units (items 0 .. whole - 1)
    int shared_first;               // the first unit of the stream-K region (all units: none)
    int shared_begin, shared_end;   // this CTA's k-tiles of the region, counted from its first unit's
    int count;                      // this CTA's items

    // For CTA `cta` of a grid of `ctas` (blockIdx.x and gridDim.x).
    CODA_HOST_DEVICE TileOrder(int tiles_m_, int tiles_n_, int k_tiles_, bool stream_k, int cta, int ctas)
        : tiles_m(tiles_m_), tiles_n(tiles_n_), units_m((tiles_m_ + kClusterM - 1) / kClusterM),
          units_n((tiles_n_ + kClusterN - 1) / kClusterN), first(cta / kCtas), step(ctas / kCtas), k_tiles(k_tiles_) {
        const int units = units_m * units_n;
        const int rounds = units / step;
        // (Without a second k-tile to cut at, sharing would only move whole units around.)
        const bool share = kStreamK && stream_k && units % step != 0 && rounds >= 1 && k_tiles >= 2;
        shared_first = share ? (rounds - 1) * step : units;
        whole = first < shared_first ? (shared_first - first + step - 1) / step : 0;
        count = whole;
        shared_begin = shared_end = 0;
        if (share) {
            // Under two rounds of units' k-tiles: an int (the host keeps K below 2^31 / 64 x 2 rounds' units).
            const long long k_all = static_cast<long long>(units - shared_first) * k_tiles;
            shared_begin = static_cast<int>(k_all * first / step);
            shared_end = static_cast<int>(k_all * (first + 1) / step);
            count += (shared_end - 1) / k_tiles - shared_begin / k_tiles + 1;
        }
    }
    // This CTA's items in the stream-K region.
    CODA_HOST_DEVICE int shared_items() const { return count - whole; }

    // The M- and N-tile of unit `unit` for the CTA of cluster rank `rank`.
    CODA_HOST_DEVICE void position(int unit, int rank, int& tm, int& tn) const {
        constexpr int kBand = kHopperRasterBand / kClusterM;
        const int band = unit / (kBand * units_n);
        const int first_m = band * kBand;
        const int rows = units_m - first_m < kBand ? units_m - first_m : kBand;
        const int in_band = unit - band * kBand * units_n;
        tm = (first_m + in_band % rows) * kClusterM + (kClusterM > 1 ? rank : 0);
        tn = (in_band / rows) * kClusterN + (kClusterN > 1 ? rank : 0);
    }

    // This CTA's item `local` (0 .. count - 1) in the round-robin order.
    CODA_HOST_DEVICE WorkItem item(int local, int rank) const {
        return local < whole ? whole_item(first + local * step, local, rank) : shared_item(local - whole, whole, rank);
    }
    // Unit `unit` (before shared_first), all of its k-tiles, as this CTA's item `local`: its earlier items were whole
    // units too.
    CODA_HOST_DEVICE WorkItem whole_item(int unit, int local, int rank) const {
        WorkItem w;
        position(unit, rank, w.tm, w.tn);
        w.k_begin = 0;
        w.k_tiles = k_tiles;
        w.position = local * k_tiles;
        w.visit_index = local;
        w.piece = Piece::Whole;
        return w;
    }
    // This CTA's item j (0 .. shared_items() - 1) of the stream-K region, after its `taken` whole units.
    CODA_HOST_DEVICE WorkItem shared_item(int j, int taken, int rank) const {
        WorkItem w;
        const int unit = shared_begin / k_tiles + j;  // within the region
        const int unit_k = unit * k_tiles;
        const int lo = shared_begin > unit_k ? shared_begin : unit_k;
        const int hi = shared_end < unit_k + k_tiles ? shared_end : unit_k + k_tiles;
        position(shared_first + unit, rank, w.tm, w.tn);
        w.k_begin = lo - unit_k;
        w.k_tiles = hi - lo;
        w.position = taken * k_tiles + (lo - shared_begin);
        // Only a CTA's first shared item can be a Tail (its range starts inside a unit); it has no epilogue.
        w.visit_index = taken + j - (j > 0 && shared_begin % k_tiles != 0 ? 1 : 0);
        w.piece = w.k_begin > 0 ? Piece::Tail : w.k_tiles < k_tiles ? Piece::Head : Piece::Whole;
        return w;
    }
    // Where a Head's missing k-tiles are published: the Tail's CTA, the next one. A Tail publishes to its own.
    CODA_HOST_DEVICE int partial_slot(Piece piece) const { return piece == Piece::Head ? first + 1 : first; }
    CODA_HOST_DEVICE bool valid(int tm, int tn) const { return tm < tiles_m && tn < tiles_n; }
};

}  // namespace detail
}  // namespace coda
