// The one place the stages meet: graph -> validation -> mainloop choice -> codegen -> cache key -> cache or NVRTC.
// Needs no GPU; loading and launching are the runtime's job.
#pragma once

#include <optional>
#include <string>

#include "cache/cache_key.hpp"
#include "cache/kernel_cache.hpp"
#include "codegen/kernel_source.hpp"
#include "coda/kernel_config.hpp"
#include "ir/checked_graph.hpp"
#include "mainloop/mainloop.hpp"

namespace coda {

// What a kernel is built for: the arch, the mainloop that runs it and its config (empty for mainloops without one).
struct BuildTarget {
    std::string arch;
    const Mainloop* mainloop = nullptr;
    std::optional<KernelConfig> config;
};

struct BuiltKernel {
    CheckedGraph checked;
    BuildTarget target;
    std::string name;        // "<graph name>-<graph hash>"
    std::string key;         // the cache key
    KernelSource source;
    CacheResult cached;
    double seconds = 0;      // wall time of build_kernel
};

// What the cache key of `source`, generated for `target`, hashes: the generated source itself (so a change to the
// code generator changes the key), the templates it includes, the config, the NVRTC version, the arch and flags.
CacheKeyParts key_parts(const Graph& graph, const BuildTarget& target, const KernelSource& source);

BuiltKernel build_kernel(const Graph& graph, const BuildTarget& target, KernelCache& cache);

}  // namespace coda
