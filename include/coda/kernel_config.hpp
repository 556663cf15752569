// Tile configuration of a kernel: compile-time parameters of the mainloop template. Part of the cache key.
#pragma once

#include <string>

namespace coda {

struct KernelConfig {
    int bm = 128;      // rows of the CTA tile
    int bn = 128;      // full columns of the CTA tile
    int bk = 32;       // K depth of one pipeline stage
    int warps_m = 2;   // warps along M
    int warps_n = 2;   // warps along N
    int stages = 4;    // shared-memory pipeline depth

    // Canonical text, e.g. "bm=128 bn=128 bk=32 wm=2 wn=2 stages=4".
    std::string to_text() const;
    bool operator==(const KernelConfig& o) const {
        return bm == o.bm && bn == o.bn && bk == o.bk && warps_m == o.warps_m && warps_n == o.warps_n &&
               stages == o.stages;
    }
};

// The fixed tile of tile programs (templates/coda/tile_program.cuh) and finalizers.
constexpr int kTileProgramBM = 64;
constexpr int kTileProgramBN = 128;
constexpr int kTileProgramThreads = 256;
constexpr int kFinalizeThreads = 256;

}  // namespace coda
