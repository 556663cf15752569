// What coda's own stages may do with a Graph that its users may not: append a parsed node as is (the text parser),
// name the node storage that copies share (the runtime's fast path), and find the graph of a Value (the operators).
#pragma once

#include <memory>

#include "coda/graph.hpp"

namespace coda::detail {

struct GraphAccess {
    // Appends a node as is; its operands must already exist (coda::Error otherwise).
    static int append(Graph& graph, Node node) { return graph.append(std::move(node)); }
    // Graphs only grow, so (storage, node count) names one exact graph for as long as the storage lives.
    static std::weak_ptr<const void> storage(const Graph& graph) { return graph.data_; }
    // The graph a value belongs to; coda::Error for an empty Value.
    static Graph of(const Value& value);
};

}  // namespace coda::detail
