// The size checks of validation against coda/limits.hpp. Every message names the limit's constant, its value
// and the graph's, and says how to stay within it.
#include "ir/graph_limits.hpp"

#include <fmt/format.h>

#include "coda/limits.hpp"

namespace coda {

std::vector<Problem> size_problems(const Graph& g) {
    std::vector<Problem> out;
    const std::size_t nodes = g.nodes().size();
    if (nodes > static_cast<std::size_t>(limits::kMaxNodes))
        out.push_back({-1, fmt::format("{} nodes, more than coda::limits::kMaxNodes = {}: NVRTC would take minutes "
                                       "to compile the kernel; split the work into several graphs",
                                       nodes, limits::kMaxNodes)});
    std::size_t bindings = 0;
    for (const Node& n : g.nodes()) bindings += is_binding(n.op) ? 1 : 0;
    if (bindings > static_cast<std::size_t>(limits::kMaxBindings))
        out.push_back({-1, fmt::format("{} inputs and outputs (bound at launch), more than coda::limits::kMaxBindings "
                                       "= {}; split the work into several graphs",
                                       bindings, limits::kMaxBindings)});
    return out;
}

std::optional<Problem> parameter_problem(const std::vector<Binding>& bindings, int extra_slots) {
    long long slots = extra_slots;
    for (const Binding& b : bindings) slots += slot_count(b);
    const long long bytes = limits::kKernelFixedParamBytes + limits::kKernelParamSlotBytes * slots;
    if (bytes <= limits::kMaxKernelParamBytes) return std::nullopt;
    return Problem{-1, fmt::format("the kernel's parameters would take {} bytes ({} for the GEMM problem and tensor "
                                   "maps, {} for each of {} parameter slots: 2 per tile tensor, 1 per vector, partials "
                                   "tensor or scalar), more than coda::limits::kMaxKernelParamBytes = {}; use fewer "
                                   "tile tensors, or split the work into several graphs",
                                   bytes, limits::kKernelFixedParamBytes, limits::kKernelParamSlotBytes, slots,
                                   limits::kMaxKernelParamBytes)};
}

}  // namespace coda
