#include "mainloop/epilogue_cost.hpp"

#include <vector>

#include "coda/error.hpp"
#include "ir/check_graph.hpp"
#include "ir/graph_memo.hpp"

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
    std::vector<Binding> bindings;
    try {
        bindings = check_graph(graph).bindings;
    } catch (const Error&) {
        return t;
    }
    for (const Binding& b : bindings) {
        if (!is_tile_tensor(b)) continue;
        const double bytes = elements_per_accumulator(b.width) * static_cast<double>(size_of(b.dtype)) *
                             (b.role == BindingRole::InOut ? 2.0 : 1.0);
        const bool fragments = b.width == Width::Full && size_of(b.dtype) == 2 && !b.transposed;
        (fragments ? t.fragment_bytes : t.per_visit_bytes) += bytes;
    }
    return t;
}

}  // namespace

EpilogueTraffic epilogue_traffic(const Graph& graph) {
    static GraphMemo<EpilogueTraffic> memo;
    return memo.get(graph, measure);
}

bool stores_accumulator_only(const Graph& graph) {
    if (graph.domain() != Domain::Gemm || graph.nodes().empty()) return false;
    for (const Node& n : graph.nodes()) {
        const bool store_of_accumulator = n.op == Op::Store && n.args.size() == 1 &&
                                          graph.node(n.args[0]).op == Op::Accumulator;
        if (n.op != Op::Accumulator && !store_of_accumulator) return false;
    }
    return true;
}

}  // namespace coda
