// GPU architecture names as NVRTC takes them for a cubin: "sm_" + two or three digits + an optional 'a'
// (arch-specific) or 'f' (family) suffix. Shared by settings (CODA_ARCH) and codegen (the target check).
#pragma once

#include <optional>
#include <string_view>

namespace coda {

// The one target with wgmma and setmaxnreg (the Hopper mainloop's): arch-specific sm_90a, not plain sm_90.
inline constexpr std::string_view kHopperArch = "sm_90a";

// The number of an arch name (sm_90a -> 90, sm_100a -> 100), or nothing if the name is malformed.
std::optional<int> sm_number(std::string_view arch);

}  // namespace coda
