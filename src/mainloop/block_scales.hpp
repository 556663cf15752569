// The tensors a block-scaled GEMM's mainloop reads beside A and B (coda::block_scale_operands), looked up from a
// graph: for the stages that bind, check and count them beside the epilogue's bindings.
#pragma once

#include <string_view>
#include <vector>

#include "coda/graph.hpp"

namespace coda {

// A graph's block scales: its spec's for a GEMM graph, none for tile programs and finalizers.
const std::vector<BlockScaleOperand>& block_scale_operands(const Graph& graph);

// The block scale bound as `name` in `graph`, or nullptr when `name` is none of them.
const BlockScaleOperand* find_block_scale(const Graph& graph, std::string_view name);

}  // namespace coda
