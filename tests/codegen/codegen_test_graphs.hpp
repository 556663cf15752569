// Graphs shared by the codegen tests: the out-projection epilogue of the design brief, and one small valid
// graph per (op, domain, width) that exercises that op.
#pragma once

#include <optional>

#include "coda/graph.hpp"

namespace coda::test {

// x1 = acc + residual; h = x1 * gamma; store x1 and h in bf16; row partials of x1^2.
Graph out_proj_graph();

// A valid graph using `op` on values of width `w` in `domain`, or nullopt when the op has no meaning
// there (an accumulator outside gemm, even/odd of a half-width value, a tile source in a finalizer, ...).
std::optional<Graph> graph_using(Op op, Domain domain, Width w);

}  // namespace coda::test
