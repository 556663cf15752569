// Whole-graph validation: reports every problem at once, in the user's own names.
#pragma once

#include <string>
#include <vector>

#include "coda/graph.hpp"

namespace coda {

// One problem found by validation, tied to a node (or -1 for the whole graph).
struct Problem {
    int node = -1;
    std::string message;
};

// Returns every problem in the graph; empty when the graph is valid.
std::vector<Problem> find_problems(const Graph& graph);

// Throws coda::Error listing every problem (one per line, each with the node in canonical text).
void check(const Graph& graph);

}  // namespace coda
