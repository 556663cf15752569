#include "support/block_graphs.hpp"

#include "coda/blocks.hpp"
#include "ir/hash.hpp"

namespace coda::test {

std::vector<Graph> every_block_graph() {
    std::vector<Graph> graphs;
    for (const blocks::BlockEntry& e : blocks::catalog()) graphs.push_back(e.make());
    return graphs;
}

std::optional<Graph> block_graph_with_hash(const std::string& hash) {
    for (const Graph& g : every_block_graph())
        if (graph_hash(g) == hash) return g;
    return std::nullopt;
}

}  // namespace coda::test
