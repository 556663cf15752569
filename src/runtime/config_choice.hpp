// Which tile configuration a graph gets when the caller names none: a tuned one from the tuning database,
// else the mainloop's default. choose_config is the pure decision; Runtime::default_config feeds it the current device.
#pragma once

#include <string>

#include "coda/graph.hpp"
#include "coda/kernel_config.hpp"
#include "coda/runtime.hpp"
#include "tune/tuning_db.hpp"

namespace coda {

// The GPU a config is chosen for. An empty name means none is known: no GPU, or one whose arch is not the
// arch compiled for (coda warm for another machine); tuned records are then not used.
struct TargetDevice {
    std::string name;   // as the driver reports it, e.g. "NVIDIA H200"
    int sm_count = 0;   // 0: unknown
};

// The Hopper mainloop's default tile config, where no tuned record applies (config_choice.cpp says why this one).
KernelConfig hopper_default_config();

// Non-GEMM graphs and archs other than sm_90a: the portable KernelConfig{}. sm_90a: the record of `db` for
// (device name, graph hash, shape class) when there is one, else hopper_default_config().
KernelConfig choose_config(const Graph& graph, const std::string& arch, const ProblemShape& shape,
                           const TargetDevice& device, const TuningDb* db);

// Runtime::default_config for a device the caller already knows (Runtime::compile keeps it per context), with
// the process's tuning database.
KernelConfig default_config_on(const Graph& graph, const std::string& arch, const ProblemShape& shape,
                               const TargetDevice& device);

}  // namespace coda
