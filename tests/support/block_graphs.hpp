// The ready-made block epilogues of every recipe, for tests that look one up or go through all of them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "coda/graph.hpp"

namespace coda::test {

// Every graph of the block catalog (blocks.def) with its default spec: the BF16 block's graphs, then the FP8 blocks'
// (tensorwise, block-wise, row-wise).
std::vector<Graph> every_block_graph();

// The block graph whose graph_hash is `hash`, if any.
std::optional<Graph> block_graph_with_hash(const std::string& hash);

}  // namespace coda::test
