// Code generation of the device functor for a checked graph: struct Epilogue (gemm and tile graphs, the
// contract of templates/coda/epilogue_contract.cuh) or struct Program (finalize graphs).
#pragma once

#include <string>

#include "ir/checked_graph.hpp"

namespace coda {

// The functor's source alone, without namespace or includes; generate_kernel_source splices it.
// Deterministic: the same graph always gives byte-identical text.
std::string generate_epilogue(const CheckedGraph& g);

}  // namespace coda
