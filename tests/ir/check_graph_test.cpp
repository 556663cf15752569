// Validation messages: one test per problem the validator reports, each asserting that the message names
// the node and says what is wrong; plus reporting every problem at once without cascades.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "coda/error.hpp"
#include "coda/validate.hpp"
#include "ir/check_graph.hpp"
#include "ir/graph_access.hpp"
#include "ir/text.hpp"

using namespace coda;
using Catch::Matchers::Contains;

namespace {

std::vector<std::string> problem_lines(const Graph& g, const SourceMap* where = nullptr) {
    try {
        check_graph(g, where);
    } catch (const Error& e) {
        std::vector<std::string> out;
        std::istringstream in(e.what());
        for (std::string line; std::getline(in, line);) out.push_back(line);
        return out;
    }
    return {};
}

// The single problem of a graph with exactly one mistake.
std::string only_problem(const Graph& g) {
    const std::vector<std::string> lines = problem_lines(g);
    INFO(to_text(g));
    REQUIRE(lines.size() == 1);
    return lines[0];
}

Node node(Op op, std::vector<int> args, std::string name, DType dtype = DType::F32) {
    Node n;
    n.op = op;
    n.args = std::move(args);
    n.name = std::move(name);
    n.dtype = dtype;
    return n;
}

}  // namespace

TEST_CASE("a valid graph passes and find_problems agrees", "[ir]") {
    Graph g = Graph::gemm("out_proj");
    Value x1 = g.accumulator() + g.tile_input("residual", DType::BF16);
    g.store(x1, "x1", DType::BF16);
    CHECK(problem_lines(g).empty());
    CHECK(find_problems(g).empty());
    CHECK_NOTHROW(check(g));
}

TEST_CASE("messages without a source map quote the node's canonical line", "[ir]") {
    Graph g = Graph::gemm("g");
    g.store(g.accumulator(), "out", DType::BF16);
    g.tile_input("unused_input", DType::BF16);
    CHECK(only_problem(g) == "graph 'g', node '%unused_input' (`%unused_input = tile_input bf16 full`): computed "
                             "but never used: store it, reduce it or remove it");
}

TEST_CASE("messages with a source map point at the file line", "[ir]") {
    const std::vector<ParsedGraph> parsed = parse_graph_file("# a comment\ngraph g gemm\n%acc = accumulator\n\n"
                                                         "%t = tile_input bf16 full\n%o = store bf16 %acc\n",
                                                         "epilogues.coda");
    REQUIRE(parsed.size() == 1);
    const std::vector<std::string> lines = problem_lines(parsed[0].graph, &parsed[0].where);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0] == "epilogues.coda:5: node '%t': computed but never used: store it, reduce it or remove it");

    const std::vector<ParsedGraph> empty = parse_graph_file("\ngraph nothing tile\n", "e.coda");
    const std::vector<std::string> graph_lines = problem_lines(empty[0].graph, &empty[0].where);
    REQUIRE(graph_lines.size() == 1);
    CHECK_THAT(graph_lines[0], Contains("e.coda:2: graph 'nothing': nothing would be written"));
}

TEST_CASE("every problem is reported at once, one line each, and find_problems lists the same", "[ir]") {
    Graph g = Graph::gemm("g");
    Value acc = g.accumulator();
    Value labels = g.row_input("labels", DType::I32);
    Value bad_exp = g.exp(labels, "e");        // mistake 1: exp of an i32 value
    g.store(bad_exp, "e_out", DType::BF16);    // silent: its operand has an error
    g.store(acc, "", DType::BF16);             // mistake 2: an unnamed store
    g.tile_input("forgotten", DType::F16);     // mistake 3: never used
    const std::vector<std::string> lines = problem_lines(g);
    REQUIRE(lines.size() == 3);
    CHECK_THAT(lines[0], Contains("node '%e'") && Contains("exp needs an f32 operand") && Contains("'%labels'"));
    CHECK_THAT(lines[1], Contains("node '%_4'") && Contains("a store must be named"));
    CHECK_THAT(lines[2], Contains("node '%forgotten'") && Contains("computed but never used"));

    const std::vector<Problem> problems = find_problems(g);
    REQUIRE(problems.size() == 3);
    CHECK(problems[0].node == 2);
    CHECK(problems[1].node == 4);
    CHECK(problems[2].node == 5);
    CHECK_THROWS_AS(check(g), Error);
}

TEST_CASE("errors do not cascade to the users of a broken node", "[ir]") {
    Graph g = Graph::tile("g");
    Value t = g.tile_input("t", DType::F32);
    Value h = g.tile_input("h", DType::F32, Width::Half);
    Value bad = g.add(t, h, "bad");
    Value user = g.exp(g.mul(bad, t), "user");
    g.store(user, "out", DType::I32);  // would be wrong for a valid f32 operand, but its operand is broken
    CHECK_THAT(only_problem(g), Contains("node '%bad'"));
}

TEST_CASE("validation: GEMM operand dtype", "[ir]") {
    GemmSpec spec;
    spec.input = DType::F32;
    Graph g = Graph::gemm("g", spec);
    g.store(g.accumulator(), "out", DType::BF16);
    CHECK(only_problem(g) == "graph 'g': GEMM operands must be bf16, f16, e4m3 or e5m2, got in=f32");
}

TEST_CASE("validation: FP8 operands are K-major GEMM inputs, not epilogue tensors", "[ir]") {
    Graph mn = Graph::gemm("g", GemmSpec{DType::E5M2, Major::K, Major::MN});
    mn.store(mn.accumulator(), "out", DType::BF16);
    CHECK(only_problem(mn) == "graph 'g': e5m2 operands must both be K-major (A stored M x K, B stored N x K): Hopper's "
                              "FP8 MMA reads no other layout; got a=k, b=mn");
    Graph ok = Graph::gemm("g", GemmSpec{DType::E4M3, Major::K, Major::K});
    ok.store(ok.accumulator(), "out", DType::BF16);
    CHECK(find_problems(ok).empty());
    for (DType fp8 : {DType::E4M3, DType::E5M2}) {
        INFO(to_string(fp8));
        // Full- and double-width tile tensors: read and written.
        Graph t = Graph::tile("t");
        Value x = t.tile_input("x", fp8, Width::Double);
        t.store(x, "y", fp8);
        t.store(t.even(x), "z", fp8);
        CHECK(find_problems(t).empty());
        Graph q = Graph::gemm("q", GemmSpec{});
        q.store(q.accumulator(), "y", fp8);
        CHECK(find_problems(q).empty());
        // Half width, vectors, accumulates and rounding: not FP8.
        Graph half = Graph::tile("h");
        half.store(half.even(half.tile_input("x", DType::BF16)), "y", fp8);
        CHECK_THAT(only_problem(half), Contains("full or double width"));
        Graph row = Graph::tile("r");
        row.store(row.mul(row.tile_input("x", DType::BF16), row.row_input("s", fp8)), "y", DType::BF16);
        CHECK_THAT(only_problem(row), Contains("row_input takes bf16, f16, f32 or i32"));
        Graph acc = Graph::gemm("a", GemmSpec{});
        acc.accumulate(acc.accumulator(), "y", fp8);
        CHECK_THAT(only_problem(acc), Contains("accumulate takes bf16, f16, f32 or i32"));
    }
}

TEST_CASE("validation: A and B of two types are both FP8 and K-major", "[ir]") {
    for (const auto& [a, b] : {std::pair{DType::E5M2, DType::E4M3}, std::pair{DType::E4M3, DType::E5M2}}) {
        Graph ok = Graph::gemm("g", GemmSpec{a, Major::K, Major::K, b});
        ok.store(ok.accumulator(), "out", DType::BF16);
        CHECK(find_problems(ok).empty());
    }
    Graph half = Graph::gemm("g", GemmSpec{DType::BF16, Major::K, Major::K, DType::E4M3});
    half.store(half.accumulator(), "out", DType::BF16);
    CHECK(only_problem(half) == "graph 'g': GEMM operands of two types must both be FP8 (e4m3 or e5m2), got in=bf16 "
                                "for A and in_b=e4m3 for B; give B A's type, or make both FP8");
    Graph wide = Graph::gemm("g", GemmSpec{DType::E5M2, Major::K, Major::K, DType::F16});
    wide.store(wide.accumulator(), "out", DType::BF16);
    CHECK_THAT(only_problem(wide), Contains("in=e5m2 for A and in_b=f16 for B"));
    Graph mn = Graph::gemm("g", GemmSpec{DType::E5M2, Major::MN, Major::K, DType::E4M3});
    mn.store(mn.accumulator(), "out", DType::BF16);
    CHECK_THAT(only_problem(mn), Contains("e5m2 x e4m3 operands must both be K-major") && Contains("got a=mn, b=k"));
}

TEST_CASE("validation: block scales are for FP8 operands", "[ir]") {
    for (const auto& [a, b] : {std::pair{DType::E4M3, DType::E4M3}, std::pair{DType::E5M2, DType::E4M3}}) {
        GemmSpec spec{a, Major::K, Major::K, b};
        spec.scales = ScaleMode::Block128x128;
        Graph ok = Graph::gemm("g", spec);
        ok.store(ok.accumulator(), "out", DType::BF16);
        CHECK(find_problems(ok).empty());
    }
    for (const DType d : {DType::BF16, DType::F16}) {
        GemmSpec spec{d, Major::K, Major::K};
        spec.scales = ScaleMode::Block128x128;
        Graph g = Graph::gemm("g", spec);
        g.store(g.accumulator(), "out", DType::BF16);
        CHECK(only_problem(g) == fmt::format("graph 'g': block scales (scales=block) are for FP8 operands (e4m3 or "
                                             "e5m2), got in={} for A and {} for B; make both FP8, or drop the block "
                                             "scales",
                                             to_string(d), to_string(d)));
    }
}

TEST_CASE("validation: B's scales per row are block scales too, for FP8 operands alone", "[ir]") {
    GemmSpec spec{DType::E4M3, Major::K, Major::K};
    spec.scales = ScaleMode::Block1x128;
    Graph ok = Graph::gemm("g", spec);
    ok.store(ok.accumulator(), "out", DType::BF16);
    CHECK(find_problems(ok).empty());
    spec.input = DType::BF16;
    Graph g = Graph::gemm("g", spec);
    g.store(g.accumulator(), "out", DType::BF16);
    CHECK(only_problem(g) == "graph 'g': block scales (scales=block_1x128) are for FP8 operands (e4m3 or e5m2), got "
                             "in=bf16 for A and bf16 for B; make both FP8, or drop the block scales");
}

TEST_CASE("validation: promoted accumulation is for FP8 operands without block scales", "[ir]") {
    const auto graph = [](GemmSpec spec) {
        spec.accumulation = Accumulation::Promoted;
        Graph g = Graph::gemm("g", spec);
        g.store(g.accumulator(), "out", DType::BF16);
        return g;
    };
    for (const auto& [a, b] : {std::pair{DType::E4M3, DType::E4M3}, std::pair{DType::E5M2, DType::E4M3},
                               std::pair{DType::E4M3, DType::E5M2}})
        CHECK(find_problems(graph(GemmSpec{a, Major::K, Major::K, b})).empty());
    for (const DType d : {DType::BF16, DType::F16})
        CHECK(only_problem(graph(GemmSpec{d, Major::K, Major::K})) ==
              fmt::format("graph 'g': promoted accumulation (acc=promoted) is for FP8 operands (e4m3 or e5m2), got "
                          "in={} for A and {} for B, which wgmma sums in f32 already; drop acc=promoted "
                          "(accumulation Fast, the default)",
                          to_string(d), to_string(d)));
    GemmSpec block{DType::E4M3, Major::K, Major::K};
    block.scales = ScaleMode::Block128x128;
    CHECK(only_problem(graph(block)) ==
          "graph 'g': promoted accumulation (acc=promoted) with block scales (scales=block) is redundant: a "
          "block-scaled GEMM adds every 128-k block into f32 with its scales already; drop acc=promoted "
          "(accumulation Fast, the default)");
    block.scales = ScaleMode::Block1x128;
    CHECK_THAT(only_problem(graph(block)), Contains("is redundant"));
}

TEST_CASE("validation: graph name", "[ir]") {
    Graph g = Graph::tile("my graph");
    g.store(g.tile_input("t", DType::F32), "out", DType::BF16);
    CHECK_THAT(only_problem(g), Contains("graph name 'my graph' is not an identifier"));
}

TEST_CASE("validation: nothing written", "[ir]") {
    Graph g = Graph::finalize("g");
    CHECK_THAT(only_problem(g), Contains("graph 'g': nothing would be written"));
}

TEST_CASE("validation: a gemm graph must use its accumulator", "[ir]") {
    Graph g = Graph::gemm("g");
    g.store(g.tile_input("t", DType::BF16), "out", DType::BF16);
    CHECK_THAT(only_problem(g), Contains("graph 'g': a gemm graph must use its accumulator"));
}

TEST_CASE("validation: node names", "[ir]") {
    SECTION("not an identifier") {
        Graph g = Graph::tile("g");
        g.store(g.tile_input("x-1", DType::F32), "out", DType::BF16);
        CHECK_THAT(only_problem(g), Contains("node '%x-1'") && Contains("name 'x-1' is not an identifier"));
    }
    SECTION("a leading underscore is reserved") {
        Graph g = Graph::tile("g");
        g.store(g.tile_input("_t", DType::F32), "out", DType::BF16);
        CHECK_THAT(only_problem(g), Contains("node '%_t'") && Contains("reserved for unnamed nodes"));
    }
    SECTION("A and B are reserved in gemm graphs only") {
        Graph g = Graph::gemm("g");
        g.store(g.accumulator() + g.tile_input("A", DType::BF16), "out", DType::BF16);
        CHECK_THAT(only_problem(g), Contains("node '%A'") && Contains("reserved for the GEMM operand A"));
        Graph t = Graph::tile("t");
        t.store(t.tile_input("A", DType::BF16), "B", DType::BF16);
        CHECK(problem_lines(t).empty());
    }
    SECTION("A_scale and B_scale are reserved in block-scaled gemm graphs only") {
        GemmSpec spec{DType::E4M3, Major::K, Major::K};
        spec.scales = ScaleMode::Block128x128;
        Graph g = Graph::gemm("g", spec);
        g.store(g.accumulator() * g.row_input("A_scale", DType::F32), "out", DType::BF16);
        CHECK_THAT(only_problem(g), Contains("node '%A_scale'") && Contains("reserved for A's block scales"));
        spec.scales = ScaleMode::Off;
        Graph plain = Graph::gemm("g", spec);
        plain.store(plain.accumulator() * plain.row_input("A_scale", DType::F32), "B_scale", DType::BF16);
        CHECK(problem_lines(plain).empty());
    }
    SECTION("duplicates") {
        Graph g = Graph::tile("g");
        Value a = g.tile_input("x", DType::F32);
        Value b = g.exp(a, "x");
        g.store(b, "out", DType::BF16);
        CHECK_THAT(only_problem(g), Contains("node '%x' (`%x = exp %x`)") && Contains("already taken") &&
                                        Contains("`%x = tile_input f32 full`"));
    }
}

TEST_CASE("validation: names are shown with unprintable bytes escaped and long ones cut", "[ir]") {
    Graph g = Graph::tile(std::string("g\0h", 3));
    g.store(g.tile_input(std::string("x\0y", 3), DType::F32), "out", DType::BF16);
    const std::vector<std::string> lines = problem_lines(g);
    REQUIRE(lines.size() == 2);
    CHECK(lines[0] == "graph 'g\\x00h': graph name 'g\\x00h' is not an identifier: use letters, digits and '_', "
                      "starting with a letter");
    CHECK(lines[1] == "graph 'g\\x00h', node '%x\\x00y' (`%x\\x00y = tile_input f32 full`): name 'x\\x00y' is not "
                      "an identifier: use letters, digits and '_', starting with a letter");

    Graph h = Graph::tile("h");
    const std::string long_name = std::string(100000, 'x') + "-";
    h.store(h.tile_input(long_name, DType::F32), "out", DType::BF16);
    const std::string problem = only_problem(h);
    CHECK(problem.size() < 1000);
    CHECK_THAT(problem, Contains("node '%" + std::string(63, 'x') + "...' (100002 bytes, cut)") &&
                            Contains("name '" + std::string(64, 'x') + "...' (100001 bytes, cut) is not an identifier"));
}

TEST_CASE("validation: binding nodes must be named", "[ir]") {
    Graph g = Graph::gemm("g");
    Value acc = g.accumulator();
    Value t = g.tile_input("", DType::BF16);
    Value r = g.row_input("", DType::F32);
    Value c = g.col_input("", DType::F32);
    Value s = g.scalar("");
    Value x = acc + t + r + c + s;
    g.store(x, "", DType::BF16);
    g.accumulate(x, "", DType::F32);
    g.reduce_row(x, ReduceOp::Sum, "");
    g.reduce_col(x, ReduceOp::Max, "");
    const std::vector<std::string> lines = problem_lines(g);
    REQUIRE(lines.size() == 8);
    const char* ops[] = {"tile_input", "row_input", "col_input", "scalar",
                         "store",      "accumulate", "reduce_row", "reduce_col"};
    for (int i = 0; i < 8; ++i) CHECK_THAT(lines[i], Contains(std::string("a ") + ops[i] + " must be named"));

    Graph f = Graph::finalize("f");
    f.store(f.partials("", ReduceOp::Sum), "out", DType::F32);
    CHECK_THAT(only_problem(f), Contains("node '%_0'") && Contains("a partials must be named"));
}

TEST_CASE("validation: operand count", "[ir]") {
    Graph g = Graph::gemm("g");
    Value acc = g.accumulator();
    const int add = detail::GraphAccess::append(g, node(Op::Add, {acc.id()}, "sum"));
    detail::GraphAccess::append(g, node(Op::Store, {add}, "out", DType::BF16));
    CHECK_THAT(only_problem(g), Contains("node '%sum'") && Contains("add takes 2 operands, got 1"));
}

TEST_CASE("validation: sources outside their domain", "[ir]") {
    SECTION("accumulator outside gemm") {
        Graph g = Graph::tile("g");
        g.store(g.accumulator(), "out", DType::BF16);
        CHECK_THAT(only_problem(g), Contains("node '%acc'") && Contains("accumulator exists only in gemm graphs"));
    }
    SECTION("tile and column sources in finalize") {
        Graph g = Graph::finalize("g");
        Value p = g.partials("p", ReduceOp::Sum);
        Value t = g.tile_input("t", DType::F32);
        Value c = g.col_input("c", DType::F32);
        Value ci = g.col_index();
        Value x = p + t + c + ci;
        g.store(x, "out", DType::F32);
        const std::vector<std::string> lines = problem_lines(g);
        REQUIRE(lines.size() == 3);
        CHECK_THAT(lines[0], Contains("node '%t'") && Contains("tile_input is not available in a finalize graph"));
        CHECK_THAT(lines[1], Contains("node '%c'") && Contains("col_input is not available in a finalize graph"));
        CHECK_THAT(lines[2], Contains("node '%_3'") && Contains("col_index is not available in a finalize graph"));
    }
    SECTION("partials outside finalize") {
        Graph g = Graph::gemm("g");
        g.store(g.accumulator() + g.partials("p", ReduceOp::Sum), "out", DType::BF16);
        CHECK_THAT(only_problem(g), Contains("node '%p'") && Contains("partials exist only in finalize graphs"));
    }
}

TEST_CASE("validation: at most one accumulator", "[ir]") {
    Graph g = Graph::gemm("g");
    Value a = g.accumulator("acc");
    Value b = g.accumulator("acc2");
    g.store(a + b, "out", DType::BF16);
    CHECK_THAT(only_problem(g), Contains("node '%acc2'") && Contains("'%acc' already reads it"));
}

TEST_CASE("validation: partials combine", "[ir]") {
    Graph g = Graph::finalize("g");
    g.store(g.partials("sq", ReduceOp::SumSq), "out", DType::F32);
    CHECK_THAT(only_problem(g), Contains("node '%sq'") && Contains("cannot combine with sumsq") &&
                                    Contains("combine them with sum"));
}

TEST_CASE("validation: NaN constants", "[ir]") {
    Graph g = Graph::gemm("g");
    g.store(g.accumulator() * g.constant(std::numeric_limits<float>::quiet_NaN(), "bad"), "out", DType::BF16);
    CHECK_THAT(only_problem(g), Contains("node '%bad' (`%bad = const nan`)") && Contains("the constant is NaN"));
    Graph inf = Graph::gemm("inf");
    inf.store(inf.max(inf.accumulator(), inf.constant(-INFINITY)), "out", DType::BF16);
    CHECK(problem_lines(inf).empty());
}

TEST_CASE("validation: elementwise scalar types", "[ir]") {
    Graph g = Graph::tile("g");
    Value t = g.tile_input("t", DType::F32);
    SECTION("to_f32 of an f32 value") {
        g.store(g.to_f32(t, "conv"), "out", DType::BF16);
        CHECK_THAT(only_problem(g), Contains("node '%conv'") && Contains("to_f32 converts i32 values") &&
                                        Contains("'%t' is an f32 full-width tile"));
    }
    Value idx = g.row_index("idx");
    SECTION("unary math on i32") {
        g.store(t * g.sqrt(idx, "root"), "out", DType::BF16);
        CHECK_THAT(only_problem(g), Contains("node '%root'") && Contains("sqrt needs an f32 operand") &&
                                        Contains("'%idx' is an i32 row vector") && Contains("to_f32"));
    }
    SECTION("round to i32") {
        g.store(t + g.round(g.to_f32(idx), DType::I32, "r"), "out", DType::BF16);
        CHECK_THAT(only_problem(g), Contains("node '%r'") && Contains("round targets bf16, f16 or f32, not i32"));
    }
    SECTION("binary arithmetic on i32") {
        g.store(g.mul(t, idx, "prod"), "out", DType::BF16);
        CHECK_THAT(only_problem(g), Contains("node '%prod'") && Contains("mul needs f32 operands") &&
                                        Contains("'%idx' is an i32 row vector"));
    }
    SECTION("comparing f32 with i32") {
        g.store(t * g.eq(t, idx, "same"), "out", DType::BF16);
        CHECK_THAT(only_problem(g), Contains("node '%same'") && Contains("eq compares values of one type") &&
                                        Contains("'%t' is an f32") && Contains("'%idx' is an i32"));
    }
    SECTION("select with an i32 mask") {
        g.store(g.select(idx, t, t, "pick"), "out", DType::BF16);
        CHECK_THAT(only_problem(g), Contains("node '%pick'") && Contains("mask of select must be f32"));
    }
    SECTION("select between f32 and i32") {
        g.store(g.select(g.lt(t, t), t, idx, "pick"), "out", DType::BF16);
        CHECK_THAT(only_problem(g), Contains("node '%pick'") && Contains("select chooses between values of one type"));
    }
}

TEST_CASE("validation: half/full width mixing names both operands and widths", "[ir]") {
    Graph g = Graph::gemm("g");
    Value acc = g.accumulator();
    Value half = g.even(acc, "g_half");
    Value gamma = g.col_input("gamma", DType::BF16);
    g.store(g.mul(half, gamma, "scaled"), "out", DType::BF16);
    CHECK_THAT(only_problem(g), Contains("node '%scaled'") && Contains("half/full width mixing") &&
                                    Contains("'%g_half' is an f32 half-width tile") &&
                                    Contains("'%gamma' is an f32 full-width column vector"));

    Graph d = Graph::tile("d");
    Value wide = d.tile_input("wide", DType::F32, Width::Double);
    d.store(d.add(d.tile_input("t", DType::F32), wide, "sum"), "out", DType::BF16);
    CHECK_THAT(only_problem(d), Contains("node '%sum'") && Contains("full/double width mixing"));
}

TEST_CASE("validation: pairwise ops", "[ir]") {
    Graph g = Graph::tile("g");
    Value t = g.tile_input("t", DType::F32);
    SECTION("even of a row") {
        g.store(t * g.even(g.row_input("r", DType::F32), "e"), "out", DType::BF16);
        CHECK_THAT(only_problem(g), Contains("node '%e'") && Contains("adjacent column pairs of a tile or column") &&
                                        Contains("'%r' is an f32 row vector"));
    }
    SECTION("odd of a half value") {
        Value h = g.even(t, "h");
        g.store(g.join(h, g.odd(h, "o")), "out", DType::BF16);
        CHECK_THAT(only_problem(g), Contains("node '%o'") && Contains("needs a full or double width value") &&
                                        Contains("'%h' is an f32 half-width tile"));
    }
    SECTION("pairs of i32 values") {
        g.store(t * g.to_f32(g.even(g.col_index(), "e")), "out", DType::BF16);
        CHECK_THAT(only_problem(g), Contains("node '%e'") && Contains("even needs f32 values"));
    }
    SECTION("join of a tile and a column") {
        g.store(g.join(g.even(t), g.col_input("c", DType::F32, Width::Half), "j"), "out", DType::BF16);
        CHECK_THAT(only_problem(g), Contains("node '%j'") && Contains("join needs two tiles or two column vectors"));
    }
    SECTION("join of double values") {
        Value w = g.tile_input("w", DType::F32, Width::Double);
        g.store(t + g.even(g.join(w, w, "j")), "out", DType::BF16);
        CHECK_THAT(only_problem(g), Contains("node '%j'") && Contains("join of two double-width values"));
    }
    SECTION("join of mixed widths") {
        g.store(g.join(t, g.even(t), "j"), "out", DType::BF16);
        CHECK_THAT(only_problem(g), Contains("node '%j'") && Contains("half/full width mixing"));
    }
}

TEST_CASE("validation: store and accumulate", "[ir]") {
    SECTION("a row stored from a gemm graph") {
        Graph g = Graph::gemm("g");
        Value r = g.row_input("r", DType::F32);
        g.store(g.accumulator() * r, "ok", DType::BF16);
        g.store(r, "out", DType::BF16);
        CHECK_THAT(only_problem(g), Contains("node '%out'") && Contains("in a gemm graph store writes a tile") &&
                                        Contains("'%r' is an f32 row vector"));
    }
    SECTION("a scalar stored from a finalize graph") {
        Graph g = Graph::finalize("g");
        Value s = g.scalar("s");
        g.store(g.partials("p", ReduceOp::Sum) * s, "ok", DType::F32);
        g.accumulate(s, "out", DType::F32);
        CHECK_THAT(only_problem(g), Contains("node '%out'") &&
                                        Contains("in a finalize graph accumulate writes a row vector") &&
                                        Contains("'%s' is an f32 scalar"));
    }
    SECTION("f32 written as i32") {
        Graph g = Graph::gemm("g");
        g.store(g.accumulator(), "out", DType::I32);
        CHECK_THAT(only_problem(g), Contains("node '%out'") && Contains("'%acc' is f32 and cannot be written as i32"));
    }
    SECTION("i32 stored as bf16") {
        Graph g = Graph::tile("g");
        g.store(g.tile_input("ids", DType::I32), "out", DType::BF16);
        CHECK_THAT(only_problem(g), Contains("node '%out'") &&
                                        Contains("'%ids' is i32 and can only be stored as i32, not bf16"));
    }
    SECTION("i32 accumulated") {
        Graph g = Graph::tile("g");
        g.accumulate(g.tile_input("ids", DType::I32), "out", DType::I32);
        CHECK_THAT(only_problem(g), Contains("node '%out'") && Contains("accumulate adds into a float tensor"));
    }
}

TEST_CASE("validation: reductions", "[ir]") {
    SECTION("in a finalize graph") {
        Graph g = Graph::finalize("g");
        Value p = g.partials("p", ReduceOp::Sum);
        g.store(p, "out", DType::F32);
        g.reduce_row(p, ReduceOp::Sum, "again");
        CHECK_THAT(only_problem(g), Contains("node '%again'") &&
                                        Contains("reduce_row is not available in a finalize graph"));
    }
    SECTION("of a column vector") {
        Graph g = Graph::gemm("g");
        g.store(g.accumulator(), "out", DType::BF16);
        g.reduce_col(g.col_input("c", DType::F32), ReduceOp::Max, "red");
        CHECK_THAT(only_problem(g), Contains("node '%red'") && Contains("reduce_col reduces a tile") &&
                                        Contains("'%c' is an f32 full-width column vector"));
    }
    SECTION("of an i32 tile") {
        Graph g = Graph::tile("g");
        g.reduce_row(g.tile_input("ids", DType::I32), ReduceOp::Max, "red");
        CHECK_THAT(only_problem(g), Contains("node '%red'") && Contains("reduce_row needs an f32 tile"));
    }
}

TEST_CASE("validation: a sink used as an operand", "[ir]") {
    SECTION("a reduction") {
        Graph g = Graph::gemm("g");
        Value acc = g.accumulator();
        g.reduce_row(acc, ReduceOp::SumSq, "sumsq");
        const int bad = detail::GraphAccess::append(g, node(Op::Rsqrt, {2 - 1}, "r"));
        detail::GraphAccess::append(g, node(Op::Store, {bad}, "out", DType::BF16));
        CHECK(only_problem(g) == "graph 'g', node '%r' (`%r = rsqrt %sumsq`): operand '%sumsq' is a reduce_row sink "
                                 "and has no value; partials are read by a finalize graph with partials(...)");
    }
    SECTION("a store") {
        Graph g = Graph::gemm("g");
        Value acc = g.accumulator();
        g.store(acc, "y", DType::BF16);
        const int bad = detail::GraphAccess::append(g, node(Op::Exp, {1}, "e"));
        detail::GraphAccess::append(g, node(Op::Store, {bad}, "out", DType::BF16));
        CHECK_THAT(only_problem(g), Contains("node '%e'") && Contains("'%y' is a store sink and has no value") &&
                                        Contains("use its operand '%acc' instead"));
    }
}

TEST_CASE("validation: computed but never used", "[ir]") {
    Graph g = Graph::gemm("g");
    Value acc = g.accumulator();
    g.exp(acc, "dead");
    g.store(acc, "out", DType::BF16);
    CHECK_THAT(only_problem(g), Contains("node '%dead'") && Contains("computed but never used"));
}

TEST_CASE("validation: store_transposed writes tiles, of any width and FP8 too, in gemm graphs and tile programs", "[ir]") {
    {
        Graph g = Graph::gemm("transposed");
        Value acc = g.accumulator();
        g.store_transposed(acc, "d_t", DType::E4M3);
        g.store_transposed(g.even(acc), "even_t", DType::E5M2);  // half width: unstaged, so allowed in FP8
        const CheckedGraph c = check_graph(g);
        REQUIRE(c.bindings.size() == 2);
        CHECK(c.bindings[0].transposed);
        CHECK(c.bindings[0].role == BindingRole::Output);
        CHECK(c.bindings[1].width == Width::Half);
    }
    {
        Graph g = Graph::finalize("transposed_vector");
        g.store_transposed(g.partials("p", ReduceOp::Sum), "out", DType::F32);
        CHECK_THAT(only_problem(g), Catch::Contains("gemm graphs and tile programs only"));
    }
    {
        Graph g = Graph::gemm("transposed_row");
        g.store(g.accumulator(), "d", DType::BF16);
        g.store_transposed(g.row_input("r", DType::F32), "out", DType::F32);
        CHECK_THAT(only_problem(g), Catch::Contains("writes a tile"));
    }
}

TEST_CASE("validation: tile_input_transposed is a full-width tile input of tile programs only", "[ir]") {
    {
        Graph g = Graph::tile("read_transposed");
        Value x = g.tile_input_transposed("x", DType::E4M3);  // FP8 too: staged like any full-width tile tensor
        g.store(x, "y", DType::BF16);
        const CheckedGraph c = check_graph(g);
        REQUIRE(c.bindings.size() == 2);
        CHECK(c.bindings[0].transposed);
        CHECK(c.bindings[0].role == BindingRole::Input);
        CHECK(c.bindings[0].width == Width::Full);
        CHECK(c.types[0].kind == Kind::Tile);
        CHECK_FALSE(c.bindings[1].transposed);
    }
    {
        Graph g = Graph::gemm("gemm_transposed");
        g.store(g.add(g.accumulator(), g.tile_input_transposed("x", DType::BF16)), "y", DType::F32);
        CHECK_THAT(only_problem(g), Catch::Contains("tile_input_transposed is read by tile programs only"));
    }
    {
        Graph g = Graph::finalize("finalize_transposed");
        g.tile_input_transposed("x", DType::BF16);
        g.store(g.partials("p", ReduceOp::Sum), "y", DType::F32);
        const std::vector<std::string> lines = problem_lines(g);
        INFO(to_text(g));
        CHECK(std::any_of(lines.begin(), lines.end(), [](const std::string& line) {
            return line.find("tile_input_transposed is read by tile programs only") != std::string::npos;
        }));
    }
}

TEST_CASE("validation: reduce_group in gemm graphs and tile programs, not nested", "[ir]") {
    {
        Graph g = Graph::gemm("group_ok");
        Value acc = g.accumulator();
        Value y = g.mul(acc, g.row_input("rstd", DType::F32));
        g.store(g.div(acc, g.reduce_group(g.abs(y), ReduceOp::Max)), "out", DType::BF16);
        CHECK(problem_lines(g).empty());
    }
    {
        // The Hopper pass before the visits reads tile inputs from global memory: they may feed a group value.
        Graph g = Graph::gemm("group_of_input");
        Value x = g.tile_input("x", DType::BF16);
        g.store(g.add(g.accumulator(), g.reduce_group(g.mul(x, x), ReduceOp::Sum)), "out", DType::BF16);
        CHECK(problem_lines(g).empty());
    }
    {
        // So does a tile program's.
        Graph g = Graph::tile("group_in_tile");
        Value x = g.tile_input("x", DType::BF16);
        g.store(g.div(x, g.reduce_group(g.abs(x), ReduceOp::Max)), "out", DType::BF16);
        CHECK(problem_lines(g).empty());
    }
    {
        Graph g = Graph::finalize("group_in_finalize");
        Value p = g.partials("p", ReduceOp::Sum);
        g.store(g.reduce_group(p, ReduceOp::Max), "out", DType::F32);
        const std::vector<std::string> lines = problem_lines(g);
        REQUIRE_FALSE(lines.empty());
        CHECK_THAT(lines[0], Catch::Contains("gemm graphs and tile programs only"));
    }
    {
        Graph g = Graph::gemm("group_sumsq");
        Value acc = g.accumulator();
        g.store(g.reduce_group(acc, ReduceOp::SumSq), "out", DType::BF16);
        CHECK_THAT(only_problem(g), Catch::Contains("sum, max or min, not sumsq"));
    }
    {
        Graph g = Graph::gemm("group_nested");
        Value acc = g.accumulator();
        Value inner = g.reduce_group(acc, ReduceOp::Max, "inner");
        g.store(g.reduce_group(g.sub(acc, inner), ReduceOp::Sum), "out", DType::BF16);
        CHECK_THAT(only_problem(g), Catch::Contains("depends on '%inner'") && Catch::Contains("cannot depend on another"));
    }
}
