// The Hopper GEMM's tile order (templates/coda/tile_order.cuh) walked on the host for whole grids: round-robin, with
// and without stream-K's shared rounds, and with clusters. Every k-tile of every tile is multiplied exactly once, each
// CTA's ring positions and visit indices run on without gaps, and every stream-K Head has its Tail first in the next
// CTA's items.
#include <catch2/catch.hpp>

#include <map>
#include <vector>

#include "coda/tile_order.cuh"

namespace coda {
namespace {

using detail::Piece;
using detail::TileOrder;
using detail::WorkItem;

struct Grid {
    int tiles_m, tiles_n, k_tiles;
    bool stream_k;
    int ctas;
};

// Each CTA's items in order, and how many of them are whole units before the stream-K region.
struct Walk {
    std::vector<std::vector<WorkItem>> items;
    std::vector<int> whole;
};

template <int kM, int kN, bool kSK>
Walk round_robin(const Grid& g) {
    Walk walk{std::vector<std::vector<WorkItem>>(g.ctas), std::vector<int>(g.ctas)};
    for (int cta = 0; cta < g.ctas; ++cta) {
        const TileOrder<kM, kN, kSK> order(g.tiles_m, g.tiles_n, g.k_tiles, g.stream_k, cta, g.ctas);
        const int rank = cta % (kM * kN);
        for (int local = 0; local < order.count; ++local) walk.items[cta].push_back(order.item(local, rank));
        walk.whole[cta] = order.whole;
    }
    return walk;
}

// The invariants the kernel relies on, for a grid without clusters.
template <bool kSK>
void check_walk(const Grid& g, const Walk& walk) {
    std::map<std::tuple<int, int, int>, int> times;  // (tm, tn, k-tile) -> how often multiplied
    for (int cta = 0; cta < g.ctas; ++cta) {
        INFO("CTA " << cta << " of " << g.ctas);
        const TileOrder<1, 1, kSK> order(g.tiles_m, g.tiles_n, g.k_tiles, g.stream_k, cta, g.ctas);
        int position = 0, visits = 0;
        const std::vector<WorkItem>& items = walk.items[cta];
        for (std::size_t i = 0; i < items.size(); ++i) {
            const WorkItem& w = items[i];
            INFO("item " << i << ": tile " << w.tm << ", " << w.tn << " k " << w.k_begin << " + " << w.k_tiles);
            REQUIRE(order.valid(w.tm, w.tn));
            REQUIRE(w.k_tiles >= 1);
            REQUIRE(w.k_begin + w.k_tiles <= g.k_tiles);
            REQUIRE(w.position == position);
            position += w.k_tiles;
            for (int k = w.k_begin; k < w.k_begin + w.k_tiles; ++k) ++times[{w.tm, w.tn, k}];
            CHECK(w.piece == (w.k_begin > 0 ? Piece::Tail : w.k_tiles < g.k_tiles ? Piece::Head : Piece::Whole));
            if (w.piece == Piece::Tail) {
                CHECK(i == static_cast<std::size_t>(walk.whole[cta]));  // the CTA's first item of the region
                continue;
            }
            CHECK(w.visit_index == visits);
            ++visits;
            if (w.piece == Piece::Head) {
                CHECK(i + 1 == items.size());  // a Head is the CTA's last item, its Tail the next CTA's first
                const int next = order.partial_slot(Piece::Head);
                REQUIRE(next < g.ctas);
                const TileOrder<1, 1, kSK> next_order(g.tiles_m, g.tiles_n, g.k_tiles, g.stream_k, next, g.ctas);
                const std::size_t first_shared = static_cast<std::size_t>(walk.whole[next]);
                REQUIRE(walk.items[next].size() > first_shared);
                const WorkItem& tail = walk.items[next][first_shared];
                CHECK(tail.piece == Piece::Tail);
                CHECK(tail.tm == w.tm);
                CHECK(tail.tn == w.tn);
                CHECK(tail.k_begin == w.k_tiles);
                CHECK(next_order.partial_slot(Piece::Tail) == next);
            }
        }
    }
    CHECK(times.size() == static_cast<std::size_t>(g.tiles_m) * g.tiles_n * g.k_tiles);
    int twice = 0;
    for (const auto& [at, n] : times) twice += n != 1;
    CHECK(twice == 0);
}

TEST_CASE("the tile order multiplies every k-tile once: round-robin, with and without stream-K", "[mainloop]") {
    const std::vector<Grid> grids = {
        {128, 32, 112, true, 132},  // 16384 x 4096 x 14336: 31 rounds and 4 tiles, stream-K's two shared rounds
        {128, 32, 112, false, 132},
        {32, 32, 224, true, 132},   // 4096 x 4096 x 14336: 7 rounds and 100 tiles
        {3, 5, 1, true, 7},         // one k-tile: nothing to cut
        {9, 1, 3, true, 4},         // a shared region whose CTAs hold pieces of one unit each
        {2, 2, 5, true, 4},         // one round exactly
        {64, 1003, 32, true, 132},  // an LM head's N
        {1, 1, 9, true, 1},
    };
    for (const Grid& g : grids) {
        INFO(g.tiles_m << " x " << g.tiles_n << " tiles, " << g.k_tiles << " k-tiles, stream-K " << g.stream_k
                       << ", " << g.ctas << " CTAs");
        check_walk<true>(g, round_robin<1, 1, true>(g));
        // Without stream-K's kernels (kStreamK false) the region is empty: whole units only.
        check_walk<false>(g, round_robin<1, 1, false>(g));
    }
}

TEST_CASE("the round-robin order of clusters covers every unit's tiles once, in both ranks", "[mainloop]") {
    // Pairs along M (B shared) and along N (A shared); an odd tile count leaves the last pair's second tile beyond
    // the edge, which its CTA multiplies and discards (valid() false).
    for (const Grid& g : {Grid{7, 5, 3, false, 8}, Grid{128, 32, 4, false, 132}}) {
        std::map<std::pair<int, int>, int> along_m, along_n;
        for (int cta = 0; cta < g.ctas; ++cta) {
            const TileOrder<2, 1, false> m_order(g.tiles_m, g.tiles_n, g.k_tiles, false, cta, g.ctas);
            for (int local = 0; local < m_order.count; ++local) {
                const WorkItem w = m_order.item(local, cta % 2);
                if (m_order.valid(w.tm, w.tn)) ++along_m[{w.tm, w.tn}];
            }
            const TileOrder<1, 2, false> n_order(g.tiles_m, g.tiles_n, g.k_tiles, false, cta, g.ctas);
            for (int local = 0; local < n_order.count; ++local) {
                const WorkItem w = n_order.item(local, cta % 2);
                if (n_order.valid(w.tm, w.tn)) ++along_n[{w.tm, w.tn}];
            }
        }
        for (const auto* covered : {&along_m, &along_n}) {
            CHECK(covered->size() == static_cast<std::size_t>(g.tiles_m) * g.tiles_n);
            for (const auto& [tile, n] : *covered) CHECK(n == 1);
        }
    }
}

}  // namespace
}  // namespace coda
