// Per-kernel resource usage read from the `ptxas -v` report inside an NVRTC log: registers, spills, stack
// and static shared memory, so that the runtime and tests can see register pressure without a profiler.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace coda {

struct ResourceUsage {
    std::string function;       // mangled name of the kernel (entry function)
    int registers = 0;
    int spill_store_bytes = 0;
    int spill_load_bytes = 0;
    int stack_frame_bytes = 0;
    int shared_bytes = 0;       // static shared memory only; dynamic shared memory is set at launch
    // 1 where ptxas serialized the kernel's wgmma instructions (its "Potential Performance Loss" note: a non-wgmma
    // instruction touches a pending wgmma's registers), which costs a Hopper kernel its tensor-core overlap.
    int wgmma_serialized = 0;
};

// One ResourceUsage per entry function of the log, in the order ptxas compiled them. Non-entry functions
// (noinline device functions) have no registers line of their own and are not reported. Lines that are not
// part of the report are ignored.
std::vector<ResourceUsage> parse_ptxas_report(std::string_view log);

}  // namespace coda
