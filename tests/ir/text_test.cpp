// The canonical text: exact printing, round trips (graph -> text -> graph and text -> graph -> text),
// comments and several graphs per file, and parse errors that name the file, line and node.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include "coda/error.hpp"
#include "ir/hash.hpp"
#include "ir/text.hpp"

using namespace coda;
using Catch::Matchers::Contains;

namespace {

constexpr const char* kOutProj =
    "graph out_proj gemm in=bf16 a=k b=k\n"
    "%acc = accumulator\n"
    "%residual = tile_input bf16 full\n"
    "%x1 = add %acc %residual\n"
    "%gamma = col_input bf16 full\n"
    "%h = mul %x1 %gamma\n"
    "%x1_out = store bf16 %x1\n"
    "%h_out = store bf16 %h\n"
    "%x1_sumsq = reduce_row sumsq %x1\n";

std::string parse_error(std::string_view text) {
    try {
        parse_graphs(text, "f.coda");
    } catch (const Error& e) {
        return e.what();
    }
    FAIL("expected a parse error for:\n" << text);
    return {};
}

}  // namespace

TEST_CASE("to_text prints the canonical form", "[ir]") {
    Graph g = Graph::gemm("out_proj");
    Value acc = g.accumulator();
    Value x1 = g.add(acc, g.tile_input("residual", DType::BF16), "x1");
    Value h = g.mul(x1, g.col_input("gamma", DType::BF16), "h");
    g.store(x1, "x1_out", DType::BF16);
    g.store(h, "h_out", DType::BF16);
    g.reduce_row(x1, ReduceOp::SumSq, "x1_sumsq");
    CHECK(to_text(g) == kOutProj);
    CHECK(parse_graph(kOutProj) == g);
    CHECK(to_text(parse_graph(kOutProj)) == kOutProj);
}

TEST_CASE("to_text prints every attribute of every op that has one", "[ir]") {
    GemmSpec spec;
    spec.input = DType::F16;
    spec.a = Major::MN;
    spec.b = Major::MN;
    Graph g = Graph::gemm("attrs", spec);
    Value acc = g.accumulator("a0");
    Value t = g.tile_input("t", DType::I32, Width::Double);
    Value r = g.row_input("r", DType::F16);
    Value c = g.col_input("c", DType::F32, Width::Half);
    Value k = g.constant(0.1f);
    Value ci = g.col_index(Width::Half, "ci");
    Value rd = g.round(acc, DType::F16, "rd");
    g.store(rd, "st", DType::F32);
    g.accumulate(rd, "ac", DType::BF16);
    g.reduce_col(rd, ReduceOp::Lse, "rc");
    Graph f = Graph::finalize("fin");
    f.partials("p", ReduceOp::Max);
    CHECK(to_text(g) ==
          "graph attrs gemm in=f16 a=mn b=mn\n"
          "%a0 = accumulator\n"
          "%t = tile_input i32 double\n"
          "%r = row_input f16\n"
          "%c = col_input f32 half\n"
          "%_4 = const 0.1\n"
          "%ci = col_index half\n"
          "%rd = round f16 %a0\n"
          "%st = store f32 %rd\n"
          "%ac = accumulate bf16 %rd\n"
          "%rc = reduce_col lse %rd\n");
    CHECK(to_text(f) == "graph fin finalize\n%p = partials max\n");
    CHECK(node_to_text(g, 6) == "%rd = round f16 %a0");
    CHECK(header_to_text(Graph::tile("t")) == "graph t tile");
    (void)t, (void)r, (void)c, (void)k, (void)ci;
}

TEST_CASE("unnamed nodes print as %_<id> and read back unnamed", "[ir]") {
    Graph g = Graph::tile("t");
    Value x = g.tile_input("x", DType::F32);
    g.store(g.exp(g.neg(x)), "y", DType::BF16);
    const std::string text = to_text(g);
    CHECK(text == "graph t tile\n%x = tile_input f32 full\n%_1 = neg %x\n%_2 = exp %_1\n%y = store bf16 %_2\n");
    const Graph back = parse_graph(text);
    CHECK(back.node(1).name.empty());
    CHECK(back.node(2).name.empty());
    CHECK(back == g);
}

TEST_CASE("constants round-trip bit for bit", "[ir]") {
    const float values[] = {0.0f, -0.0f, 1.0f, -1.25f, 0.1f, 1.0f / 3.0f, 3.14159265f, 1e-45f, 1.17549435e-38f,
                            std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(), 16777217.0f,
                            INFINITY, -INFINITY, 6.02214076e23f};
    for (float v : values) {
        Graph g = Graph::tile("c");
        g.constant(v);
        const std::string text = to_text(g);
        const Graph back = parse_graph(text);
        INFO(text);
        const float got = back.node(0).value;
        CHECK(std::memcmp(&got, &v, sizeof v) == 0);
        CHECK(to_text(back) == text);
    }
    CHECK(const_to_text(INFINITY) == "inf");
    CHECK(const_to_text(-INFINITY) == "-inf");
    CHECK(const_to_text(std::numeric_limits<float>::quiet_NaN()) == "nan");
    CHECK(const_to_text(0.5f) == "0.5");
    CHECK(const_to_text(-0.0f) == "-0");
}

TEST_CASE("a file may hold several graphs, blank lines and comments", "[ir]") {
    const std::string text = std::string("# epilogues of one block\n\n") + kOutProj +
                             "\n"
                             "graph rstd finalize   # combines the sum of squares\n"
                             "%sumsq = partials sum\n"
                             "  %inv_n = scalar\n"
                             "%eps = const 1e-06\n"
                             "%ms = mul %sumsq %inv_n # mean\n"
                             "%r = rsqrt %ms\n"
                             "%rstd = store f32 %r\n";
    const std::vector<ParsedGraph> graphs = parse_graph_file(text, "block.coda");
    REQUIRE(graphs.size() == 2);
    CHECK(to_text(graphs[0].graph) == kOutProj);
    CHECK(graphs[0].where.source_name == "block.coda");
    CHECK(graphs[0].where.header_line == 3);
    CHECK(graphs[0].where.node_lines == std::vector<int>{4, 5, 6, 7, 8, 9, 10, 11});
    const Graph& f = graphs[1].graph;
    CHECK(f.name() == "rstd");
    CHECK(f.domain() == Domain::Finalize);
    CHECK(graphs[1].where.header_line == 13);
    CHECK(graphs[1].where.node_lines == std::vector<int>{14, 15, 16, 17, 18, 19});
    CHECK(f.node(2).value == 1e-6f);
    CHECK(f.node(3).args == std::vector<int>{0, 1});
    // Names are per graph: the second graph may reuse a name of the first.
    CHECK(parse_graphs("graph a tile\n%x = tile_input f32 full\ngraph b tile\n%x = tile_input f32 full\n", "f")
              .size() == 2);
}

TEST_CASE("gemm headers default a missing spec and reject bad ones", "[ir]") {
    const Graph g = parse_graph("graph g gemm b=mn\n%acc = accumulator\n");
    CHECK(g.spec().input == DType::BF16);
    CHECK(g.spec().a == Major::K);
    CHECK(g.spec().b == Major::MN);
    CHECK(header_to_text(g) == "graph g gemm in=bf16 a=k b=mn");
    CHECK_THAT(parse_error("graph g gemm in=f64\n"), Contains("f.coda:1:") && Contains("in=<bf16|f16|e4m3|e5m2>") &&
                                                         Contains("in_b=<e4m3|e5m2>") && Contains("'in=f64'"));
    CHECK_THAT(parse_error("graph g gemm in_b=e4m3 in_b=e5m2\n"), Contains("'in_b=' is given twice"));
    CHECK_THAT(parse_error("graph g gemm a=k a=mn\n"), Contains("'a=' is given twice"));
    CHECK_THAT(parse_error("graph g tile in=bf16\n"),
               Contains("only gemm graphs take in=, in_b=, a=, b=, scales= and acc="));
    CHECK_THAT(parse_error("graph g\n"), Contains("f.coda:1: graph header: expected `graph NAME DOMAIN`"));
    CHECK_THAT(parse_error("graph g gem\n"), Contains("unknown domain 'gem'"));
}

TEST_CASE("a B type other than A's prints as in_b= and reads back, and the same type prints as before", "[ir]") {
    Graph g = Graph::gemm("g", GemmSpec{DType::E5M2, Major::K, Major::K, DType::E4M3});
    g.store(g.accumulator(), "D", DType::BF16);
    CHECK(header_to_text(g) == "graph g gemm in=e5m2 a=k b=k in_b=e4m3");
    const Graph back = parse_graph(to_text(g));
    CHECK(back.spec().input == DType::E5M2);
    CHECK(back.spec().b_input() == DType::E4M3);
    CHECK(back == g);
    CHECK(to_text(back) == to_text(g));
    // in_b equal to in is the default spelled out: the same spec, text and hash as without it.
    const Graph same = parse_graph("graph g gemm in=e4m3 in_b=e4m3 a=k b=k\n%acc = accumulator\n");
    const Graph plain = parse_graph("graph g gemm in=e4m3 a=k b=k\n%acc = accumulator\n");
    CHECK(same.spec() == plain.spec());
    CHECK(to_text(same) == to_text(plain));
    CHECK(header_to_text(same) == "graph g gemm in=e4m3 a=k b=k");
    CHECK(graph_hash(same) == graph_hash(plain));
}

TEST_CASE("block scales print as scales=block and read back, and every other graph prints as before", "[ir]") {
    GemmSpec spec{DType::E4M3, Major::K, Major::K};
    spec.scales = ScaleMode::Block128x128;
    Graph g = Graph::gemm("g", spec);
    g.store(g.accumulator(), "D", DType::BF16);
    CHECK(header_to_text(g) == "graph g gemm in=e4m3 a=k b=k scales=block");
    const Graph back = parse_graph(to_text(g));
    CHECK(back.spec().scales == ScaleMode::Block128x128);
    CHECK(back == g);
    CHECK(to_text(back) == to_text(g));

    // With in_b: scales= comes last.
    spec.input_b = DType::E5M2;
    CHECK(header_to_text(Graph::gemm("g", spec)) == "graph g gemm in=e4m3 a=k b=k in_b=e5m2 scales=block");
    CHECK(parse_graph("graph g gemm scales=block in=e4m3 in_b=e5m2\n%acc = accumulator\n").spec() == spec);

    // Without block scales the text, and so the hash, is what it always was; scales=none is that default spelled out.
    Graph plain = Graph::gemm("g", GemmSpec{DType::E4M3, Major::K, Major::K});
    plain.store(plain.accumulator(), "D", DType::BF16);
    CHECK(to_text(plain) == "graph g gemm in=e4m3 a=k b=k\n%acc = accumulator\n%D = store bf16 %acc\n");
    CHECK(graph_hash(plain) != graph_hash(g));
    const Graph none =
        parse_graph("graph g gemm in=e4m3 a=k b=k scales=none\n%acc = accumulator\n%D = store bf16 %acc\n");
    CHECK(none.spec().scales == ScaleMode::Off);
    CHECK(none == plain);
    CHECK(to_text(none) == to_text(plain));
    CHECK(graph_hash(none) == graph_hash(plain));
    CHECK(parse_graph(kOutProj).spec() == GemmSpec{});
    CHECK(to_text(parse_graph(kOutProj)) == kOutProj);

    CHECK_THAT(parse_error("graph g gemm in=e4m3 scales=row\n"),
               Contains("scales=<block|block_1x128|none>") && Contains("'scales=row'"));
    CHECK_THAT(parse_error("graph g gemm scales=block scales=none\n"), Contains("'scales=' is given twice"));
    CHECK_THAT(parse_error("graph g tile scales=block\n"), Contains("only gemm graphs take") && Contains("scales="));
}

TEST_CASE("every ScaleMode round-trips through its text name and a gemm graph's header", "[ir]") {
    using Named = std::pair<ScaleMode, std::string_view>;
    for (const auto& [mode, text] : {Named{ScaleMode::Off, "none"}, Named{ScaleMode::Block128x128, "block"},
                                     Named{ScaleMode::Block1x128, "block_1x128"}}) {
        INFO(text);
        CHECK(to_string(mode) == text);
        CHECK(parse_scale_mode(text) == mode);
        Graph g = Graph::gemm("g", GemmSpec{DType::E4M3, Major::K, Major::K, std::nullopt, mode});
        g.store(g.accumulator(), "D", DType::BF16);
        const Graph back = parse_graph(to_text(g));
        CHECK(back.spec().scales == mode);
        CHECK(back == g);
        CHECK(to_text(back) == to_text(g));
    }
    CHECK_FALSE(parse_scale_mode("row"));
    CHECK_FALSE(parse_scale_mode("Block128x128"));
}

TEST_CASE("B's scales per row print as scales=block_1x128 and read back, with a hash of their own", "[ir]") {
    GemmSpec spec{DType::E4M3, Major::K, Major::K};
    spec.scales = ScaleMode::Block128x128;
    Graph blocks = Graph::gemm("g", spec);
    blocks.store(blocks.accumulator(), "D", DType::BF16);
    spec.scales = ScaleMode::Block1x128;
    Graph rows = Graph::gemm("g", spec);
    rows.store(rows.accumulator(), "D", DType::BF16);
    CHECK(header_to_text(rows) == "graph g gemm in=e4m3 a=k b=k scales=block_1x128");
    const Graph back = parse_graph(to_text(rows));
    CHECK(back.spec().scales == ScaleMode::Block1x128);
    CHECK(back == rows);
    CHECK_FALSE(back == blocks);
    CHECK(graph_hash(rows) != graph_hash(blocks));
    CHECK(parse_graph(to_text(blocks)).spec().scales == ScaleMode::Block128x128);
}

TEST_CASE("promoted FP8 accumulation prints as acc=promoted and reads back, with a hash of its own, and fast prints as "
          "before",
          "[ir]") {
    const auto scaled_wgrad = [](GemmSpec spec) {
        Graph g = Graph::gemm("wgrad", spec);
        g.accumulate(g.mul(g.accumulator(), g.scalar("s"), "scaled"), "D", DType::F32);
        return g;
    };
    const GemmSpec fast{DType::E5M2, Major::K, Major::K, DType::E4M3};
    GemmSpec promoted = fast;
    promoted.accumulation = Accumulation::Promoted;
    const Graph f = scaled_wgrad(fast), p = scaled_wgrad(promoted);
    CHECK(header_to_text(p) == "graph wgrad gemm in=e5m2 a=k b=k in_b=e4m3 acc=promoted");
    const Graph back = parse_graph(to_text(p));
    CHECK(back.spec().accumulation == Accumulation::Promoted);
    CHECK(back.spec() == promoted);
    CHECK(back == p);
    CHECK(to_text(back) == to_text(p));
    CHECK_FALSE(back == f);
    CHECK_FALSE(promoted == fast);
    CHECK(graph_hash(p) != graph_hash(f));

    // Fast, the default, prints nothing: every graph's text and hash stay what they were; acc=fast spells it out.
    CHECK(header_to_text(f) == "graph wgrad gemm in=e5m2 a=k b=k in_b=e4m3");
    std::string text = to_text(f);
    text.insert(text.find('\n'), " acc=fast");
    const Graph spelled = parse_graph(text);
    CHECK(spelled == f);
    CHECK(graph_hash(spelled) == graph_hash(f));
    CHECK(GemmSpec{}.accumulation == Accumulation::Fast);

    // After scales= when both are given (validation refuses that pair; the text still reads it back).
    GemmSpec both{DType::E4M3, Major::K, Major::K};
    both.scales = ScaleMode::Block128x128;
    both.accumulation = Accumulation::Promoted;
    CHECK(header_to_text(Graph::gemm("g", both)) == "graph g gemm in=e4m3 a=k b=k scales=block acc=promoted");
    CHECK(parse_graph("graph g gemm acc=promoted scales=block in=e4m3\n%acc = accumulator\n").spec() == both);

    CHECK_THAT(parse_error("graph g gemm in=e4m3 acc=exact\n"),
               Contains("acc=<fast|promoted>") && Contains("'acc=exact'"));
    CHECK_THAT(parse_error("graph g gemm acc=promoted acc=fast\n"), Contains("'acc=' is given twice"));
    CHECK_THAT(parse_error("graph g tile acc=promoted\n"), Contains("only gemm graphs take") && Contains("acc="));
}

TEST_CASE("parse errors name the file, line and node, and what was expected", "[ir]") {
    const std::string head = "graph g tile\n%x = tile_input f32 full\n";
    SECTION("unknown op, with close names") {
        CHECK_THAT(parse_error(head + "%y = sigmod %x\n"),
                   Contains("f.coda:3: node '%y': unknown op 'sigmod'; did you mean sigmoid?"));
        CHECK_THAT(parse_error(head + "%y = frobnicate %x\n"), Contains("f.coda:3: node '%y': unknown op 'frobnicate'"));
    }
    SECTION("wrong attribute") {
        CHECK_THAT(parse_error(head + "%y = round b16 %x\n"),
                   Contains("f.coda:3: node '%y': expected a dtype (bf16, f16, f32, i32), got 'b16'") &&
                       Contains("usage: `round DTYPE %a`"));
        CHECK_THAT(parse_error("graph g tile\n%x = tile_input f32 quarter\n"),
                   Contains("f.coda:2: node '%x': expected a width (half, full, double), got 'quarter'"));
        CHECK_THAT(parse_error(head + "%s = reduce_row mean %x\n"),
                   Contains("node '%s': expected a reduce op (sum, max, min, sumsq, lse), got 'mean'"));
        CHECK_THAT(parse_error("graph g tile\n%c = const one\n"),
                   Contains("f.coda:2: node '%c': expected a number, inf or -inf, got 'one'"));
        CHECK_THAT(parse_error("graph g tile\n%c = const 1e40\n"),
                   Contains("node '%c': constant '1e40' overflows f32") && Contains("write inf or -inf"));
    }
    SECTION("missing attribute") {
        CHECK_THAT(parse_error(head + "%y = store %x\n"),
                   Contains("f.coda:3: node '%y': missing attribute: expected a dtype") &&
                       Contains("usage: `store DTYPE %a`"));
    }
    SECTION("unknown operand") {
        CHECK_THAT(parse_error(head + "%y = add %x %z\n%z = exp %x\n"),
                   Contains("f.coda:3: node '%y': unknown operand '%z': no node of that name is defined above"));
    }
    SECTION("wrong operand count") {
        CHECK_THAT(parse_error(head + "%y = add %x\n"), Contains("f.coda:3: node '%y': add takes 2 operands, got 1"));
        CHECK_THAT(parse_error(head + "%y = exp %x %x\n"), Contains("node '%y': exp takes 1 operand, got 2"));
        CHECK_THAT(parse_error(head + "%y = exp %x extra\n"), Contains("node '%y': unexpected 'extra'"));
    }
    SECTION("duplicate node name") {
        CHECK_THAT(parse_error(head + "%x = exp %x\n"),
                   Contains("f.coda:3: node '%x': duplicate node name (first defined on line 2)"));
    }
    SECTION("missing header") {
        CHECK_THAT(parse_error("# no header\n%x = tile_input f32 full\n"),
                   Contains("f.coda:2: node '%x': comes before any `graph NAME DOMAIN` header"));
    }
    SECTION("reserved and malformed names") {
        CHECK_THAT(parse_error(head + "%_7 = exp %x\n"),
                   Contains("f.coda:3: node '%_7': names starting with '_' are reserved") &&
                       Contains("this is node 1, so use %_1"));
        CHECK_THAT(parse_error(head + "%9y = exp %x\n"), Contains("node '%9y': expected a node name"));
        CHECK_THAT(parse_error(head + "%y exp %x\n"), Contains("node '%y': expected `%name = op"));
        CHECK_THAT(parse_error(head + "y = exp %x\n"), Contains("f.coda:3: expected a node `%name = op ...`"));
    }
}

TEST_CASE("parse errors show unprintable bytes escaped and long tokens cut", "[ir]") {
    const std::string head = "graph g tile\n%x = tile_input f32 full\n";
    // A NUL inside a name: the message goes on past it.
    CHECK_THAT(parse_error(head + std::string("%a\0b = exp %x\n", 14)),
               Contains("f.coda:3: node '%a\\x00b': expected a node name of letters, digits and '_'"));
    CHECK_THAT(parse_error(head + "%y = exp\t%x \x7f\n"), Contains("unexpected '\\x7f' where an operand"));
    CHECK_THAT(parse_error(head + "%y = ex\xc3\xa9 %x\n"), Contains("unknown op 'ex\\xc3\\xa9';"));

    // A 10 MB token: its first 64 bytes and its length; quickly, though no op name is near it.
    const std::string huge(10 * 1024 * 1024, 'a');
    const std::string message = parse_error(head + "%y = " + huge + " %x\n");
    CHECK_THAT(message, Contains("f.coda:3: node '%y': unknown op '" + std::string(64, 'a') + "...' (10485760 bytes, "
                                 "cut); see include/coda/ops.def"));
    CHECK(message.size() < 300);
    CHECK_THAT(parse_error(head + "%" + huge + " = frob %x\n"),
               Contains("node '%" + std::string(63, 'a') + "...' (10485761 bytes, cut): unknown op 'frob'"));
}

TEST_CASE("a UTF-8 byte-order mark at the start of a file is skipped", "[ir]") {
    CHECK(parse_graph(std::string("\xef\xbb\xbf") + kOutProj) == parse_graph(kOutProj));
    // Anywhere else it is an error that shows its bytes.
    CHECK_THAT(parse_error(std::string(kOutProj) + "\xef\xbb\xbf%y = exp %acc\n"),
               Contains("f.coda:10: expected a node `%name = op ...` or a `graph NAME DOMAIN` header, got "
                        "'\\xef\\xbb\\xbf%y'"));
}

TEST_CASE("constants that no f32 holds: underflow and overflow are told apart, and subnormals are kept", "[ir]") {
    for (const char* tiny : {"1e-50", "-1e-50", "7e-46", "1e-400"})
        CHECK_THAT(parse_error(std::string("graph g tile\n%c = const ") + tiny + "\n"),
                   Contains(std::string("node '%c': constant '") + tiny + "' underflows f32: it would round to 0") &&
                       Contains("write 0 if zero is meant"));
    for (const char* huge : {"1e39", "-3.5e38", "1e400"})
        CHECK_THAT(parse_error(std::string("graph g tile\n%c = const ") + huge + "\n"),
                   Contains(std::string("constant '") + huge + "' overflows f32"));
    // The smallest subnormal f32 and one above it: read as the f32 nearest to them.
    CHECK(parse_graph("graph g tile\n%c = const 1e-45\n").node(0).value == std::numeric_limits<float>::denorm_min());
    CHECK(parse_graph("graph g tile\n%c = const 1e-40\n").node(0).value == 1e-40f);
}

TEST_CASE("parse_graph wants exactly one graph", "[ir]") {
    CHECK_THROWS_WITH(parse_graph("# nothing\n"), Contains("expected exactly one graph in the text, found 0"));
    CHECK_THROWS_WITH(parse_graph("graph a tile\ngraph b tile\n"), Contains("found 2"));
    CHECK(parse_graph("graph a tile").name() == "a");  // no final newline needed
}

TEST_CASE("the parser leaves validation to check_graph", "[ir]") {
    // Well-formed text of an invalid graph parses; the problems are check_graph's to report.
    const Graph g = parse_graph("graph g tile\n%i = row_index\n%e = exp %i\n%c = const nan\n");
    CHECK(g.nodes().size() == 3);
    CHECK(std::isnan(g.node(2).value));
}

TEST_CASE("target lines attach an arch and a config text to the graph before them", "[ir]") {
    const std::vector<ParsedGraph> graphs = parse_graph_file(
        "graph a tile\n%x = tile_input f32 full\n%y = store f32 %x\ntarget arch=sm_90a\n"
        "graph b gemm\n%acc = accumulator\n%d = store bf16 %acc\ntarget arch=sm_80 config=portable bm=64  \n"
        "target arch=sm_90a config=hopper bm=128 bn=256 cooperative # a comment\n",
        "r.coda");
    REQUIRE(graphs.size() == 2);
    REQUIRE(graphs[0].targets.size() == 1);
    CHECK(graphs[0].targets[0].arch == "sm_90a");
    CHECK(graphs[0].targets[0].config_text.empty());
    REQUIRE(graphs[1].targets.size() == 2);
    CHECK(graphs[1].targets[0].config_text == "portable bm=64");
    CHECK(graphs[1].targets[1].config_text == "hopper bm=128 bn=256 cooperative");
    CHECK(graphs[1].targets[1].line == 9);
    CHECK(target_to_text("sm_80", "portable bm=64") == "target arch=sm_80 config=portable bm=64\n");
    // The graph's own text is unchanged by its targets.
    CHECK(to_text(graphs[0].graph) == "graph a tile\n%x = tile_input f32 full\n%y = store f32 %x\n");
    CHECK_THROWS_WITH(parse_graph_file("target arch=sm_90a\n", "t.coda"), Contains("t.coda:1:") && Contains("before any"));
    CHECK_THROWS_WITH(parse_graph_file("graph a tile\ntarget sm_90a\n", "t.coda"),
                      Contains("t.coda:2:") && Contains("expected `target arch=ARCH"));
    CHECK_THROWS_WITH(parse_graph_file("graph a tile\ntarget arch=sm_90a hopper\n", "t.coda"),
                      Contains("expected config=CONFIG"));
}
