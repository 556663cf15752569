// One cached kernel: the cubin plus what the runtime and `coda cache list` need without recompiling.
// Shared by the in-memory map, the on-disk file format and the cache's users.
#pragma once

#include <string>
#include <vector>

#include "compile/ptxas_report.hpp"

namespace coda {

struct CacheEntry {
    std::string cubin;
    std::string kernel_name;                // lowered (mangled) name of the kernel in the cubin
    std::vector<ResourceUsage> resources;   // from the ptxas report of the compile
    std::string description;                // one line: graph name, hash, arch, config
    std::string source;                     // generated CUDA, for `coda dump`-like inspection

    // The ptxas report of the kernel itself (not of a device function it calls), or nullptr without a report.
    const ResourceUsage* kernel_usage() const {
        for (const ResourceUsage& u : resources)
            if (u.function == kernel_name) return &u;
        return nullptr;
    }
};

}  // namespace coda
