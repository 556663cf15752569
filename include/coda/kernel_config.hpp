// Tile configuration of a kernel: compile-time parameters of the mainloop template. Part of the cache key.
//
// Two mainloops exist (templates/coda/): the portable one (mma.sync + cp.async, sm_80 and newer) and the
// Hopper one (TMA + wgmma, warp-specialized and persistent, sm_90a only). Runtime::default_config picks the
// Hopper mainloop on sm_90a and the portable one elsewhere; a config passed explicitly is used as given.
#pragma once

#include <string>
#include <vector>

namespace coda {

enum class Mainloop { Portable, Hopper };

// How the Hopper mainloop's two consumer warpgroups share work.
//   Cooperative: both work on one bm x bn tile, each on bm/2 rows; the tile's epilogue runs on both.
//   PingPong:    each owns whole bm x bn tiles, alternating; one's epilogue overlaps the other's mainloop.
enum class Schedule { Cooperative, PingPong };

struct KernelConfig {
    int bm = 128;      // rows of the CTA tile
    int bn = 128;      // full columns of the CTA tile
    int bk = 32;       // K depth of one pipeline stage
    int warps_m = 2;   // portable: warps along M
    int warps_n = 2;   // portable: warps along N
    int stages = 4;    // shared-memory pipeline depth (Hopper: at most; fewer when the epilogue's scratch needs room)
    Mainloop mainloop = Mainloop::Portable;
    Schedule schedule = Schedule::Cooperative;  // Hopper only
    int cluster_m = 1;  // Hopper only: CTAs of a cluster along M (1 or 2); a pair shares B by TMA multicast

    // Canonical text. Portable: "bm=128 bn=128 bk=32 wm=2 wn=2 stages=4";
    // Hopper: "hopper bm=128 bn=256 bk=64 stages=4 cooperative cluster=1".
    std::string to_text() const;
    // The inverse of to_text; a coda::Error names what is wrong with any other text.
    static KernelConfig parse(const std::string& text);
    bool operator==(const KernelConfig& o) const {
        return bm == o.bm && bn == o.bn && bk == o.bk && warps_m == o.warps_m && warps_n == o.warps_n &&
               stages == o.stages && mainloop == o.mainloop && schedule == o.schedule && cluster_m == o.cluster_m;
    }
    bool operator!=(const KernelConfig& o) const { return !(*this == o); }
};

// A Hopper config with the given tile; bk = 64 (one 128-byte swizzle row of 16-bit elements).
KernelConfig hopper_config(int bm, int bn, int stages, Schedule schedule, int cluster_m = 1);

// The named Hopper configs `coda tune` times, e.g. {"h128x256", ...}. Every one is valid for every graph.
struct NamedConfig {
    std::string name;
    KernelConfig config;
};
const std::vector<NamedConfig>& hopper_named_configs();

// The fixed tile of tile programs (templates/coda/tile_program.cuh) and finalizers.
constexpr int kTileProgramBM = 64;
constexpr int kTileProgramBN = 128;
constexpr int kTileProgramThreads = 256;
constexpr int kFinalizeThreads = 256;

}  // namespace coda
