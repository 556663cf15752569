#include "support/block_graphs.hpp"

#include "coda/blocks.hpp"
#include "ir/hash.hpp"

namespace coda::test {

std::vector<Graph> every_block_graph() {
    std::vector<Graph> graphs = blocks::llama_block();
    for (const Graph& g : blocks::llama_block_fp8()) graphs.push_back(g);
    for (const Graph& g : blocks::llama_block_fp8_blockwise()) graphs.push_back(g);
    for (const Graph& g : blocks::llama_block_fp8_rowwise()) graphs.push_back(g);
    return graphs;
}

std::optional<Graph> block_graph_with_hash(const std::string& hash) {
    for (const Graph& g : every_block_graph())
        if (graph_hash(g) == hash) return g;
    return std::nullopt;
}

}  // namespace coda::test
