// What the GPU tests share: the configs every GEMM check runs under, compiling a batch on all cores first, and a
// check that prints the whole report when it fails.
#pragma once

#include <vector>

#include "coda/runtime.hpp"
#include "verify/device_check.hpp"

namespace coda::test {

struct Build {
    Graph graph;
    CompileOptions options;
};

// CHECKs the report's pass, with its summary (every output's errors, clobbered padding) as context.
void require_pass(const verify::CheckReport& report);

// Compiles graphs on all host cores first, so that later compiles find them in the cache.
void warm_in_parallel(const std::vector<Build>& builds);

CompileOptions options_for(const KernelConfig& config);

// The main Hopper configs, one per schedule.
KernelConfig hopper_cooperative();
KernelConfig hopper_pingpong();

// The configs GEMM checks run under: the portable mainloop always; on an sm_90a device also the two main Hopper
// configs, then every other config `coda tune` may pick.
std::vector<KernelConfig> gemm_configs_under_test();

}  // namespace coda::test
