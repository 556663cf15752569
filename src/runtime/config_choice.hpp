// Which tile configuration a graph gets when the caller names none: a tuned one from the tuning database, else the
// default of the arch's mainloop. choose_config is the pure decision; Runtime::default_config feeds it the current
// device.
#pragma once

#include <optional>
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

// Tile programs and finalizers: none (their tile is fixed). GEMM graphs: the record of `db` (the user's tuning file)
// for (device name, graph hash, shape class) when there is one and the arch's default mainloop owns its config, else
// such a record of `shipped` (builtin_tuning_db), else that mainloop's default_config.
std::optional<KernelConfig> choose_config(const Graph& graph, const std::string& arch, const ProblemShape& shape,
                                          const TargetDevice& device, const TuningDb* db,
                                          const TuningDb* shipped = nullptr);

// Runtime::default_config for a device the caller already knows (Runtime::compile keeps it per context), with
// the process's tuning database.
std::optional<KernelConfig> default_config_on(const Graph& graph, const std::string& arch, const ProblemShape& shape,
                                              const TargetDevice& device);

}  // namespace coda
