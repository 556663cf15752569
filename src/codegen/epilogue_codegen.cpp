// Emits struct Epilogue (begin_tile / visit / end_tile with per-thread reduction state) or struct Program
// (element) around the per-node statements of node_lowering. Node order is kept, so output is deterministic.
#include "codegen/epilogue_codegen.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "codegen/cuda_spelling.hpp"
#include "codegen/node_lowering.hpp"
#include "coda/error.hpp"
#include "ir/text.hpp"
#include "mainloop/block_scales.hpp"

namespace coda {
namespace {

using codegen::lanes;
using codegen::reducer;
using codegen::red_op;
using codegen::state_field;

constexpr const char* kMember = "    ";
constexpr const char* kBody = "        ";

std::vector<std::string> canonical_lines(const Graph& g) {
    std::vector<std::string> lines;
    for (int id = 0; id < static_cast<int>(g.nodes().size()); ++id) lines.push_back(node_to_text(g, id));
    return lines;
}

std::string slot_comment(const CheckedGraph& g) {
    std::string out = "// Parameter slots (64-bit words of coda::EpilogueArgs), in binding order:\n";
    if (g.bindings.empty()) out += "//   none (one unused slot keeps the array non-empty)\n";
    for (std::size_t i = 0; i < g.bindings.size(); ++i) {
        const Binding& b = g.bindings[i];
        const int first = first_slot(g, i);
        const int count = slot_count(b);
        const bool tensor = b.role == BindingRole::Input || b.role == BindingRole::Output ||
                            b.role == BindingRole::InOut;
        std::string what(to_string(b.role));
        if (tensor) what += fmt::format(" {}", to_string(b.kind));
        what += fmt::format(" {}", to_string(b.dtype));
        if (b.kind == Kind::Tile || b.kind == Kind::Col) what += fmt::format(" {}", to_string(b.width));
        const char* words = b.role == BindingRole::ScalarArg
                                ? "f32 bits in the low word, or a device pointer to the f32 with bit 63 set"
                            : count == 2 ? "pointer, leading dimension in elements"
                                         : "pointer";
        const std::string slots =
            count == 2 ? fmt::format("slots {}-{}", first, first + 1) : fmt::format("slot {}", first);
        out += fmt::format("//   {:<10} {}: {} ({})\n", slots, b.name, what, words);
    }
    if (block_scale_slots(g.graph) > 0) {
        // One phrase over the declared scales: "<first>'s pointer and leading dimension, <second>'s".
        std::string words;
        for (const BlockScaleOperand& s : block_scale_operands(g.graph))
            words += words.empty() ? fmt::format("{}'s pointer and leading dimension", s.name)
                                   : fmt::format(", {}'s", s.name);
        out += fmt::format("//   slots {}-{}  {} (block scales, read by the mainloop)\n", total_slots(g),
                           total_slots(g) + block_scale_slots(g.graph) - 1, words);
    }
    return out;
}

std::string args_alias(const CheckedGraph& g) {
    std::string out = fmt::format("{}using Args = coda::EpilogueArgs<{}>;\n", kMember, std::max(1, args_slots(g)));
    // Where a block-scaled GEMM's mainloop finds its scales (kernel_abi.cuh).
    if (block_scale_slots(g.graph) > 0)
        out += fmt::format("{}static constexpr int kBlockScaleSlot = {};\n", kMember, total_slots(g));
    return out;
}

bool is_reduction(const Node& n) { return n.op == Op::ReduceRow || n.op == Op::ReduceCol; }

bool is_group(const Node& n) { return n.op == Op::ReduceGroup; }

// Lanes of a reduction's operand: the per-thread state of a column reduction keeps one partial per lane.
int operand_lanes(const CheckedGraph& g, const Node& n) {
    return lanes(g.types.at(static_cast<std::size_t>(n.args.at(0))));
}

std::string state_struct(const CheckedGraph& g, const std::vector<std::string>& lines) {
    std::string out = fmt::format("{0}template <class L>\n{0}struct State {{\n", kMember);
    bool any = false;
    for (int id = 0; id < static_cast<int>(g.graph.nodes().size()); ++id) {
        const Node& n = g.graph.node(id);
        if (!is_reduction(n)) continue;
        any = true;
        out += fmt::format("{}// {}\n", kBody, lines[static_cast<std::size_t>(id)]);
        const std::string field = state_field(g, id);
        if (n.op == Op::ReduceRow)
            out += fmt::format("{}typename {}::State {}[L::kRowSlots];\n", kBody, reducer(n.reduce), field);
        else
            out += fmt::format("{}typename {}::State {}[L::kColSlots][{}];\n", kBody, reducer(n.reduce), field,
                               operand_lanes(g, n));
    }
    for (int id = 0; id < static_cast<int>(g.graph.nodes().size()); ++id) {
        if (!is_group(g.graph.node(id))) continue;
        any = true;
        out += fmt::format("{}// {} (the value of each row slot's groups, made before the visits)\n", kBody,
                           lines[static_cast<std::size_t>(id)]);
        out += fmt::format("{}float {}[L::kRowSlots][coda::groups_per_tile<L>()];\n", kBody, state_field(g, id));
    }
    if (!any) out += fmt::format("{}int unused;  // no reductions; C++ structs cannot be empty of storage\n", kBody);
    return out + fmt::format("{}}};\n", kMember);
}

std::string scratch_function(const CheckedGraph& g) {
    std::string out = fmt::format("{0}template <class L>\n{0}static constexpr int scratch_floats() {{\n", kMember);
    out += fmt::format("{}int floats = 0;\n", kBody);
    for (int id = 0; id < static_cast<int>(g.graph.nodes().size()); ++id) {
        const Node& n = g.graph.node(id);
        if (!is_reduction(n)) continue;
        const std::string need = n.op == Op::ReduceRow
                                     ? std::string("coda::row_scratch_floats<L>()")
                                     : fmt::format("coda::col_scratch_floats<L, {}>()", operand_lanes(g, n));
        out += fmt::format("{}if ({} > floats) floats = {};\n", kBody, need, need);
    }
    return out + fmt::format("{}return floats;\n{}}}\n", kBody, kMember);
}

std::string begin_tile(const CheckedGraph& g) {
    std::string out =
        fmt::format("{0}template <class L>\n{0}__device__ static void begin_tile(State<L>& st) {{\n", kMember);
    for (int id = 0; id < static_cast<int>(g.graph.nodes().size()); ++id) {
        const Node& n = g.graph.node(id);
        if (!is_reduction(n)) continue;
        const std::string field = state_field(g, id);
        // Fully unrolled so that the state stays in registers.
        out += fmt::format("{}#pragma unroll\n", kBody);
        if (n.op == Op::ReduceRow) {
            out += fmt::format("{}for (int i = 0; i < L::kRowSlots; ++i) st.{}[i] = {}::init();\n", kBody, field,
                               reducer(n.reduce));
        } else {
            const int v = operand_lanes(g, n);
            out += fmt::format("{}for (int i = 0; i < L::kColSlots; ++i)\n", kBody);
            out += fmt::format("{}    #pragma unroll\n", kBody);
            out += fmt::format("{}    for (int v = 0; v < {}; ++v) st.{}[i][v] = {}::init();\n", kBody, v, field,
                               reducer(n.reduce));
        }
    }
    for (int id = 0; id < static_cast<int>(g.graph.nodes().size()); ++id) {
        const Node& n = g.graph.node(id);
        if (!is_group(n)) continue;
        out += fmt::format("{}#pragma unroll\n", kBody);
        out += fmt::format("{}for (int i = 0; i < L::kRowSlots; ++i)\n", kBody);
        out += fmt::format("{}    #pragma unroll\n", kBody);
        out += fmt::format("{}    for (int j = 0; j < coda::groups_per_tile<L>(); ++j) st.{}[i][j] = {}::identity();\n",
                           kBody, state_field(g, id), reducer(n.reduce));
    }
    return out + fmt::format("{}}}\n", kMember);
}

std::string end_tile(const CheckedGraph& g, const codegen::LoweringContext& cx) {
    std::string out = fmt::format(
        "{0}template <class L>\n{0}__device__ static void end_tile(const Args& args, State<L>& st, float* scratch,\n"
        "{0}                                const coda::TileCoord& t) {{\n",
        kMember);
    for (int id = 0; id < static_cast<int>(g.graph.nodes().size()); ++id) {
        const Node& n = g.graph.node(id);
        if (!is_reduction(n)) continue;
        const std::string out_ptr =
            fmt::format("reinterpret_cast<float*>(args.slot[{}])", cx.slot.at(static_cast<std::size_t>(id)));
        if (n.op == Op::ReduceRow)
            out += fmt::format("{}coda::write_row_partials<L, {}>(st.{}, scratch, {}, t);\n", kBody, red_op(n.reduce),
                               state_field(g, id), out_ptr);
        else
            out += fmt::format("{}coda::write_col_partials<L, {}, {}>(st.{}, scratch, {}, t);\n", kBody,
                               red_op(n.reduce), operand_lanes(g, n),
                               state_field(g, id), out_ptr);
    }
    return out + fmt::format("{}}}\n", kMember);
}

// Sources first (they depend on nothing), then every other node `keep` selects, in graph order. Reading every
// input before the first store gives a graph the meaning "inputs as they were before the kernel" even when an
// output aliases an input (in-place updates), and lets the loads be in flight together: the compiler may not move
// a load above a store to a pointer that might alias it.
template <class Keep>
std::string node_statements(const CheckedGraph& g, const codegen::LoweringContext& cx,
                            const std::vector<std::string>& lines, Keep keep) {
    std::string out;
    const int count = static_cast<int>(g.graph.nodes().size());
    for (const bool sources : {true, false})
        for (int id = 0; id < count; ++id)
            if ((op_info(g.graph.node(id).op).category == OpCategory::Source) == sources && keep(id))
                codegen::lower_node(cx, id, lines[static_cast<std::size_t>(id)], kBody, out);
    return out;
}

std::string node_statements(const CheckedGraph& g, const codegen::LoweringContext& cx,
                            const std::vector<std::string>& lines) {
    return node_statements(g, cx, lines, [](int) { return true; });
}

// The locals `m` and `pair` for the statements of the nodes `keep` selects.
template <class Keep>
std::string visit_locals(const CheckedGraph& g, Keep keep) {
    bool row = false;
    bool pair = false;
    for (int id = 0; id < static_cast<int>(g.graph.nodes().size()); ++id) {
        if (!keep(id)) continue;
        const Op op = g.graph.node(id).op;
        row = row || codegen::uses_row(op);
        pair = pair || codegen::uses_pair(op);
    }
    std::string out;
    if (row) out += fmt::format("{}const long long m = c.m;  // 64-bit: m * leading dimension can pass 2^31\n", kBody);
    if (pair) out += fmt::format("{}const int pair = c.n / 2;  // lane v of V lanes is element pair * V + v\n", kBody);
    return out;
}

// Whether node `id` is a value of one row (`kind` Row) or one column pair (Col) alone, which a mainloop may
// compute once per row slot or column slot instead of once per visit (RowValues / ColValues): row and column
// inputs and what is computed from them with scalars and constants. row_index and col_index themselves are
// cheaper to recompute at the visit than to keep in registers.
bool hoisted(const CheckedGraph& g, int id, Kind kind) {
    const Node& n = g.graph.node(id);
    if (op_info(n.op).category == OpCategory::Sink || is_reduction(n)) return false;
    if (n.op == Op::RowIndex || n.op == Op::ColIndex) return false;
    // A scalar input goes with the row values: read once per row slot, not at every visit (a device scalar is a
    // load each time).
    if (n.op == Op::Scalar) return kind == Kind::Row;
    return g.types.at(static_cast<std::size_t>(id)).kind == kind;
}

bool hoisted(const CheckedGraph& g, int id) { return hoisted(g, id, Kind::Row) || hoisted(g, id, Kind::Col); }

// struct RowValues and row_values() (ColValues and col_values()): the hoisted values of one row (column pair),
// computed from the row (column) and scalar nodes alone.
std::string hoisted_values(const CheckedGraph& g, const codegen::LoweringContext& cx,
                           const std::vector<std::string>& lines, Kind kind) {
    const bool row = kind == Kind::Row;
    const char* type = row ? "RowValues" : "ColValues";
    const char* var = row ? "row" : "col";
    std::string members;
    std::string copies;
    for (int id = 0; id < static_cast<int>(g.graph.nodes().size()); ++id) {
        if (!hoisted(g, id, kind)) continue;
        const ValueType& t = g.types.at(static_cast<std::size_t>(id));
        const std::string name = codegen::value_identifier(g.graph, id);
        members += fmt::format("{}{} {}[{}];\n", kBody, codegen::register_type(t), name, lanes(t));
        copies += fmt::format("{}#pragma unroll\n{}for (int v = 0; v < {}; ++v) {}.{}[v] = {}[v];\n", kBody, kBody,
                              lanes(t), var, name, name);
    }
    std::string out = fmt::format("{}// What the visits of one {} share: {}_values(), once per {} slot where a mainloop "
                                  "keeps it.\n{}struct {} {{\n",
                                  kMember, row ? "row" : "column pair", var, row ? "row" : "column", kMember, type);
    out += members.empty() ? fmt::format("{}int unused;  // nothing to share\n", kBody) : members;
    out += fmt::format("{}}};\n\n", kMember);
    out += fmt::format("{0}__device__ static void {1}_values(const Args& args, const coda::Coord& c, {2}& {1}) {{\n",
                       kMember, var, type);
    if (members.empty())
        return out + fmt::format("{0}(void)args;\n{0}(void)c;\n{0}(void){1};\n{2}}}\n", kBody, var, kMember);
    // The hoisted nodes and their operands: every row (column) and scalar node, nothing of the tile.
    const auto keep = [&](int id) {
        const Node& n = g.graph.node(id);
        if (op_info(n.op).category == OpCategory::Sink || is_reduction(n)) return false;
        const Kind k = g.types.at(static_cast<std::size_t>(id)).kind;
        return k == kind || k == Kind::Scalar;
    };
    out += visit_locals(g, keep) + node_statements(g, cx, lines, keep) + copies;
    return out + fmt::format("{}}}\n", kMember);
}

// Inputs + load + visit(..., in): a visit split in two, so that a mainloop can issue the loads of several visits
// before the first of them stores (the compiler may not move a load above a store that might alias it). Inputs
// holds the tile inputs; row and column inputs are in RowValues / ColValues.
std::string inputs_and_load(const CheckedGraph& g, const codegen::LoweringContext& cx) {
    const auto tile_input = [&](int id) { return codegen::reads_input(g.graph.node(id).op) && !hoisted(g, id); };
    std::string members;
    std::string loads;
    for (int id = 0; id < static_cast<int>(g.graph.nodes().size()); ++id) {
        if (!tile_input(id)) continue;
        codegen::input_member(cx, id, kBody, members);
        codegen::load_input(cx, id, kBody, loads);
    }
    std::string out = fmt::format("{}// What a visit reads from tile inputs, loaded by load().\n{}struct Inputs {{\n",
                                  kMember, kMember);
    out += members.empty() ? fmt::format("{}int unused;  // no tile inputs\n", kBody) : members;
    out += fmt::format("{}}};\n\n", kMember);
    out += fmt::format("{0}template <class L, class Tiles = coda::GlobalTiles>\n{0}__device__ static void load(const Args& "
                       "args, const coda::Coord& c, Inputs& in, const Tiles& tiles = Tiles()) {{\n", kMember);
    if (loads.empty())
        out += fmt::format("{0}(void)args;\n{0}(void)c;\n{0}(void)in;\n{0}(void)tiles;\n", kBody);
    else
        out += visit_locals(g, tile_input) + loads;
    return out + fmt::format("{}}}\n", kMember);
}

// The hoisted values as the visit sees them: references to the members of `row` and `col`.
std::string hoisted_references(const CheckedGraph& g, const std::vector<std::string>& lines) {
    std::string out;
    for (int id = 0; id < static_cast<int>(g.graph.nodes().size()); ++id) {
        if (!hoisted(g, id)) continue;
        const ValueType& t = g.types.at(static_cast<std::size_t>(id));
        const std::string name = codegen::value_identifier(g.graph, id);
        out += fmt::format("{}// {}\n", kBody, lines[static_cast<std::size_t>(id)]);
        out += fmt::format("{}const {} (&{})[{}] = {}.{};\n", kBody, codegen::register_type(t), name, lanes(t),
                           hoisted(g, id, Kind::Row) ? "row" : "col", name);
    }
    return out;
}

std::string visit(const CheckedGraph& g, const codegen::LoweringContext& cx, const std::vector<std::string>& lines) {
    std::string out = fmt::format(
        "{0}template <class L, class Tiles = coda::GlobalTiles>\n"
        "{0}__device__ static void visit(const Args& args, State<L>& st, const coda::Coord& c, int row_slot,\n"
        "{0}                             int col_slot, float acc0, float acc1, const RowValues& row,\n"
        "{0}                             const ColValues& col, const Inputs& in, const Tiles& tiles = Tiles()) {{\n",
        kMember);
    out += fmt::format("{0}(void)row;\n{0}(void)col;\n{0}(void)in;\n{0}(void)tiles;\n", kBody);
    const auto at_visit = [&](int id) { return !hoisted(g, id); };
    out += visit_locals(g, [&](int id) { return at_visit(id) && !codegen::reads_input(g.graph.node(id).op); });
    codegen::LoweringContext from_inputs = cx;
    from_inputs.sources_from_inputs = true;
    out += hoisted_references(g, lines);
    out += node_statements(g, from_inputs, lines, at_visit);
    out += fmt::format("{}}}\n\n", kMember);
    out += fmt::format(
        "{0}template <class L, class Tiles = coda::GlobalTiles>\n"
        "{0}__device__ static void visit(const Args& args, State<L>& st, const coda::Coord& c, int row_slot,\n"
        "{0}                             int col_slot, float acc0, float acc1, const Inputs& in,\n"
        "{0}                             const Tiles& tiles = Tiles()) {{\n"
        "{1}RowValues row;\n"
        "{1}row_values(args, c, row);\n"
        "{1}ColValues col;\n"
        "{1}col_values(args, c, col);\n"
        "{1}visit<L>(args, st, c, row_slot, col_slot, acc0, acc1, row, col, in, tiles);\n"
        "{0}}}\n\n",
        kMember, kBody);
    out += fmt::format(
        "{0}template <class L>\n"
        "{0}__device__ static void visit(const Args& args, State<L>& st, const coda::Coord& c, int row_slot,\n"
        "{0}                             int col_slot, float acc0, float acc1) {{\n"
        "{1}Inputs in;\n"
        "{1}load<L>(args, c, in);\n"
        "{1}visit<L>(args, st, c, row_slot, col_slot, acc0, acc1, in);\n"
        "{0}}}\n",
        kMember, kBody);
    return out;
}

// reduce_group's pass before the visits (hopper_epilogue.cuh, tile_program.cuh): group_visit folds each visit's
// operand values into its row group's state, reading the tile inputs they need through `tiles` (global memory, or
// the tile program's staged tile) and the row and column inputs from global memory itself (the visits load them
// again), and group_finish combines each row's groups over the row's sharers. kGroupReductions: whether to run it.
std::string group_functions(const CheckedGraph& g, const codegen::LoweringContext& cx,
                            const std::vector<std::string>& lines) {
    const int count = static_cast<int>(g.graph.nodes().size());
    std::vector<int> groups;
    std::vector<bool> cone(static_cast<std::size_t>(count), false);
    for (int id = 0; id < count; ++id) {
        if (!is_group(g.graph.node(id))) continue;
        groups.push_back(id);
        std::vector<int> pending = {g.graph.node(id).args.at(0)};
        while (!pending.empty()) {
            const int v = pending.back();
            pending.pop_back();
            if (cone[static_cast<std::size_t>(v)]) continue;
            cone[static_cast<std::size_t>(v)] = true;
            for (int a : g.graph.node(v).args) pending.push_back(a);
        }
    }
    std::string out = fmt::format("{}static constexpr int kGroupReductions = {};\n", kMember, groups.size());
    if (groups.empty()) return out;  // the mainloop calls the functions below only where there are some
    out += fmt::format(
        "\n{0}template <class L, class Tiles = coda::GlobalTiles>\n"
        "{0}__device__ static void group_visit(const Args& args, State<L>& st, const coda::Coord& c, int row_slot,\n"
        "{0}                                   int col_slot, float acc0, float acc1, const Tiles& tiles = Tiles()) {{\n",
        kMember);
    const auto keep = [&](int id) { return static_cast<bool>(cone[static_cast<std::size_t>(id)]); };
    out += fmt::format("{0}(void)acc0;\n{0}(void)acc1;\n{0}(void)tiles;\n", kBody);
    // Pairs past N (a mainloop that visits them) add nothing, and read no input: a tile input's row ends at N.
    out += fmt::format("{}if (c.n >= c.N) return;\n", kBody);
    out += visit_locals(g, keep) + node_statements(g, cx, lines, keep);
    out += fmt::format("{}{{\n", kBody);
    out += fmt::format("{}    const int group = coda::group_of_slot<L>(col_slot);\n", kBody);
    for (int id : groups) {
        const Node& n = g.graph.node(id);
        const std::string field = state_field(g, id);
        const std::string operand = codegen::value_identifier(g.graph, n.args.at(0));
        const int v = lanes(g.types.at(static_cast<std::size_t>(n.args.at(0))));
        out += fmt::format("{}    // {}\n", kBody, lines[static_cast<std::size_t>(id)]);
        out += fmt::format("{}    #pragma unroll\n", kBody);
        out += fmt::format("{0}    for (int v = 0; v < {1}; ++v) st.{2}[row_slot][group] = coda::group_add<{3}>("
                           "st.{2}[row_slot][group], {4}[v]);\n",
                           kBody, v, field, red_op(n.reduce), operand);
    }
    out += fmt::format("{}}}\n", kBody);
    out += fmt::format("{}}}\n\n", kMember);
    out += fmt::format("{0}template <class L>\n{0}__device__ static void group_finish(State<L>& st, float* scratch) {{\n",
                       kMember);
    for (int id : groups)
        out += fmt::format("{}L::template combine_groups<{}>(st.{}, scratch);\n", kBody, red_op(g.graph.node(id).reduce),
                           state_field(g, id));
    return out + fmt::format("{}}}\n", kMember);
}

// The store_transposed sinks, numbered as tiles.store_transposed() gets them: how many, the lanes of the value each
// writes (its rows per column pair of the index space), the bytes of one element, and where each lives (pointer,
// bytes between its rows). The Hopper and portable mainloops write them from the visits to global memory; a tile
// program stages them as transposed tiles.
std::string transposed_table(const CheckedGraph& g, const codegen::LoweringContext& cx) {
    std::string lanes_of;
    std::string elements;
    std::string views;
    int count = 0;
    for (int id = 0; id < static_cast<int>(g.graph.nodes().size()); ++id) {
        if (cx.transposed_index.at(static_cast<std::size_t>(id)) < 0) continue;
        const Node& n = g.graph.node(id);
        const std::size_t element = size_of(n.dtype);
        const int slot = cx.slot.at(static_cast<std::size_t>(id));
        lanes_of += fmt::format("j == {} ? {} : ", count, lanes(g.types.at(static_cast<std::size_t>(n.args.at(0)))));
        elements += fmt::format("j == {} ? {} : ", count, element);
        views += fmt::format("{}if (j == {}) return {{reinterpret_cast<unsigned char*>(args.slot[{}]), "
                             "static_cast<long long>(args.slot[{}]) * {}}};\n", kBody, count, slot, slot + 1, element);
        ++count;
    }
    std::string out = fmt::format("{}// store_transposed sinks: lanes of each one's value, bytes per element, where each "
                                  "lives.\n", kMember);
    out += fmt::format("{}static constexpr int kTransposedStores = {};\n", kMember, count);
    out += fmt::format("{}__host__ __device__ static constexpr int transposed_output_lanes(int j) {{ return {}0; }}\n",
                       kMember, lanes_of);
    out += fmt::format("{}__host__ __device__ static constexpr int transposed_output_element_bytes(int j) {{ return {}0; "
                       "}}\n", kMember, elements);
    out += fmt::format("{0}__device__ static coda::TileView transposed_output(const Args& args, int j) {{\n", kMember);
    if (count == 0) out += fmt::format("{}(void)args;\n{}(void)j;\n", kBody, kBody);
    out += views;
    return out + fmt::format("{}return {{nullptr, 0}};\n{}}}\n", kBody, kMember);
}

// The tile inputs and outputs as a mainloop that stages them in shared memory sees them: how many, the bytes of
// one column pair of each (lanes x element size) and of one element, and where each lives (pointer, bytes between
// rows).
std::string tile_table(const CheckedGraph& g, const codegen::LoweringContext& cx, bool outputs) {
    const char* what = outputs ? "output" : "input";
    const std::vector<int>& index = outputs ? cx.tile_output_index : cx.tile_input_index;
    std::string sizes;
    std::string elements;
    std::string views;
    std::string transposed;
    int count = 0;
    for (int id = 0; id < static_cast<int>(g.graph.nodes().size()); ++id) {
        if (index.at(static_cast<std::size_t>(id)) < 0) continue;
        const Node& n = g.graph.node(id);
        if (n.op == Op::TileInputTransposed) transposed += fmt::format("i == {} || ", count);
        // A store's lanes are its operand's; a tile input's its own.
        const int value = outputs ? n.args.at(0) : id;
        const std::size_t element = size_of(n.dtype);
        const std::size_t pair_bytes = static_cast<std::size_t>(lanes(g.types.at(static_cast<std::size_t>(value)))) * element;
        const int slot = cx.slot.at(static_cast<std::size_t>(id));
        sizes += fmt::format("i == {} ? {} : ", count, pair_bytes);
        elements += fmt::format("i == {} ? {} : ", count, element);
        views += fmt::format("{}if (i == {}) return {{reinterpret_cast<unsigned char*>(args.slot[{}]), "
                             "static_cast<long long>(args.slot[{}]) * {}}};\n", kBody, count, slot, slot + 1, element);
        ++count;
    }
    const std::string title = outputs ? "Outputs" : "Inputs";
    std::string out = fmt::format("{}// Tile {}s, numbered as tiles.{}() gets them: bytes per column pair, and where each "
                                  "lives.\n", kMember, what, outputs ? "store" : "load");
    out += fmt::format("{}static constexpr int kTile{} = {};\n", kMember, title, count);
    if (outputs) {
        bool accumulates = false;
        int row_reductions = 0;
        for (const Node& n : g.graph.nodes()) {
            accumulates = accumulates || n.op == Op::Accumulate;
            row_reductions += n.op == Op::ReduceRow ? 1 : 0;
        }
        out += fmt::format("{0}// Whether a visit reads and writes a tile tensor in global memory itself (an accumulate\n"
                           "{0}// sink), and how many row reductions it feeds.\n"
                           "{0}static constexpr bool kAccumulates = {1};\n{0}static constexpr int kRowReductions = {2};\n",
                           kMember, accumulates ? "true" : "false", row_reductions);
        out += transposed_table(g, cx);
    }
    out += fmt::format("{}__host__ __device__ static constexpr int tile_{}_pair_bytes(int i) {{ return {}0; }}\n",
                       kMember, what, sizes);
    out += fmt::format("{}__host__ __device__ static constexpr int tile_{}_element_bytes(int i) {{ return {}0; }}\n",
                       kMember, what, elements);
    // (Inputs only.) Which are stored transposed, N x M (tile_input_transposed): a tile program stages them as such.
    if (!outputs)
        out += fmt::format("{}__host__ __device__ static constexpr bool tile_input_transposed(int i) {{ return {}false; }}\n",
                           kMember, transposed);
    out += fmt::format("{0}__device__ static coda::TileView tile_{1}(const Args& args, int i) {{\n", kMember, what);
    if (count == 0) out += fmt::format("{}(void)args;\n{}(void)i;\n", kBody, kBody);
    out += views;
    return out + fmt::format("{}return {{nullptr, 0}};\n{}}}\n", kBody, kMember);
}

// A hint a mainloop may give well before the visits (the Hopper one does, a few k-tiles before the epilogue):
// bring the tile tensors the visit at `c` will read into L2, so the visits wait on L2, not on DRAM.
std::string prefetch(const CheckedGraph& g, const codegen::LoweringContext& cx) {
    std::string out = fmt::format("{0}template <class L>\n{0}__device__ static void prefetch(const Args& args, const "
                                  "coda::Coord& c) {{\n", kMember);
    std::string body;
    for (int id = 0; id < static_cast<int>(g.graph.nodes().size()); ++id)
        if (codegen::reads_tile(g.graph.node(id).op)) codegen::prefetch_node(cx, id, kBody, body);
    if (body.empty()) {
        out += fmt::format("{}(void)args;\n{}(void)c;  // no tile tensor is read\n", kBody, kBody);
    } else {
        out += fmt::format("{}const long long m = c.m;\n{}const int pair = c.n / 2;\n", kBody, kBody);
        out += body;
    }
    return out + fmt::format("{}}}\n", kMember);
}

std::string epilogue_struct(const CheckedGraph& g, const std::vector<std::string>& lines) {
    const codegen::LoweringContext cx = codegen::make_lowering_context(g);
    std::string out = slot_comment(g) + "struct Epilogue {\n";
    out += args_alias(g) + "\n";
    out += state_struct(g, lines) + "\n";
    out += scratch_function(g) + "\n";
    out += begin_tile(g) + "\n";
    out += prefetch(g, cx) + "\n";
    out += tile_table(g, cx, false) + "\n";
    out += tile_table(g, cx, true) + "\n";
    out += hoisted_values(g, cx, lines, Kind::Row) + "\n";
    out += hoisted_values(g, cx, lines, Kind::Col) + "\n";
    out += inputs_and_load(g, cx) + "\n";
    out += visit(g, cx, lines) + "\n";
    out += group_functions(g, cx, lines) + "\n";
    out += end_tile(g, cx);
    return out + "};\n";
}

std::string program_struct(const CheckedGraph& g, const std::vector<std::string>& lines) {
    const codegen::LoweringContext cx = codegen::make_lowering_context(g);
    std::string out = slot_comment(g) + "struct Program {\n";
    out += args_alias(g) + "\n";
    out += fmt::format("{}__device__ static void element(const Args& args, int l, const coda::FinalizeProblem& p,\n"
                       "{}                               const coda::FinalizeLane& lane) {{\n",
                       kMember, kMember);
    out += node_statements(g, cx, lines);
    return out + fmt::format("{}}}\n}};\n", kMember);
}

}  // namespace

std::string generate_epilogue(const CheckedGraph& g) {
    if (g.types.size() != g.graph.nodes().size())
        throw InternalError(fmt::format("checked graph '{}' has {} types for {} nodes", g.graph.name(),
                                        g.types.size(), g.graph.nodes().size()));
    const std::vector<std::string> lines = canonical_lines(g.graph);
    switch (g.graph.domain()) {
        case Domain::Gemm:
        case Domain::Tile: return epilogue_struct(g, lines);
        case Domain::Finalize: return program_struct(g, lines);
    }
    throw InternalError("unknown domain");
}

}  // namespace coda
