#include "mainloop/epilogue_cost.hpp"

#include <vector>

#include "ir/graph_memo.hpp"
#include "ir/prepared_graph.hpp"

namespace coda {
namespace {

// Elements of a tile tensor of `width` per accumulator element (a column pair of the accumulator holds one value
// of a half-width tensor and four of a double-width one).
double elements_per_accumulator(Width width) {
    switch (width) {
        case Width::Half: return 0.5;
        case Width::Full: return 1.0;
        case Width::Double: return 2.0;
    }
    return 1.0;
}

EpilogueTraffic measure(const Graph& graph) {
    EpilogueTraffic t;
    if (graph.domain() != Domain::Gemm) return t;
    // The typing the build of this graph reuses (prepare_graph), so that choosing its config types it no second time.
    const std::shared_ptr<const Typing> typing = memoized_typing(graph);
    if (!typing->problems.empty()) return t;
    for (const Binding& b : typing->bindings) {
        if (!is_tile_tensor(b)) continue;
        const double bytes = elements_per_accumulator(b.width) * static_cast<double>(size_of(b.dtype)) *
                             (b.role == BindingRole::InOut ? 2.0 : 1.0);
        const bool fragments = b.width == Width::Full && size_of(b.dtype) == 2 && !b.transposed;
        (fragments ? t.fragment_bytes : t.per_visit_bytes) += bytes;
    }
    return t;
}

// Whether every node is the accumulator or a `sink` (store, accumulate) of it.
bool sinks_accumulator_only(const Graph& graph, Op sink) {
    if (graph.domain() != Domain::Gemm || graph.nodes().empty()) return false;
    for (const Node& n : graph.nodes()) {
        const bool sink_of_accumulator =
            n.op == sink && n.args.size() == 1 && graph.node(n.args[0]).op == Op::Accumulator;
        if (n.op != Op::Accumulator && !sink_of_accumulator) return false;
    }
    return true;
}

}  // namespace

EpilogueTraffic epilogue_traffic(const Graph& graph) {
    static GraphMemo<EpilogueTraffic> memo;
    return memo.get(graph, measure);
}

bool stores_accumulator_only(const Graph& graph) { return sinks_accumulator_only(graph, Op::Store); }

bool accumulates_accumulator_only(const Graph& graph) { return sinks_accumulator_only(graph, Op::Accumulate); }

bool stores_scaled_accumulator_only(const Graph& graph) {
    if (graph.domain() != Domain::Gemm || graph.nodes().empty()) return false;
    // Nodes come in graph order (arguments first), so a product's arguments are judged before it.
    std::vector<bool> scaled(graph.nodes().size(), false);  // the accumulator times scalars (or the accumulator)
    std::vector<bool> scalar(graph.nodes().size(), false);  // scalars and their products
    for (std::size_t i = 0; i < graph.nodes().size(); ++i) {
        const Node& n = graph.nodes()[i];
        const auto arg = [&](std::size_t j) { return static_cast<std::size_t>(n.args[j]); };
        switch (n.op) {
            case Op::Accumulator: scaled[i] = true; break;
            case Op::Scalar: scalar[i] = true; break;
            case Op::Mul:
                scalar[i] = scalar[arg(0)] && scalar[arg(1)];
                scaled[i] = (scaled[arg(0)] && scalar[arg(1)]) || (scalar[arg(0)] && scaled[arg(1)]);
                if (!scalar[i] && !scaled[i]) return false;
                break;
            case Op::Store:
                if (!scaled[arg(0)]) return false;
                break;
            default: return false;
        }
    }
    return true;
}

}  // namespace coda
