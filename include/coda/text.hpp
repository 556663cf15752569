// The canonical text form of graphs: what `coda dump` and the .coda files hold, what logs and bug reports quote,
// and what the cache key hashes. to_text and the parsers round-trip exactly: parse_graph(to_text(g)) == g.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "coda/graph.hpp"

namespace coda {

// The whole graph: a header line ("graph NAME DOMAIN", plus " in=DTYPE a=MAJOR b=MAJOR" for gemm graphs), then one
// line per node in node order ("%NAME = OP ATTRS... ARGS..."). Ends with '\n'.
std::string to_text(const Graph& g);

// Exactly one graph (blank lines and '#' comments ignored), else a coda::Error. The graph is not validated: call
// coda::check, or let Runtime::compile do it.
Graph parse_graph(std::string_view text);

// Every graph of a text, e.g. a .coda file's; syntax errors throw a coda::Error "SOURCE:LINE: ..." naming the node
// and what was expected. The graphs are not validated.
std::vector<Graph> parse_graphs(std::string_view text, std::string_view source_name = "<text>");

}  // namespace coda
