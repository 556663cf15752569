// FP8 kernels compile (and CI checks them for spills) but have not yet run on a GPU: until they have (issue 28),
// launching one is a coda::Error unless CODA_EXPERIMENTAL_FP8=1 (or the override below) says to run it anyway.
#pragma once

#include <optional>

#include "ir/checked_graph.hpp"

namespace coda {

// Whether a graph has FP8 operands or FP8 tile tensors.
bool uses_fp8(const Graph& g);

// Throws coda::Error naming the kernel where `g` uses FP8 and running it is not allowed.
void expect_fp8_allowed(const Graph& g, const std::string& kernel_name);

// For tests: allow (or forbid) FP8 launches whatever CODA_EXPERIMENTAL_FP8 says; nullopt goes back to it.
void set_experimental_fp8_override(std::optional<bool> allowed);

}  // namespace coda
