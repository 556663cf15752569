// The Hopper mainloop (templates/coda/hopper_gemm.cuh: TMA + wgmma, warp-specialized, persistent, sm_90a only):
// the default for GEMM graphs on sm_90a.
#pragma once

#include "mainloop/mainloop.hpp"

namespace coda {

const Mainloop& hopper_mainloop();

}  // namespace coda
