// The list of mainloops, and the choices made from it: which mainloop runs a graph with a given config (or with
// none), which one is an arch's default for GEMMs, and which one a config text names.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "mainloop/mainloop.hpp"

namespace coda {

// Every mainloop, GEMM mainloops first in the order their default_on(arch) is asked.
const std::vector<const Mainloop*>& all_mainloops();

// The GEMM mainloop a GEMM graph gets on `arch` when no config is given: the first whose default_on(arch) holds.
const Mainloop& default_gemm_mainloop(const std::string& arch);

// The mainloop that owns `config`.
const Mainloop& mainloop_of(const KernelConfig& config);

// The mainloop that runs `graph` with `config`: the config's owner, or without one the arch's default GEMM
// mainloop or the program of the graph's domain. A coda::Error when a config is given to a graph that takes none.
const Mainloop& mainloop_for(const Graph& graph, const std::optional<KernelConfig>& config, const std::string& arch);

}  // namespace coda
