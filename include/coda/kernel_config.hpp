// Tile configuration of a GEMM kernel: the compile-time parameters of one mainloop template. Part of the cache key.
//
// Two mainloops run GEMM graphs (templates/coda/): the portable one (mma.sync + cp.async, sm_80 and newer) and the
// Hopper one (TMA + wgmma, warp-specialized and persistent, sm_90a only). Each has its own config type; a
// KernelConfig holds one of them. A default-constructed PortableConfig or HopperConfig is that mainloop's default.
// Tile programs and finalizers have a fixed tile and take no config.
#pragma once

#include <string>
#include <variant>

namespace coda {

// The portable mainloop's tile: a bm x bn CTA tile of warps_m x warps_n warps, bk deep, `stages` deep in shared
// memory. The defaults are its default config.
struct PortableConfig {
    int bm = 128;
    int bn = 128;
    int bk = 32;
    int warps_m = 2;
    int warps_n = 2;
    int stages = 4;

    bool operator==(const PortableConfig& o) const {
        return bm == o.bm && bn == o.bn && bk == o.bk && warps_m == o.warps_m && warps_n == o.warps_n &&
               stages == o.stages;
    }
    bool operator!=(const PortableConfig& o) const { return !(*this == o); }
};

// How the Hopper mainloop's two consumer warpgroups share work.
//   Cooperative: both work on one bm x bn tile, each on bm/2 rows; the tile's epilogue runs on both.
//   PingPong:    each owns whole bm x bn tiles, alternating; one's epilogue overlaps the other's mainloop.
enum class Schedule { Cooperative, PingPong };

// The Hopper mainloop's tile: bm x bn, K in steps of 64 (one 128-byte swizzle row of 16-bit elements), at most
// `stages` pipeline stages (fewer when the epilogue's shared memory needs the room), clusters of cluster_m CTAs
// along M that share B, or of cluster_n CTAs along N that share A, by TMA multicast (2 CTAs at most). The defaults (ping-pong 128 x 128, 6 stages) are the default config of most
// graphs; Runtime::default_config says which one a graph gets.
struct HopperConfig {
    int bm = 128;
    int bn = 128;
    int stages = 6;
    Schedule schedule = Schedule::PingPong;
    int cluster_m = 1;
    int cluster_n = 1;
    // The kernel's tile tensors (tile inputs, stores) move through shared memory by TMA where the epilogue leaves the
    // room ("staging"), which needs them 16-byte aligned. `direct` builds the variant that reads and writes them in
    // global memory instead: what a launch whose tile tensors are not aligned runs on (compiled on first need). Text:
    // the word "direct".
    bool direct = false;

    static constexpr int bk = 64;

    bool operator==(const HopperConfig& o) const {
        return bm == o.bm && bn == o.bn && stages == o.stages && schedule == o.schedule && cluster_m == o.cluster_m &&
               cluster_n == o.cluster_n && direct == o.direct;
    }
    bool operator!=(const HopperConfig& o) const { return !(*this == o); }
};

// One mainloop's config. Converts implicitly from PortableConfig and HopperConfig.
class KernelConfig {
public:
    using Alternatives = std::variant<PortableConfig, HopperConfig>;

    KernelConfig(const PortableConfig& c) : config_(c) {}  // NOLINT(google-explicit-constructor)
    KernelConfig(const HopperConfig& c) : config_(c) {}    // NOLINT(google-explicit-constructor)

    // Canonical text: "portable bm=128 bn=128 bk=32 wm=2 wn=2 stages=4" or
    // "hopper bm=128 bn=128 bk=64 stages=6 pingpong cluster=1" (with " cluster_n=2" for a cluster along N, then
    // " direct" where set). It names the mainloop first.
    std::string to_text() const;
    // The inverse of to_text. Fields may come in any order; those left out keep the mainloop's default (so
    // "hopper bm=256" is the default Hopper config with bm = 256). A text without a mainloop word is portable.
    // A coda::Error names what is wrong with any other text.
    static KernelConfig parse(const std::string& text);

    const PortableConfig* portable() const { return std::get_if<PortableConfig>(&config_); }
    const HopperConfig* hopper() const { return std::get_if<HopperConfig>(&config_); }
    const Alternatives& alternatives() const { return config_; }

    bool operator==(const KernelConfig& o) const { return config_ == o.config_; }
    bool operator!=(const KernelConfig& o) const { return !(*this == o); }

private:
    Alternatives config_;
};

}  // namespace coda
