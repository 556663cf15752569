// The scalar semantics of every elementwise op and every reduction in double precision, written from the
// op definitions (not from ops.def's CUDA strings), so the reference checks codegen independently.
#pragma once

#include <vector>

#include "coda/graph.hpp"

namespace coda {

// Value of elementwise op `op` (unary, binary, compare, select or round) on its operands. `round_to` is the
// target dtype of Op::Round and ignored otherwise.
double apply_elementwise(Op op, DType round_to, const std::vector<double>& operands);

// Reduction of a set of values: sum, max, min, sum of squares, or log-sum-exp (max + log(sum exp(x - max))).
// The empty set gives the identity: 0, -inf, +inf, 0, -inf.
double reduce_values(ReduceOp op, const std::vector<double>& values);

}  // namespace coda
