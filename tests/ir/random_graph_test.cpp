// Random graphs: always valid and within the node limit, round-trip through canonical text, and cover
// the vocabulary of each domain (so GPU tests built on them exercise every op, width and sink).
#include <catch2/catch.hpp>

#include <random>
#include <set>

#include "ir/check_graph.hpp"
#include "ir/text.hpp"
#include "support/random_graph.hpp"

using namespace coda;

namespace {

const Domain kDomains[] = {Domain::Gemm, Domain::Tile, Domain::Finalize};

bool allowed(Op op, Domain d) {
    switch (op) {
        // Random graphs run on the portable mainloop too, which has no reduce_group: its own tests cover it.
        case Op::ReduceGroup: return false;
        case Op::Accumulator: return d == Domain::Gemm;
        case Op::Partials: return d == Domain::Finalize;
        case Op::TileInputTransposed: return d == Domain::Tile;
        case Op::TileInput:
        case Op::ColInput:
        case Op::ColIndex:
        case Op::Even:
        case Op::Odd:
        case Op::Join:
        case Op::ReduceRow:
        case Op::ReduceCol: return d != Domain::Finalize;
        default: return true;
    }
}

std::vector<Op> all_ops() {
    std::vector<Op> out;
    for (int i = 0; out.empty() || out.back() != Op::ReduceCol; ++i) out.push_back(static_cast<Op>(i));
    return out;
}

}  // namespace

TEST_CASE("random graphs are valid, bounded in size and round-trip through text", "[ir]") {
    std::mt19937_64 rng(20240601);
    test::RandomGraphOptions options;
    for (Domain d : kDomains) {
        for (int i = 0; i < 500; ++i) {
            GemmSpec spec;
            spec.input = i % 2 ? DType::F16 : DType::BF16;
            spec.b = i % 3 ? Major::K : Major::MN;
            const Graph g = test::random_graph(rng, d, spec, options);
            const std::string text = to_text(g);
            INFO(text);
            REQUIRE(g.domain() == d);
            REQUIRE(static_cast<int>(g.nodes().size()) <= options.max_nodes);
            REQUIRE_NOTHROW(check_graph(g));
            const Graph back = parse_graph(text);
            REQUIRE(back == g);
            REQUIRE(to_text(back) == text);
        }
    }
}

TEST_CASE("random graphs honour a small node limit and the domain choice", "[ir]") {
    std::mt19937_64 rng(7);
    test::RandomGraphOptions options;
    options.max_nodes = 8;
    options.domains = {Domain::Finalize};
    for (int i = 0; i < 200; ++i) {
        const Graph g = test::random_graph(rng, options);
        INFO(to_text(g));
        CHECK(g.domain() == Domain::Finalize);
        CHECK(g.nodes().size() <= 8);
        CHECK_NOTHROW(check_graph(g));
    }
    options.max_nodes = 7;
    CHECK_THROWS(test::random_graph(rng, options));
}

TEST_CASE("random graphs cover every op, width, reduce op and sink dtype of each domain", "[ir]") {
    std::mt19937_64 rng(1);
    for (Domain d : kDomains) {
        std::set<Op> ops;
        std::set<std::pair<Kind, Width>> shapes;
        std::set<ReduceOp> reductions, combines;
        std::set<DType> stores, accumulates, rounds;
        bool label_compare = false, outer_broadcast = false, i32_select = false;
        for (int i = 0; i < 500; ++i) {
            const CheckedGraph cg = check_graph(test::random_graph(rng, d, GemmSpec{}));
            const Graph& g = cg.graph;
            for (int id = 0; id < static_cast<int>(g.nodes().size()); ++id) {
                const Node& n = g.node(id);
                const ValueType& t = cg.types[static_cast<std::size_t>(id)];
                ops.insert(n.op);
                if (t.kind == Kind::Tile || t.kind == Kind::Col) shapes.insert({t.kind, t.width});
                if (n.op == Op::ReduceRow || n.op == Op::ReduceCol) reductions.insert(n.reduce);
                if (n.op == Op::Partials) combines.insert(n.reduce);
                if (n.op == Op::Store) stores.insert(n.dtype);
                if (n.op == Op::Accumulate) accumulates.insert(n.dtype);
                if (n.op == Op::Round) rounds.insert(n.dtype);
                if (n.op == Op::Select && t.scalar == Scalar::I32) i32_select = true;
                if (n.args.size() == 2) {
                    const Node& a = g.node(n.args[0]);
                    const Node& b = g.node(n.args[1]);
                    if (op_info(n.op).category == OpCategory::Compare && a.op == Op::RowInput &&
                        a.dtype == DType::I32 && b.op == Op::ColIndex)
                        label_compare = true;
                    const Kind ka = cg.types[static_cast<std::size_t>(n.args[0])].kind;
                    const Kind kb = cg.types[static_cast<std::size_t>(n.args[1])].kind;
                    if ((ka == Kind::Row && kb == Kind::Col) || (ka == Kind::Col && kb == Kind::Row))
                        outer_broadcast = true;
                }
            }
        }
        INFO("domain " << to_string(d));
        for (Op op : all_ops()) {
            INFO("op " << op_info(op).text);
            CHECK(ops.count(op) == (allowed(op, d) ? 1u : 0u));
        }
        CHECK(stores == std::set<DType>{DType::BF16, DType::F16, DType::F32, DType::I32});
        CHECK(accumulates == std::set<DType>{DType::BF16, DType::F16, DType::F32});
        CHECK(rounds == std::set<DType>{DType::BF16, DType::F16, DType::F32});
        CHECK(i32_select);
        if (d == Domain::Finalize) {
            CHECK(combines == std::set<ReduceOp>{ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Lse});
            continue;
        }
        for (Kind k : {Kind::Tile, Kind::Col})
            for (Width w : {Width::Half, Width::Full, Width::Double}) CHECK(shapes.count({k, w}) == 1);
        CHECK(reductions.size() == 5);
        CHECK(label_compare);
        CHECK(outer_broadcast);
    }
}
