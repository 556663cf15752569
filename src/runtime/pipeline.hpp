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
#include "ir/prepared_graph.hpp"
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

// What the cache key of `source`, generated for `target`, hashes: the generated source itself (the graph and config
// it was generated from, and the code generator: a change to either changes the key), the templates it includes, the
// NVRTC version, the arch and flags.
CacheKeyParts key_parts(const BuildTarget& target, const KernelSource& source);

// One build, from a graph prepared once (checked, printed, hashed) to its cache entry: codegen, the key, then the
// cache or NVRTC. The overload on a Graph prepares it first (prepare_graph: a coda::Error for an invalid graph).
BuiltKernel build_kernel(const PreparedGraph& graph, const BuildTarget& target, KernelCache& cache);
BuiltKernel build_kernel(const Graph& graph, const BuildTarget& target, KernelCache& cache);

}  // namespace coda
