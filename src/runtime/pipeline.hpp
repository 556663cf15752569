// The one place the stages meet: graph -> validation -> codegen -> cache key -> cache or NVRTC.
// Needs no GPU; loading and launching are the runtime's job.
#pragma once

#include <string>

#include "cache/kernel_cache.hpp"
#include "codegen/kernel_source.hpp"
#include "coda/kernel_config.hpp"
#include "ir/checked_graph.hpp"

namespace coda {

struct BuiltKernel {
    CheckedGraph checked;
    KernelConfig config;
    std::string arch;
    std::string name;        // "<graph name>-<graph hash>"
    std::string key;         // the cache key
    KernelSource source;
    CacheResult cached;
    double seconds = 0;      // wall time of build_kernel
};

// The configuration text that enters the cache key: the GEMM tile config, or the fixed tile of tile programs.
std::string config_text(Domain domain, const KernelConfig& config);

BuiltKernel build_kernel(const Graph& graph, const KernelConfig& config, const std::string& arch, KernelCache& cache);

}  // namespace coda
