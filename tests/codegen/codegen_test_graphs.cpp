// Small valid graphs for the codegen tests: every op of ops.def in every domain and width where it has a
// meaning, each built around one "base" value of the requested width and stored at the end.
#include "codegen/codegen_test_graphs.hpp"

namespace coda::test {

Graph out_proj_graph() {
    Graph g = Graph::gemm("out_proj", GemmSpec{DType::BF16, Major::K, Major::K});
    Value acc = g.accumulator("acc");
    Value residual = g.tile_input("residual", DType::BF16);
    Value x1 = g.add(acc, residual, "x1");
    Value gamma = g.col_input("gamma", DType::BF16);
    Value h = g.mul(x1, gamma, "h");
    g.store(x1, "x1_out", DType::BF16);
    g.store(h, "h_out", DType::BF16);
    g.reduce_row(x1, ReduceOp::SumSq, "x1_sumsq");
    return g;
}

namespace {

Graph empty_graph(Domain d) {
    switch (d) {
        case Domain::Gemm: return Graph::gemm("g", GemmSpec{DType::F16, Major::MN, Major::K});
        case Domain::Tile: return Graph::tile("t");
        case Domain::Finalize: return Graph::finalize("f");
    }
    return Graph::tile("t");
}

// A float value of width w: the accumulator (halved by even or doubled by join) in gemm graphs, an f32
// tile input in tile programs, a row input in finalizers (which have no widths).
Value base_value(Graph& g, Width w) {
    switch (g.domain()) {
        case Domain::Gemm: {
            Value acc = g.accumulator("acc");
            if (w == Width::Half) return g.even(acc, "base");
            if (w == Width::Double) return g.join(acc, acc, "base");
            return acc;
        }
        case Domain::Tile: return g.tile_input("base", DType::F32, w);
        case Domain::Finalize: return g.row_input("base", DType::F32);
    }
    return Value{};
}

bool has_width(Domain d, Width w) { return d != Domain::Finalize || w == Width::Full; }

}  // namespace

std::optional<Graph> graph_using(Op op, Domain d, Width w) {
    if (!has_width(d, w)) return std::nullopt;
    const bool finalize = d == Domain::Finalize;
    const OpCategory category = op_info(op).category;
    Graph g = empty_graph(d);
    Value x = base_value(g, w);
    Value y;
    switch (category) {
        case OpCategory::Source:
            switch (op) {
                case Op::Accumulator:
                    if (d != Domain::Gemm || w != Width::Full) return std::nullopt;
                    y = g.add(x, x, "y");
                    break;
                case Op::TileInput:
                    if (finalize) return std::nullopt;
                    y = g.add(x, g.tile_input("src", DType::BF16, w), "y");
                    break;
                case Op::TileInputTransposed:
                    if (d != Domain::Tile || w != Width::Full) return std::nullopt;  // full-width tile programs only
                    y = g.add(x, g.tile_input_transposed("src", DType::BF16), "y");
                    break;
                case Op::RowInput: y = g.mul(x, g.row_input("src", DType::F16), "y"); break;
                case Op::ColInput:
                    if (finalize) return std::nullopt;
                    y = g.mul(x, g.col_input("src", DType::F32, w), "y");
                    break;
                case Op::Scalar: y = g.mul(x, g.scalar("src"), "y"); break;
                case Op::Const: y = g.mul(x, g.constant(0.1f, "src"), "y"); break;
                case Op::RowIndex: y = g.add(x, g.to_f32(g.row_index("src")), "y"); break;
                case Op::ColIndex:
                    if (finalize) return std::nullopt;
                    y = g.add(x, g.to_f32(g.col_index(w, "src")), "y");
                    break;
                case Op::Partials:
                    if (!finalize) return std::nullopt;
                    y = g.add(x, g.partials("src", ReduceOp::Lse), "y");
                    break;
                default: return std::nullopt;
            }
            break;
        case OpCategory::Unary:
            if (op == Op::ReduceGroup) {
                if (d == Domain::Finalize) return std::nullopt;  // a tile's row groups
                y = g.reduce_group(x, ReduceOp::Max, "y");
            } else if (op == Op::Round) y = g.round(x, DType::BF16, "y");
            else if (op == Op::ToF32) y = g.add(x, g.to_f32(finalize ? g.row_index("i") : g.col_index(w, "i"), "y"));
            else y = g.unary(op, x, "y");
            break;
        case OpCategory::Binary:
        case OpCategory::Compare: y = g.binary(op, x, g.scalar("s"), "y"); break;
        case OpCategory::Select: y = g.select(g.gt(x, g.constant(0.0f)), x, g.neg(x), "y"); break;
        case OpCategory::Pair:
            if (finalize) return std::nullopt;
            if (op == Op::Join) {
                if (w == Width::Double) return std::nullopt;
                y = g.join(x, g.neg(x), "y");
            } else {
                if (w == Width::Half) return std::nullopt;
                y = g.unary(Op::Neg, op == Op::Even ? g.even(x, "y") : g.odd(x, "y"));
            }
            break;
        case OpCategory::Sink:
            switch (op) {
                case Op::Store: g.store(x, "out", DType::F16); return g;
                case Op::StoreTransposed:
                    if (finalize) return std::nullopt;  // a tile's columns by rows
                    g.store_transposed(x, "out", DType::F16);
                    return g;
                case Op::Accumulate: g.accumulate(x, "out", DType::BF16); return g;
                case Op::ReduceRow:
                case Op::ReduceCol:
                    if (finalize) return std::nullopt;
                    if (op == Op::ReduceRow) g.reduce_row(x, ReduceOp::Lse, "out");
                    else g.reduce_col(x, ReduceOp::Max, "out");
                    return g;
                default: return std::nullopt;
            }
    }
    g.store(y, "out", DType::F32);
    return g;
}

}  // namespace coda::test
