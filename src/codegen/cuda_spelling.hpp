// How IR things are spelled in generated CUDA: node identifiers, exact float literals, storage types and
// reducer names. Kept in one place so that every emitted statement uses the same vocabulary.
#pragma once

#include <string>
#include <string_view>

#include "coda/graph.hpp"
#include "ir/checked_graph.hpp"

namespace coda::codegen {

// "v<id>_<name>" for named nodes, "v<id>" for unnamed ones. The id prefix makes every identifier unique and
// keeps it clear of the generated code's own locals (which never start with 'v' and a digit).
std::string value_identifier(const Graph& g, int id);

// A CUDA float literal that denotes exactly `x`: a hex float with an f suffix, or an __int_as_float bit
// pattern for infinities. NaN is rejected by validation, so it is an internal error here.
std::string float_literal(float x);

// Values a visit holds for one column pair: 1 (half width), 2 (full) or 4 (double).
int lanes(Width w);
// Lanes of a typed value: tiles and column vectors by width, rows and scalars 1.
int lanes(const ValueType& t);

// The element type of a value in registers: "float" or "int".
std::string_view register_type(const ValueType& t);

// The device storage type of a tensor: coda::bf16, coda::f16, float or int.
std::string_view storage_type(DType d);

// "coda::Reducer<coda::RedOp::Sum>" and friends.
std::string reducer(ReduceOp r);
// "coda::RedOp::Sum" and friends.
std::string_view red_op(ReduceOp r);

}  // namespace coda::codegen
