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

// The most dynamic shared memory one CTA may opt in to on sm_<number> (the CUDA programming guide's table of
// compute capabilities): 163 KiB on 8.0 and 8.7, 227 KiB on 9.x to 11.x, 99 KiB on the others.
int max_dynamic_smem_bytes(int number);

}  // namespace coda
