// What the GPU tests share: the configs every GEMM check runs under, compiling a batch on all cores first, a
// check that prints the whole report when it fails, and skipping a case that needs another GPU.
#pragma once

#include <string>
#include <vector>

#include "coda/runtime.hpp"
#include "support/skip_ledger.hpp"
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

// The suite's one ledger of skipped cases: skip_unless writes it, gpu_main.cpp counts the cases run into it and
// takes the exit code from it.
SkipLedger& skip_ledger();

// Ends the running case as skipped, never passed, unless `condition` holds: records it in skip_ledger(), prints
// "SKIPPED: <case>: <why>" and returns true, so that the case returns at once:
//     if (skip_unless(device_sm() >= 89, "FP8 stores need sm_89")) return;
bool skip_unless(bool condition, const std::string& why);
// The same for an sm_90a device (the Hopper mainloop: wgmma, TMA, stream-K, FP8 operands); the reason printed
// names this device's arch beside `why`.
bool skip_unless_hopper(const std::string& why);

bool on_hopper();  // the current device is sm_90a
int device_sm();   // the current device's sm number (89 for sm_89, 90 for sm_90a)

}  // namespace coda::test
