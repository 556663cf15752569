// A swizzled shared-memory tile of 16-bit elements and the cooperative loader that fills it from a
// row-major global matrix (16-byte cp.async when legal, 2-byte loads otherwise), zero-filling the outside.
//
// Contract:
//   - SmemTile<ROWS, COLS>: ROWS x COLS elements, COLS contiguous, addressed in 16-byte chunks of 8 elements.
//     offset(row, chunk) XORs the chunk index with a function of the row so that the 8 row addresses of one
//     ldmatrix phase, and the 8 chunks one cp.async phase writes, fall into 8 distinct groups of 4 banks.
//   - TileLoader<Tile, THREADS>::load copies the ROWS x COLS block at (row0, col0) of a matrix with leading
//     dimension ld and bounds (row_lim, col_lim). Out-of-range elements are written as zero and never read.
//     With vector = true (base 16-byte aligned, ld % 8 == 0) it issues cp.async (the caller commits and
//     waits); otherwise it loads synchronously and stores to shared memory, visible after a __syncthreads.
#pragma once

#include "coda/mma_sync_ops.cuh"

namespace coda {
namespace detail {

template <int ROWS, int COLS>
struct SmemTile {
    static constexpr int kRows = ROWS;
    static constexpr int kCols = COLS;
    static constexpr int kChunksPerRow = COLS / 8;
    static constexpr int kBytes = ROWS * COLS * 2;
    // A 128-byte line holds 8 chunks; rows shorter than that share a line, so the XOR pattern advances once
    // per line (every 8 / kChunksPerRow rows) and only spans the chunks of one row.
    static constexpr int kRowsPerLine = kChunksPerRow >= 8 ? 1 : 8 / kChunksPerRow;
    static constexpr int kSwizzleMask = (kChunksPerRow >= 8 ? 8 : kChunksPerRow) - 1;
    static_assert(COLS % 8 == 0 && (kChunksPerRow & (kChunksPerRow - 1)) == 0 && kChunksPerRow >= 2,
                  "coda: a shared tile row must be a power-of-two number (>= 2) of 16-byte chunks");

    __device__ static unsigned offset(int row, int chunk) {
        const int swizzled = chunk ^ ((row / kRowsPerLine) & kSwizzleMask);
        return static_cast<unsigned>(row * (COLS * 2) + swizzled * 16);
    }
};

template <class Tile, int THREADS>
struct TileLoader {
    static constexpr int kChunks = Tile::kRows * Tile::kChunksPerRow;
    static constexpr int kPerThread = kChunks / THREADS;
    static_assert(kChunks % THREADS == 0, "coda: a shared tile must split evenly into 16-byte chunks per thread");

    __device__ static void load(unsigned dst, const unsigned short* g, long long ld, int row0, int col0,
                                int row_lim, int col_lim, bool vector) {
        // Consecutive threads take consecutive chunks of a row: each warp reads whole 128-byte lines.
        if (vector) {
#pragma unroll
            for (int it = 0; it < kPerThread; ++it) {
                const int q = static_cast<int>(threadIdx.x) + it * THREADS;
                const int r = q / Tile::kChunksPerRow;
                const int c = q % Tile::kChunksPerRow;
                const int gr = row0 + r;
                const int gc = col0 + c * 8;
                int valid = col_lim - gc;
                valid = gr < row_lim ? (valid < 0 ? 0 : (valid > 8 ? 8 : valid)) : 0;
                // A fully masked chunk still needs a mapped address: the matrix base.
                const unsigned short* src = valid > 0 ? g + gr * ld + gc : g;
                cp_async_16(dst + Tile::offset(r, c), src, valid * 2);
            }
        } else {
#pragma unroll
            for (int it = 0; it < kPerThread; ++it) {
                const int q = static_cast<int>(threadIdx.x) + it * THREADS;
                const int r = q / Tile::kChunksPerRow;
                const int c = q % Tile::kChunksPerRow;
                const int gr = row0 + r;
                const int gc = col0 + c * 8;
                const unsigned short* src = g + gr * ld + gc;
                unsigned w[4];
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const bool lo_ok = gr < row_lim && gc + 2 * e < col_lim;
                    const bool hi_ok = gr < row_lim && gc + 2 * e + 1 < col_lim;
                    const unsigned lo = lo_ok ? src[2 * e] : 0u;
                    const unsigned hi = hi_ok ? src[2 * e + 1] : 0u;
                    w[e] = lo | (hi << 16);
                }
                st_shared_16(dst + Tile::offset(r, c), w[0], w[1], w[2], w[3]);
            }
        }
    }
};

}  // namespace detail
}  // namespace coda
