// The public validation entry points (coda/validate.hpp), both on the typing pass of check_graph.cpp,
// so that what users are told and what codegen relies on can never disagree.
#include "coda/validate.hpp"

#include "ir/check_graph.hpp"

namespace coda {

std::vector<Problem> find_problems(const Graph& graph) { return type_graph(graph).problems; }

void check(const Graph& graph) { check_graph(graph); }

}  // namespace coda
