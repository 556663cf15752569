// The Hopper mainloop (templates/coda/hopper_gemm.cuh: TMA + wgmma, warp-specialized, persistent, sm_90a only):
// the default for GEMM graphs on sm_90a.
#pragma once

#include "mainloop/mainloop.hpp"

namespace coda {

const Mainloop& hopper_mainloop();

// `config` with the hopper_experiment bits of `wanted` that its kernel for `graph` can take added (Settings'
// CODA_HOPPER_EXPERIMENTS, for the configs coda chooses); any other config as it is.
KernelConfig with_hopper_experiments(const Graph& graph, const KernelConfig& config, unsigned wanted);

}  // namespace coda
