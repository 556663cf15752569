// The portable mainloop (templates/coda/portable_gemm.cuh: mma.sync + cp.async, sm_80 and newer): the default
// for GEMM graphs on every arch but sm_90a, and where the Hopper mainloop's kernels cannot run.
#pragma once

#include "mainloop/mainloop.hpp"

namespace coda {

const Mainloop& portable_mainloop();

}  // namespace coda
