// Typing rules of check_graph (kinds, widths, f32/i32, broadcasting, pairs) and the binding list it
// derives, which fixes the kernel's parameter slots.
#include <catch2/catch.hpp>

#include "ir/check_graph.hpp"
#include "ir/text.hpp"

using namespace coda;

namespace {

ValueType tile(Width w, Scalar s = Scalar::F32) { return {Kind::Tile, w, s}; }
ValueType col(Width w, Scalar s = Scalar::F32) { return {Kind::Col, w, s}; }
ValueType row(Scalar s = Scalar::F32) { return {Kind::Row, Width::Full, s}; }
const ValueType kScalar{Kind::Scalar, Width::Full, Scalar::F32};
const ValueType kSink{Kind::Sink, Width::Full, Scalar::None};

std::string show(const ValueType& t) {
    return std::string(to_string(t.kind)) + "/" + std::string(to_string(t.width)) + "/" +
           (t.scalar == Scalar::F32 ? "f32" : t.scalar == Scalar::I32 ? "i32" : "none");
}

// Checks the type of node `id` of a graph that must be valid.
void check_type(const CheckedGraph& c, int id, const ValueType& want) {
    INFO(node_to_text(c.graph, id));
    CHECK(show(c.types[static_cast<std::size_t>(id)]) == show(want));
}

}  // namespace

TEST_CASE("typing: sources", "[ir]") {
    Graph g = Graph::gemm("g");
    Value acc = g.accumulator();
    Value t = g.tile_input("t", DType::BF16, Width::Half);
    Value ti = g.tile_input("ti", DType::I32, Width::Double);
    Value r = g.row_input("r", DType::F16);
    Value ri = g.row_input("ri", DType::I32);
    Value c = g.col_input("c", DType::F32, Width::Double);
    Value s = g.scalar("s");
    Value k = g.constant(2.0f);
    Value rowi = g.row_index();
    Value coli = g.col_index(Width::Half);
    Value x = acc + g.to_f32(ri) + s + k + g.to_f32(rowi);
    g.store(x, "x", DType::BF16);
    g.store(g.join(t + g.to_f32(coli), t), "y", DType::BF16);
    g.store(ti, "z", DType::I32);
    g.store(g.even(g.to_f32(ti) * c), "w", DType::F16);
    g.store(x * r, "v", DType::F32);
    const CheckedGraph cg = check_graph(g);
    check_type(cg, acc.id(), tile(Width::Full));
    check_type(cg, t.id(), tile(Width::Half));
    check_type(cg, ti.id(), tile(Width::Double, Scalar::I32));
    check_type(cg, r.id(), row());
    check_type(cg, ri.id(), row(Scalar::I32));
    check_type(cg, c.id(), col(Width::Double));
    check_type(cg, s.id(), kScalar);
    check_type(cg, k.id(), kScalar);
    check_type(cg, rowi.id(), row(Scalar::I32));
    check_type(cg, coli.id(), col(Width::Half, Scalar::I32));

    Graph f = Graph::finalize("f");
    Value p = f.partials("p", ReduceOp::Lse);
    f.store(p, "out", DType::F32);
    check_type(check_graph(f), p.id(), row());
}

TEST_CASE("typing: unary ops keep the kind and width and give f32", "[ir]") {
    Graph g = Graph::tile("g");
    Value c = g.col_input("c", DType::BF16, Width::Half);
    Value ci = g.col_index(Width::Double);
    Value conv = g.to_f32(ci);
    Value rounded = g.round(c, DType::BF16);
    Value e = g.unary(Op::GeluTanh, c);
    g.store(g.tile_input("t", DType::F32, Width::Half) * rounded * e * g.even(g.even(conv)), "out", DType::BF16);
    const CheckedGraph cg = check_graph(g);
    check_type(cg, conv.id(), col(Width::Double));
    check_type(cg, rounded.id(), col(Width::Half));
    check_type(cg, e.id(), col(Width::Half));

    // Every unary op of ops.def (except to_f32, round and reduce_group, which have builders of their own) accepts f32
    // and keeps the operand's type.
    for (int i = 0;; ++i) {
        const Op op = static_cast<Op>(i);
        if (!parse_op(op_info(op).text) || op_info(op).category == OpCategory::Sink) break;
        if (op_info(op).category != OpCategory::Unary || op == Op::ToF32 || op == Op::Round || op == Op::ReduceGroup)
            continue;
        Graph u = Graph::tile("u");
        Value rv = u.row_input("r", DType::F32);
        Value y = u.unary(op, rv);
        u.store(u.tile_input("t", DType::F32) * y, "out", DType::F32);
        check_type(check_graph(u), y.id(), row());
    }
}

TEST_CASE("typing: broadcasting of binary ops", "[ir]") {
    struct Case {
        ValueType a, b, want;
    };
    const Width widths[] = {Width::Half, Width::Full, Width::Double};
    std::vector<Case> cases{{row(), row(), row()}, {row(), kScalar, row()}, {kScalar, kScalar, kScalar}};
    for (Width w : widths) {
        cases.push_back({tile(w), tile(w), tile(w)});
        cases.push_back({tile(w), col(w), tile(w)});
        cases.push_back({col(w), tile(w), tile(w)});
        cases.push_back({tile(w), row(), tile(w)});
        cases.push_back({row(), tile(w), tile(w)});
        cases.push_back({col(w), row(), tile(w)});  // outer broadcast: pos_i * theta_j
        cases.push_back({row(), col(w), tile(w)});
        cases.push_back({col(w), col(w), col(w)});
        cases.push_back({tile(w), kScalar, tile(w)});
        cases.push_back({kScalar, col(w), col(w)});
    }
    for (const Case& k : cases) {
        Graph g = Graph::tile("g");
        const auto make = [&](const ValueType& t, const std::string& name) {
            switch (t.kind) {
                case Kind::Tile: return g.tile_input(name, DType::F32, t.width);
                case Kind::Col: return g.col_input(name, DType::F32, t.width);
                case Kind::Row: return g.row_input(name, DType::F32);
                default: return g.scalar(name);
            }
        };
        Value a = make(k.a, "a");
        Value b = make(k.b, "b");
        Value sum = g.sub(a, b);
        Value mask = g.ge(a, b);
        Value pick = g.select(mask, a, b);
        Value out = g.tile_input("t", DType::F32, k.want.kind == Kind::Tile || k.want.kind == Kind::Col
                                                      ? k.want.width
                                                      : Width::Full) *
                    sum * mask * pick;
        g.store(out, "out", DType::F32);
        INFO(show(k.a) << " with " << show(k.b));
        const CheckedGraph cg = check_graph(g);
        check_type(cg, sum.id(), k.want);
        check_type(cg, mask.id(), k.want);
        check_type(cg, pick.id(), k.want);
    }
}

TEST_CASE("typing: compares and select over i32", "[ir]") {
    Graph g = Graph::gemm("g");
    Value acc = g.accumulator();
    Value labels = g.row_input("labels", DType::I32);
    Value cols = g.col_index();
    Value hit = g.eq(labels, cols, "hit");
    Value idx = g.select(hit, labels, cols, "idx");
    Value fidx = g.select(g.lt(acc, acc), acc, g.constant(0.0f), "fidx");
    g.store(idx, "which", DType::I32);
    g.store(acc * hit + fidx, "out", DType::BF16);
    const CheckedGraph cg = check_graph(g);
    check_type(cg, hit.id(), tile(Width::Full));
    check_type(cg, idx.id(), tile(Width::Full, Scalar::I32));
    check_type(cg, fidx.id(), tile(Width::Full));
}

TEST_CASE("typing: even, odd and join", "[ir]") {
    Graph g = Graph::gemm("g");
    Value acc = g.accumulator();
    Value e = g.even(acc);
    Value o = g.odd(acc);
    Value swiglu = g.silu(e) * o;
    Value rotated = g.join(e - o, e + o);
    Value wide = g.tile_input("saved", DType::BF16, Width::Double);
    Value we = g.even(wide);
    Value dbl = g.join(we, g.odd(wide));
    Value ce = g.even(g.col_input("c", DType::F32));
    Value cj = g.join(ce, ce);
    g.store(swiglu, "y", DType::BF16);
    g.store(rotated * cj, "z", DType::BF16);
    g.store(dbl, "w", DType::BF16);
    const CheckedGraph cg = check_graph(g);
    check_type(cg, e.id(), tile(Width::Half));
    check_type(cg, swiglu.id(), tile(Width::Half));
    check_type(cg, rotated.id(), tile(Width::Full));
    check_type(cg, we.id(), tile(Width::Full));
    check_type(cg, dbl.id(), tile(Width::Double));
    check_type(cg, ce.id(), col(Width::Half));
    check_type(cg, cj.id(), col(Width::Full));
}

TEST_CASE("bindings follow node order with role, kind, width and dtype", "[ir]") {
    Graph g = Graph::gemm("g");
    Value acc = g.accumulator();
    Value t = g.tile_input("t", DType::BF16, Width::Half);
    Value r = g.row_input("r", DType::I32);
    Value c = g.col_input("c", DType::F16, Width::Double);
    Value s = g.scalar("s");
    Value half = g.even(acc) * t * s + g.to_f32(r);
    g.store(half, "y", DType::F16);
    g.accumulate(acc, "grad", DType::F32);
    g.reduce_row(half, ReduceOp::Lse, "lse");
    Value full = g.join(half, half);
    g.reduce_col(g.join(full, full) * c, ReduceOp::Sum, "colsum");
    const CheckedGraph cg = check_graph(g);
    struct Want {
        const char* name;
        BindingRole role;
        Kind kind;
        Width width;
        DType dtype;
    };
    const Want want[] = {
        {"t", BindingRole::Input, Kind::Tile, Width::Half, DType::BF16},
        {"r", BindingRole::Input, Kind::Row, Width::Full, DType::I32},
        {"c", BindingRole::Input, Kind::Col, Width::Double, DType::F16},
        {"s", BindingRole::ScalarArg, Kind::Scalar, Width::Full, DType::F32},
        {"y", BindingRole::Output, Kind::Tile, Width::Half, DType::F16},
        {"grad", BindingRole::InOut, Kind::Tile, Width::Full, DType::F32},
        {"lse", BindingRole::RowPartials, Kind::Row, Width::Half, DType::F32},
        {"colsum", BindingRole::ColPartials, Kind::Col, Width::Double, DType::F32},
    };
    REQUIRE(cg.bindings.size() == std::size(want));
    int last = -1;
    for (std::size_t i = 0; i < cg.bindings.size(); ++i) {
        const Binding& b = cg.bindings[i];
        INFO(want[i].name);
        CHECK(b.name == want[i].name);
        CHECK(b.role == want[i].role);
        CHECK(b.kind == want[i].kind);
        CHECK(b.width == want[i].width);
        CHECK(b.dtype == want[i].dtype);
        CHECK(cg.graph.node(b.node).name == b.name);
        CHECK(b.node > last);
        last = b.node;
    }
    check_type(cg, g.nodes().size() - 1, kSink);
    (void)c;

    Graph f = Graph::finalize("f");
    Value p = f.partials("p", ReduceOp::Sum);
    f.store(f.rsqrt(p * f.scalar("inv_n")), "rstd", DType::F32);
    const CheckedGraph cf = check_graph(f);
    REQUIRE(cf.bindings.size() == 3);
    CHECK(cf.bindings[0].role == BindingRole::Partials);
    CHECK(cf.bindings[0].kind == Kind::Row);
    CHECK(cf.bindings[1].role == BindingRole::ScalarArg);
    CHECK(cf.bindings[2].role == BindingRole::Output);
    CHECK(cf.bindings[2].kind == Kind::Row);
}
