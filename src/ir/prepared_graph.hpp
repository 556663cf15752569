// A graph as the build pipeline passes it along: checked, its canonical text rendered and hashed, each once. The
// passes are memoized per graph, so that what runs before a build on the same graph (the default config: the tuning
// lookup by hash, the epilogue's traffic from its bindings) and the build share one typing and one rendering.
#pragma once

#include <memory>
#include <string>

#include "coda/graph.hpp"
#include "ir/check_graph.hpp"
#include "ir/checked_graph.hpp"

namespace coda {

struct PreparedGraph {
    CheckedGraph checked;
    std::string text;  // to_text(checked.graph): the banner of the generated source, CODA_RECORD's files
    std::string hash;  // graph_hash(checked.graph): the kernel's name, the banner
};

// check_graph(g), with the same coda::Error for an invalid graph, plus its text and hash.
PreparedGraph prepare_graph(const Graph& g);

// type_graph(g), at most once per graph (problems included: an invalid graph is typed once too).
std::shared_ptr<const Typing> memoized_typing(const Graph& g);

// The canonical text of `g` and its hash, at most once per graph.
struct GraphIdentity {
    std::string text;
    std::string hash;
};
std::shared_ptr<const GraphIdentity> memoized_identity(const Graph& g);

}  // namespace coda
