// Canonical text of epilogue graphs: the printer (stable, human-readable, hashed into cache keys) and
// the parser that reads it back, so that graphs can live in files and round-trip exactly.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "coda/graph.hpp"
#include "coda/text.hpp"
#include "ir/check_graph.hpp"

namespace coda {

// The attributes an op carries in text, in the order they are printed.
enum class Attr { DType, Width, Reduce, Value };
std::vector<Attr> attributes_of(Op op);

// Graph and node names: [A-Za-z][A-Za-z0-9_]* (a leading '_' is reserved for unnamed nodes).
bool is_identifier(std::string_view s);

// "graph NAME DOMAIN", plus " in=DTYPE a=MAJOR b=MAJOR" for gemm graphs.
std::string header_to_text(const Graph& g);
// One node: "%NAME = OP ATTRS... ARGS...".
std::string node_to_text(const Graph& g, int id);
// A constant as printed: the shortest text that reads back to the same float; "inf", "-inf", "nan".
std::string const_to_text(float value);

// A `target arch=ARCH [config=CONFIG TEXT]` line after a graph: what CODA_RECORD saw it built for, which
// `coda warm` builds it for again. The config text (the rest of the line) is read by KernelConfig::parse.
struct RecordedTarget {
    std::string arch;
    std::string config_text;  // empty: no config (a tile program or finalizer)
    int line = 0;
};

struct ParsedGraph {
    Graph graph;
    SourceMap where;
    std::vector<RecordedTarget> targets;
};

// The line a `target` takes in a .coda file (with its '\n').
std::string target_to_text(const std::string& arch, const std::string& config_text);

// Every graph of a file, each with the lines its nodes came from (check_graph's messages then point at them).
// Syntax errors throw coda::Error "FILE:LINE: ..." naming the node and what was expected. Not validated.
std::vector<ParsedGraph> parse_graph_file(std::string_view text, std::string_view source_name);

}  // namespace coda
