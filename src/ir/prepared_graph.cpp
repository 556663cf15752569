// prepare_graph and the two per-graph memos behind it. A memo holds no reference to the graph's nodes (GraphMemo
// keeps the storage weakly), so a graph that is gone takes nothing with it but its entries, pruned later.
#include "ir/prepared_graph.hpp"

#include "coda/error.hpp"
#include "ir/graph_memo.hpp"
#include "ir/hash.hpp"
#include "ir/text.hpp"

namespace coda {

std::shared_ptr<const Typing> memoized_typing(const Graph& g) {
    static GraphMemo<std::shared_ptr<const Typing>> memo;
    return memo.get(g, [](const Graph& graph) { return std::make_shared<const Typing>(type_graph(graph)); });
}

std::shared_ptr<const GraphIdentity> memoized_identity(const Graph& g) {
    static GraphMemo<std::shared_ptr<const GraphIdentity>> memo;
    return memo.get(g, [](const Graph& graph) {
        std::string text = to_text(graph);
        std::string hash = text_hash(text);
        return std::make_shared<const GraphIdentity>(GraphIdentity{std::move(text), std::move(hash)});
    });
}

PreparedGraph prepare_graph(const Graph& g) {
    const std::shared_ptr<const Typing> typing = memoized_typing(g);
    if (!typing->problems.empty()) throw Error(format_problems(g, typing->problems, nullptr));
    const std::shared_ptr<const GraphIdentity> identity = memoized_identity(g);
    // A clone, as check_graph's: the user may keep adding nodes to g, which must not change what was prepared.
    return PreparedGraph{CheckedGraph{g.clone(), typing->types, typing->bindings}, identity->text, identity->hash};
}

}  // namespace coda
