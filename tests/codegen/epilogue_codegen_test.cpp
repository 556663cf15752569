// Tests of the generated functor: every op lowers with its node comment in every domain and width, and the
// lowering of sources, broadcasts, pairs, sinks and reductions follows the contract of section 2.
#include <catch2/catch.hpp>

#include <cctype>
#include <string>
#include <vector>

#include "codegen/codegen_test_graphs.hpp"
#include "codegen/cuda_spelling.hpp"
#include "codegen/epilogue_codegen.hpp"
#include "coda/blocks.hpp"
#include "ir/check_graph.hpp"
#include "ir/text.hpp"

namespace coda {
namespace {

const std::vector<Op> kAllOps = {
#define CODA_OP(Enum, text, category, arity, cuda) Op::Enum,
#include "coda/ops.def"
#undef CODA_OP
};

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

// The text between the comment of node `id` inside row_values / col_values / visit / element and the next node
// comment (or the end): the first, where a row or column value is computed; the visit only refers to it.
// (Reductions also have their comment on their State member, earlier in the struct.)
std::string statements_of(const std::string& source, const Graph& g, int id) {
    const std::string comment = "// " + node_to_text(g, id) + "\n";
    std::size_t body = source.find("static void row_values(");
    if (body == std::string::npos) body = source.find("static void visit(");
    if (body == std::string::npos) body = source.find("static void element(");
    if (body == std::string::npos) return {};
    const std::size_t at = source.find(comment, body);
    if (at == std::string::npos) return {};
    const std::size_t begin = at + comment.size();
    std::size_t end = source.find("// %", begin);
    if (end == std::string::npos) end = source.size();
    return source.substr(begin, end - begin);
}

// The literal fragments of an ops.def expression ("expf(", ")"), which must survive into the statement.
std::vector<std::string> fragments(std::string_view pattern) {
    std::vector<std::string> out;
    std::string current;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] == '{' && i + 2 < pattern.size() && pattern[i + 2] == '}') {
            if (!current.empty()) out.push_back(current);
            current.clear();
            i += 2;
        } else {
            current += pattern[i];
        }
    }
    if (!current.empty()) out.push_back(current);
    return out;
}

// Whether `ident` occurs in `text` as a whole identifier (v1 must not match inside v1_y or v10).
bool mentions(const std::string& text, const std::string& ident) {
    const auto is_ident_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    for (std::size_t at = text.find(ident); at != std::string::npos; at = text.find(ident, at + 1)) {
        const bool starts = at == 0 || !is_ident_char(text[at - 1]);
        const bool ends = at + ident.size() == text.size() || !is_ident_char(text[at + ident.size()]);
        if (starts && ends) return true;
    }
    return false;
}

void check_node_lowering(const std::string& source, const Graph& g, int id) {
    const Node& n = g.node(id);
    const std::string body = statements_of(source, g, id);
    INFO("node " << node_to_text(g, id) << "\nits statements:\n" << body);
    REQUIRE_FALSE(body.empty());
    const OpCategory category = op_info(n.op).category;
    // A value is declared as an array, or (an input the visit takes from Epilogue::Inputs) a reference to one.
    const std::string value = codegen::value_identifier(g, id);
    if (category != OpCategory::Sink) CHECK((contains(body, value + "[") || contains(body, "(&" + value + ")[")));
    if (n.op == Op::ReduceGroup) {
        // The operand is read before the visits (group_visit); a visit reads its group's value from the state.
        CHECK(contains(source, "group_visit"));
        CHECK(contains(body, "st.g" + std::to_string(id) + "["));
    } else {
        for (int arg : n.args) CHECK(mentions(body, codegen::value_identifier(g, arg)));
    }
    if (category == OpCategory::Unary || category == OpCategory::Binary || category == OpCategory::Compare ||
        category == OpCategory::Select)
        for (const std::string& f : fragments(op_info(n.op).cuda)) CHECK(contains(body, f));
}

TEST_CASE("every op lowers in every domain and width, each node with its canonical line", "[codegen]") {
    int generated = 0;
    std::vector<bool> covered(kAllOps.size(), false);
    for (Op op : kAllOps)
        for (Domain d : {Domain::Gemm, Domain::Tile, Domain::Finalize})
            for (Width w : {Width::Half, Width::Full, Width::Double}) {
                const std::optional<Graph> g = test::graph_using(op, d, w);
                if (!g) continue;
                INFO("op " << op_info(op).text << ", domain " << to_string(d) << ", width " << to_string(w) << "\n"
                           << to_text(*g));
                const CheckedGraph checked = check_graph(*g);
                const std::string source = generate_epilogue(checked);
                CHECK(contains(source, d == Domain::Finalize ? "struct Program {" : "struct Epilogue {"));
                for (int id = 0; id < static_cast<int>(g->nodes().size()); ++id) check_node_lowering(source, *g, id);
                covered[static_cast<std::size_t>(op)] = true;
                ++generated;
            }
    for (Op op : kAllOps) {
        INFO("op " << op_info(op).text);
        CHECK(covered[static_cast<std::size_t>(op)]);
    }
    CHECK(generated > 3 * static_cast<int>(kAllOps.size()));
}

TEST_CASE("generated functors are deterministic", "[codegen]") {
    for (Op op : kAllOps) {
        const std::optional<Graph> g = test::graph_using(op, Domain::Tile, Width::Full);
        if (!g) continue;
        CHECK(generate_epilogue(check_graph(*g)) == generate_epilogue(check_graph(*g)));
    }
}

TEST_CASE("sources load through their binding slots at the contract's element offsets", "[codegen]") {
    const Graph g = test::out_proj_graph();
    const std::string src = generate_epilogue(check_graph(g));
    // residual: slots 0-1, gamma: 2, x1_out: 3-4, h_out: 5-6, x1_sumsq: 7.
    CHECK(contains(src, "using Args = coda::EpilogueArgs<8>;"));
    CHECK(contains(src, "float v0_acc[2] = {acc0, acc1};"));
    // Tile inputs go through the mainloop's tile source (which may have staged them), numbered in graph order.
    CHECK(contains(src, "tiles.template load<2>(0, reinterpret_cast<const coda::bf16*>(args.slot[0]) + m * "
                        "static_cast<long long>(args.slot[1]) + pair * 2, c, in.v1_residual);"));
    CHECK(contains(src, "static constexpr int kTileInputs = 1;"));
    CHECK(contains(src, "static constexpr int tile_input_pair_bytes(int i) { return i == 0 ? 4 : 0; }"));
    CHECK(contains(src, "if (i == 0) return {reinterpret_cast<unsigned char*>(args.slot[0]), "
                        "static_cast<long long>(args.slot[1]) * 2};"));
    CHECK(contains(src, "for (int v = 0; v < 2; ++v) v2_x1[v] = (v0_acc[v] + v1_residual[v]);"));
    // Column inputs are loaded once per column pair (col_values), and the visit refers to them.
    CHECK(contains(src, "coda::load<2>(reinterpret_cast<const coda::bf16*>(args.slot[2]) + pair * 2, v3_gamma);"));
    CHECK(contains(src, "col.v3_gamma[v] = v3_gamma[v];"));
    CHECK(contains(src, "const float (&v3_gamma)[2] = col.v3_gamma;"));
    // Tile outputs go through the mainloop's tile sink (which may stage them), numbered in graph order.
    CHECK(contains(src, "tiles.template store<2>(1, reinterpret_cast<coda::bf16*>(args.slot[5]) + m * "
                        "static_cast<long long>(args.slot[6]) + pair * 2, c, v4_h);"));
    CHECK(contains(src, "static constexpr int kTileOutputs = 2;"));
    CHECK(contains(src, "static constexpr int tile_output_pair_bytes(int i) { return i == 0 ? 4 : i == 1 ? 4 : 0; }"));
    CHECK(contains(src, "typename coda::Reducer<coda::RedOp::SumSq>::State r7[L::kRowSlots];"));
    CHECK(contains(src, "coda::add_in_columns<Tiles, coda::RedOp::SumSq>(st.r7[row_slot], c, v2_x1[v]);"));
    // No accumulate, one row reduction: what lets the Hopper mainloop visit past N without a branch a visit.
    CHECK(contains(src, "static constexpr bool kAccumulates = false;"));
    CHECK(contains(src, "static constexpr int kRowReductions = 1;"));
    CHECK(contains(src, "coda::write_row_partials<L, coda::RedOp::SumSq>(st.r7, scratch, "
                        "reinterpret_cast<float*>(args.slot[7]), t);"));
    CHECK(contains(src, "if (coda::row_scratch_floats<L>() > floats) floats = coda::row_scratch_floats<L>();"));
}

TEST_CASE("row x column broadcast, scalars, constants and indices", "[codegen]") {
    Graph g = Graph::tile("rope_angle");
    Value pos = g.row_input("pos", DType::I32);
    Value theta = g.col_input("theta", DType::F32, Width::Half);
    Value posf = g.to_f32(pos, "posf");
    Value angle = g.mul(posf, theta, "angle");
    Value scale = g.scalar("scale");
    Value scaled = g.mul(angle, scale, "scaled");
    Value eps = g.constant(1e-6f, "eps");
    Value shifted = g.add(scaled, eps, "shifted");
    Value col = g.col_index(Width::Double, "col");
    Value colf = g.to_f32(col, "colf");
    Value lo = g.join(shifted, shifted, "lo");
    Value hi = g.join(shifted, shifted, "hi");
    Value wide = g.join(lo, hi, "wide");
    Value row = g.row_index("row");
    Value rowf = g.to_f32(row, "rowf");
    Value a = g.add(wide, colf, "a");
    g.store(g.add(a, rowf, "sum"), "out", DType::F32);
    const std::string src = generate_epilogue(check_graph(g));
    CHECK(contains(src, "using Args = coda::EpilogueArgs<5>;"));
    CHECK(contains(src, "int v0_pos[1];"));
    CHECK(contains(src, "coda::load<1>(reinterpret_cast<const int*>(args.slot[0]) + m, v0_pos);"));
    CHECK(contains(src, "coda::load<1>(reinterpret_cast<const float*>(args.slot[1]) + pair, v1_theta);"));
    // Row values (pos, posf) and column values (theta) are computed once per row / column pair and shared by
    // the visits; row_index and col_index stay at the visit, and so does what mixes rows and columns (angle).
    const auto members = [&](const std::string& name) {
        const std::size_t at = src.find("struct " + name + " {");
        return at == std::string::npos ? std::string() : src.substr(at, src.find("};", at) - at);
    };
    const std::string rows = members("RowValues");
    const std::string cols = members("ColValues");
    CHECK(contains(rows, "int v0_pos[1];"));
    CHECK(contains(rows, "float v2_posf[1];"));
    CHECK(contains(cols, "float v1_theta[1];"));
    CHECK_FALSE(contains(rows, "v13_row[1];"));
    CHECK_FALSE(contains(cols, "v8_col[4];"));
    CHECK_FALSE(contains(rows + cols, "v3_angle[1];"));
    CHECK(contains(src, "const float (&v2_posf)[1] = row.v2_posf;"));
    CHECK(contains(src, "const float (&v1_theta)[1] = col.v1_theta;"));
    // A scalar input is read with the row values (a device scalar is a load), not at each visit.
    CHECK(contains(rows, "float v4_scale[1];"));
    CHECK_FALSE(contains(cols, "v4_scale"));
    CHECK(contains(src, "const float (&v4_scale)[1] = row.v4_scale;"));
    CHECK_FALSE(contains(src, "in.v0_pos"));
    CHECK(contains(src, "float v2_posf[1] = {static_cast<float>(v0_pos[0])};"));
    CHECK(contains(src, "float v3_angle[1] = {(v2_posf[0] * v1_theta[0])};"));
    CHECK(contains(src, "float v4_scale[1] = {coda::scalar_from_slot(args.slot[2])};"));
    CHECK(contains(src, "float v6_eps[1] = {" + codegen::float_literal(1e-6f) + "};"));
    CHECK(contains(src, "for (int v = 0; v < 4; ++v) v8_col[v] = pair * 4 + v;"));
    CHECK(contains(src, "float v10_lo[2] = {v7_shifted[0], v7_shifted[0]};"));
    CHECK(contains(src, "float v12_wide[4] = {v10_lo[0], v11_hi[0], v10_lo[1], v11_hi[1]};"));
    CHECK(contains(src, "int v13_row[1] = {c.m};"));
    CHECK(contains(src, "for (int v = 0; v < 4; ++v) v15_a[v] = (v12_wide[v] + v9_colf[v]);"));
    CHECK(contains(src, "for (int v = 0; v < 4; ++v) v16_sum[v] = (v15_a[v] + v14_rowf[0]);"));
    CHECK(contains(src, "tiles.template store<4>(0, reinterpret_cast<float*>(args.slot[3]) + m * "
                        "static_cast<long long>(args.slot[4]) + pair * 4, c, v16_sum);"));
}

TEST_CASE("even and odd split lanes, join interleaves them", "[codegen]") {
    Graph g = Graph::tile("pairs");
    Value x = g.tile_input("x", DType::F32, Width::Double);
    Value e = g.even(x, "e");
    Value o = g.odd(x, "o");
    Value ee = g.even(e, "ee");
    Value oo = g.odd(o, "oo");
    g.store(g.join(ee, oo, "j"), "out", DType::F32);
    const std::string src = generate_epilogue(check_graph(g));
    CHECK(contains(src, "float v1_e[2] = {v0_x[0], v0_x[2]};"));
    CHECK(contains(src, "float v2_o[2] = {v0_x[1], v0_x[3]};"));
    CHECK(contains(src, "float v3_ee[1] = {v1_e[0]};"));
    CHECK(contains(src, "float v4_oo[1] = {v2_o[1]};"));
    CHECK(contains(src, "float v5_j[2] = {v3_ee[0], v4_oo[0]};"));
}

// The tables a staging mainloop sizes its shared memory from: bytes per column pair = lanes x element size, and
// the element size, for every width and dtype; pointers and row pitches (leading dimension x element size) from the binding slots.
TEST_CASE("tile input and output tables give each tensor's bytes per column pair and per element and its row pitch",
          "[codegen]") {
    Graph g = Graph::gemm("tables");
    Value wide = g.tile_input("wide", DType::F32, Width::Double);  // 4 lanes x 4 bytes
    Value half = g.tile_input("half", DType::BF16, Width::Half);   // 1 lane x 2 bytes
    Value ids = g.tile_input("ids", DType::I32);                   // 2 lanes x 4 bytes
    Value acc = g.accumulator();
    g.store(g.even(wide, "e") + acc + g.to_f32(ids), "y", DType::F16);         // 2 lanes x 2 bytes
    g.store(g.even(g.even(wide, "ee"), "eee") + half, "z", DType::BF16);       // 1 lane x 2 bytes
    g.store(wide, "w", DType::F32);                                            // 4 lanes x 4 bytes
    const std::string src = generate_epilogue(check_graph(g));
    CHECK(contains(src, "static constexpr int kTileInputs = 3;"));
    CHECK(contains(src, "tile_input_pair_bytes(int i) { return i == 0 ? 16 : i == 1 ? 2 : i == 2 ? 8 : 0; }"));
    CHECK(contains(src, "static constexpr int kTileOutputs = 3;"));
    CHECK(contains(src, "tile_output_pair_bytes(int i) { return i == 0 ? 4 : i == 1 ? 2 : i == 2 ? 16 : 0; }"));
    // Element sizes tell a mainloop which tensors are pairs of 16-bit elements (y, f16 x 2 lanes: mma fragments),
    // which pair bytes alone do not (a half-width f32 tensor also has 4 bytes a pair).
    CHECK(contains(src, "tile_input_element_bytes(int i) { return i == 0 ? 4 : i == 1 ? 2 : i == 2 ? 4 : 0; }"));
    CHECK(contains(src, "tile_output_element_bytes(int i) { return i == 0 ? 2 : i == 1 ? 2 : i == 2 ? 4 : 0; }"));
    // wide: slots 0-1 (f32, 4 bytes an element); half: slots 2-3 (bf16).
    CHECK(contains(src, "if (i == 0) return {reinterpret_cast<unsigned char*>(args.slot[0]), "
                        "static_cast<long long>(args.slot[1]) * 4};"));
    CHECK(contains(src, "if (i == 1) return {reinterpret_cast<unsigned char*>(args.slot[2]), "
                        "static_cast<long long>(args.slot[3]) * 2};"));
    // Loads and stores name their tensor's number in those tables.
    CHECK(contains(src, "tiles.template load<1>(1, "));
    CHECK(contains(src, "tiles.template store<4>(2, "));
}

TEST_CASE("an epilogue without tile tensors has empty tables", "[codegen]") {
    Graph g = Graph::gemm("no_tiles");
    g.reduce_row(g.accumulator(), ReduceOp::Sum, "rows");
    const std::string src = generate_epilogue(check_graph(g));
    CHECK(contains(src, "static constexpr int kTileInputs = 0;"));
    CHECK(contains(src, "static constexpr int kTileOutputs = 0;"));
    CHECK(contains(src, "return {nullptr, 0};"));
}

TEST_CASE("accumulate and column reductions", "[codegen]") {
    Graph g = Graph::gemm("dgamma", GemmSpec{DType::BF16, Major::MN, Major::MN});
    Value acc = g.accumulator();
    Value half = g.even(acc, "g");
    g.accumulate(acc, "dx", DType::F32);
    g.reduce_col(half, ReduceOp::Sum, "dg");
    g.reduce_col(acc, ReduceOp::Min, "mins");
    g.reduce_row(half, ReduceOp::Max, "maxes");
    const std::string src = generate_epilogue(check_graph(g));
    CHECK(contains(src, "float* const out = reinterpret_cast<float*>(args.slot[0]) + m * "
                        "static_cast<long long>(args.slot[1]) + pair * 2;"));
    CHECK(contains(src, "coda::load<2>(out, sum);"));
    CHECK(contains(src, "for (int v = 0; v < 2; ++v) sum[v] += v0_acc[v];"));
    CHECK(contains(src, "coda::store<2>(out, sum);"));
    CHECK(contains(src, "typename coda::Reducer<coda::RedOp::Sum>::State c3[L::kColSlots][1];"));
    CHECK(contains(src, "typename coda::Reducer<coda::RedOp::Min>::State c4[L::kColSlots][2];"));
    CHECK(contains(src, "coda::Reducer<coda::RedOp::Sum>::add(st.c3[col_slot][0], v1_g[0]);"));
    CHECK(contains(src, "for (int v = 0; v < 2; ++v) "
                        "coda::Reducer<coda::RedOp::Min>::add(st.c4[col_slot][v], v0_acc[v]);"));
    CHECK(contains(src, "coda::add_in_columns<Tiles, coda::RedOp::Max>(st.r5[row_slot], c, v1_g[0]);"));
    CHECK(contains(src, "static constexpr bool kAccumulates = true;"));
    CHECK(contains(src, "coda::write_col_partials<L, coda::RedOp::Sum, 1>(st.c3, scratch, "
                        "reinterpret_cast<float*>(args.slot[2]), t);"));
    CHECK(contains(src, "coda::write_col_partials<L, coda::RedOp::Min, 2>(st.c4, scratch, "
                        "reinterpret_cast<float*>(args.slot[3]), t);"));
    CHECK(contains(src, "coda::write_row_partials<L, coda::RedOp::Max>(st.r5, scratch, "
                        "reinterpret_cast<float*>(args.slot[4]), t);"));
    CHECK(contains(src, "if (coda::col_scratch_floats<L, 1>() > floats) floats = coda::col_scratch_floats<L, 1>();"));
    CHECK(contains(src, "if (coda::col_scratch_floats<L, 2>() > floats) floats = coda::col_scratch_floats<L, 2>();"));
    // Partials are written in node order.
    CHECK(src.find("write_col_partials<L, coda::RedOp::Sum") < src.find("write_col_partials<L, coda::RedOp::Min"));
    CHECK(src.find("write_col_partials<L, coda::RedOp::Min") < src.find("write_row_partials<L, coda::RedOp::Max"));
}

TEST_CASE("graphs without reductions still define State and need no scratch", "[codegen]") {
    Graph g = Graph::tile("copy");
    g.store(g.tile_input("x", DType::F16), "y", DType::BF16);
    const std::string src = generate_epilogue(check_graph(g));
    CHECK(contains(src, "struct State {"));
    CHECK(contains(src, "int unused;"));
    CHECK(contains(src, "int floats = 0;\n        return floats;"));
    CHECK_FALSE(contains(src, "write_row_partials"));
}

TEST_CASE("finalize programs fold partials and address element l", "[codegen]") {
    Graph g = Graph::finalize("rstd");
    Value s = g.partials("x1_sumsq", ReduceOp::Sum);
    Value lse = g.partials("lse_parts", ReduceOp::Lse);
    Value r = g.rsqrt(s / g.scalar("n") + 1e-6f, "r");
    g.store(r, "rstd", DType::F32);
    g.accumulate(lse - g.row_input("target", DType::F32), "loss", DType::F32);
    const std::string src = generate_epilogue(check_graph(g));
    CHECK(contains(src, "struct Program {"));
    CHECK(contains(src, "__device__ static void element(const Args& args, int l, const coda::FinalizeProblem& p,\n"
                        "                                   const coda::FinalizeLane& lane) {"));
    // The element's strands fold its partials together (coda::fold_partials shuffles across the warp).
    CHECK(contains(src, "float v0_x1_sumsq[1] = {coda::fold_partials<coda::RedOp::Sum>("
                        "reinterpret_cast<const float*>(args.slot[0]), l, p, lane)};"));
    CHECK(contains(src, "float v1_lse_parts[1] = {coda::fold_partials<coda::RedOp::Lse>("
                        "reinterpret_cast<const float*>(args.slot[1]), l, p, lane)};"));
    // Every strand computes the element's values; one of them writes them.
    CHECK(contains(src, "        if (lane.writes) coda::store<1>(reinterpret_cast<float*>(args.slot[3]) + l, v6_r);"));
    CHECK(contains(src, "        coda::load<1>(reinterpret_cast<const float*>(args.slot[4]) + l, v8_target);"));
    CHECK(contains(src, "        if (lane.writes) {\n"
                        "            float* const out = reinterpret_cast<float*>(args.slot[5]) + l;"));
    CHECK_FALSE(contains(src, "State"));
    CHECK_FALSE(contains(src, "p.t; ++t"));
}

TEST_CASE("round lowers to the dtype's rounding helper", "[codegen]") {
    Graph g = Graph::tile("rounds");
    Value x = g.tile_input("x", DType::F32);
    Value b = g.round(x, DType::BF16, "b");
    Value h = g.round(x, DType::F16, "h");
    Value f = g.round(x, DType::F32, "f");
    g.store(g.add(g.add(b, h), f), "y", DType::F32);
    const std::string src = generate_epilogue(check_graph(g));
    CHECK(contains(src, "v1_b[v] = coda::round_to_bf16(v0_x[v]);"));
    CHECK(contains(src, "v2_h[v] = coda::round_to_f16(v0_x[v]);"));
    CHECK(contains(src, "v3_f[v] = (v0_x[v]);"));
}

TEST_CASE("every input is read before the first store, whatever the node order", "[codegen]") {
    // rope_backward creates its input z after the store of dz: an aliasing output must not change what z reads.
    const std::string src = generate_epilogue(check_graph(blocks::rope_backward()));
    const std::size_t z_load = src.find("// %z = tile_input bf16 full");
    const std::size_t first_store = src.find("tiles.template store<");
    REQUIRE(z_load != std::string::npos);
    REQUIRE(first_store != std::string::npos);
    CHECK(z_load < first_store);
}

}  // namespace
}  // namespace coda
