// The graph hash: pinned for one fixed graph (a change means every cache key changes: bump it only on
// purpose), equal for equal graphs and different when anything printed differs.
#include <catch2/catch.hpp>

#include "ir/hash.hpp"
#include "ir/text.hpp"
#include "util/sha256.hpp"

using namespace coda;

namespace {

Graph out_proj(float scale = 1.0f, DType store = DType::BF16) {
    Graph g = Graph::gemm("out_proj");
    Value acc = g.accumulator();
    Value x1 = g.add(acc, g.tile_input("residual", DType::BF16), "x1");
    Value h = g.mul(x1, g.col_input("gamma", DType::BF16), "h");
    g.store(x1, "x1_out", store);
    g.store(scale == 1.0f ? h : h * scale, "h_out", DType::BF16);
    g.reduce_row(x1, ReduceOp::SumSq, "x1_sumsq");
    return g;
}

}  // namespace

TEST_CASE("graph_hash of a fixed graph is pinned", "[ir]") {
    // Computed once from the canonical text of the out-projection epilogue and pasted here.
    CHECK(graph_hash(out_proj()) == "826b28a1cdb8716c");
}

TEST_CASE("graph_hash is the sha256 prefix of the canonical text and tracks every printed change", "[ir]") {
    const Graph g = out_proj();
    CHECK(graph_hash(g) == sha256_hex(to_text(g)).substr(0, 16));
    CHECK(graph_hash(parse_graph(to_text(g))) == graph_hash(g));
    CHECK(graph_hash(out_proj(0.5f)) != graph_hash(g));
    CHECK(graph_hash(out_proj(0.5f)) != graph_hash(out_proj(0.25f)));
    CHECK(graph_hash(out_proj(1.0f, DType::F16)) != graph_hash(g));
    GemmSpec spec;
    spec.b = Major::MN;
    Graph other = Graph::gemm("out_proj", spec);
    other.store(other.accumulator(), "y", DType::BF16);
    Graph same = Graph::gemm("out_proj");
    same.store(same.accumulator(), "y", DType::BF16);
    CHECK(graph_hash(other) != graph_hash(same));
}
