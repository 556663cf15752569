#include "runtime/fp8_gate.hpp"

#include <atomic>

#include <fmt/format.h>

#include "coda/error.hpp"
#include "config/settings.hpp"

namespace coda {
namespace {

// -1: the environment decides; 0 or 1: the override.
std::atomic<int> override_state{-1};

bool is_fp8(DType d) { return d == DType::E4M3 || d == DType::E5M2; }

}  // namespace

bool uses_fp8(const Graph& g) {
    if (g.domain() == Domain::Gemm && (is_fp8(g.spec().input) || is_fp8(g.spec().b_input()))) return true;
    for (const Node& n : g.nodes())
        if (is_fp8(n.dtype)) return true;
    return false;
}

void expect_fp8_allowed(const Graph& g, const std::string& kernel_name) {
    const int state = override_state.load(std::memory_order_relaxed);
    const bool allowed = state < 0 ? settings().experimental_fp8 : state == 1;
    if (allowed || !uses_fp8(g)) return;
    throw Error(fmt::format("kernel '{}' reads or writes FP8, and coda's FP8 kernels have not been run on a GPU yet "
                            "(they compile without spills; issue 28): set CODA_EXPERIMENTAL_FP8=1 to launch them anyway",
                            kernel_name));
}

void set_experimental_fp8_override(std::optional<bool> allowed) {
    override_state.store(allowed ? (*allowed ? 1 : 0) : -1, std::memory_order_relaxed);
}

}  // namespace coda
