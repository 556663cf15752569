// Validation and typing of a graph in one pass: every problem at once, in the user's names, and for a
// valid graph the type of every node and the kernel's bindings (what codegen and the runtime need).
#pragma once

#include <string>
#include <vector>

#include "coda/graph.hpp"
#include "coda/validate.hpp"
#include "ir/checked_graph.hpp"

namespace coda {

// Where a parsed graph came from, so that problems can point at file lines.
struct SourceMap {
    std::string source_name;
    std::vector<int> node_lines;  // one per node id
    int header_line = 0;
};

// Validates and types the graph; throws coda::Error listing EVERY problem (one per line). With a
// SourceMap the lines read "FILE:LINE: node '%x': message", otherwise
// "graph 'g', node '%x' (`<canonical line>`): message".
CheckedGraph check_graph(const Graph& g, const SourceMap* where = nullptr);

// The pass behind check_graph and find_problems: types (error nodes keep a default type) and bindings
// are meaningful only when `problems` is empty.
struct Typing {
    std::vector<ValueType> types;
    std::vector<Binding> bindings;
    std::vector<Problem> problems;  // graph-level problems (node -1) first, then in node order
};
Typing type_graph(const Graph& g);

// One line per problem, as check_graph reports them.
std::string format_problems(const Graph& g, const std::vector<Problem>& problems, const SourceMap* where);

}  // namespace coda
