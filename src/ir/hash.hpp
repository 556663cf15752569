// The identity of a graph: a short hash of its canonical text, used in cache keys, kernel names and
// generated-source banners. Two graphs have the same hash exactly when they print the same.
#pragma once

#include <string>

#include "coda/graph.hpp"

namespace coda {

// The first 16 hex characters of sha256_hex(to_text(g)).
std::string graph_hash(const Graph& g);

// The same hash of a canonical text already rendered (graph_hash(g) == text_hash(to_text(g))).
std::string text_hash(const std::string& canonical_text);

}  // namespace coda
