// The size checks of validation (coda/limits.hpp): a graph too large for one kernel is a user error that names
// the limit and the graph's value, found before NVRTC could fail, crash or run for minutes on it.
#pragma once

#include <optional>
#include <vector>

#include "coda/graph.hpp"
#include "coda/validate.hpp"
#include "ir/checked_graph.hpp"

namespace coda {

// Too many nodes or bindings: needs no typing, so it holds for any graph.
std::vector<Problem> size_problems(const Graph& g);

// Kernel parameters over kMaxKernelParamBytes, from the bindings of a graph whose every node has a type.
std::optional<Problem> parameter_problem(const std::vector<Binding>& bindings, int extra_slots = 0);

}  // namespace coda
