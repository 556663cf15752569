// The GPU tests' shared helpers (gpu_support.hpp).
#include "gpu/gpu_support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <mutex>
#include <thread>

#include "driver/cuda_driver.hpp"
#include "mainloop/hopper.hpp"
#include "util/arch.hpp"

namespace coda::test {

void require_pass(const verify::CheckReport& report) {
    INFO(report.kernel << " " << report.problem << "\n" << report.summary());
    CHECK(report.pass);
}

void warm_in_parallel(const std::vector<Build>& builds) {
    std::vector<std::thread> threads;
    std::atomic<std::size_t> next{0};
    // A compile error in a worker would end the process (std::terminate); it is rethrown here instead, so that it
    // fails the test that asked for the build.
    std::mutex failure_mutex;
    std::exception_ptr failure;
    const unsigned workers = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
    for (unsigned t = 0; t < workers; ++t)
        threads.emplace_back([&] {
            for (std::size_t i = next++; i < builds.size(); i = next++) {
                try {
                    Runtime::instance().compile(builds[i].graph, builds[i].options);
                } catch (...) {
                    const std::lock_guard<std::mutex> lock(failure_mutex);
                    if (!failure) failure = std::current_exception();
                }
            }
        });
    for (auto& t : threads) t.join();
    if (failure) std::rethrow_exception(failure);
}

CompileOptions options_for(const KernelConfig& config) {
    CompileOptions options;
    options.config = config;
    return options;
}

KernelConfig hopper_cooperative() { return HopperConfig{128, 256, 4, Schedule::Cooperative, 1}; }
KernelConfig hopper_pingpong() { return HopperConfig{128, 128, 6, Schedule::PingPong, 1}; }

std::vector<KernelConfig> gemm_configs_under_test() {
    std::vector<KernelConfig> configs = {PortableConfig{}};
    if (!on_hopper()) return configs;
    configs.push_back(hopper_cooperative());
    configs.push_back(hopper_pingpong());
    for (const NamedConfig& named : hopper_mainloop().candidates())
        if (std::find(configs.begin(), configs.end(), named.config) == configs.end()) configs.push_back(named.config);
    return configs;
}

SkipLedger& skip_ledger() {
    static SkipLedger ledger;
    return ledger;
}

bool skip_unless(bool condition, const std::string& why) {
    if (condition) return false;
    const std::string test_case = Catch::getResultCapture().getCurrentTestName();
    skip_ledger().skipped(test_case, why);
    std::printf("%s\n", SkipLedger::line(test_case, why).c_str());
    std::fflush(stdout);
    return true;
}

bool skip_unless_hopper(const std::string& why) {
    Driver::instance().ensure_context();
    return skip_unless(on_hopper(), "needs an sm_90a device, this one is " + Driver::instance().current_device().arch +
                                        ": " + why);
}

bool on_hopper() {
    Driver::instance().ensure_context();
    return Driver::instance().current_device().arch == kHopperArch;
}

int device_sm() {
    Driver::instance().ensure_context();
    return sm_number(Driver::instance().current_device().arch).value_or(0);
}

}  // namespace coda::test
