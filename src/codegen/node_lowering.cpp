// Lowering of one node to CUDA statements. A tile or column value of width w is an array of lanes(w)
// registers per visit; row values and scalars are one-element arrays, so every operand is indexed alike.
#include "codegen/node_lowering.hpp"

#include <fmt/format.h>

#include "codegen/cuda_spelling.hpp"
#include "coda/error.hpp"

namespace coda::codegen {
namespace {

// Replaces {0}, {1}, {2} in an ops.def expression template by the operand expressions.
std::string fill(std::string_view pattern, const std::vector<std::string>& operands) {
    std::string out;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] == '{' && i + 2 < pattern.size() && pattern[i + 2] == '}') {
            const std::size_t k = static_cast<std::size_t>(pattern[i + 1] - '0');
            if (k >= operands.size()) throw InternalError(fmt::format("expression '{}' needs operand {}", pattern, k));
            out += operands[k];
            i += 2;
        } else {
            out += pattern[i];
        }
    }
    return out;
}

class NodeWriter {
public:
    NodeWriter(const LoweringContext& cx, int id, const std::string& indent, std::string& out)
        : cx_(cx), g_(*cx.graph), id_(id), node_(g_.graph.node(id)), indent_(indent), out_(out) {}

    void write() {
        switch (node_.op) {
            case Op::Accumulator: return line(fmt::format("float {}[2] = {{acc0, acc1}};", name()));
            case Op::TileInput: return tile_input();
            case Op::TileInputTransposed: return tile_input();
            case Op::RowInput: return row_input();
            case Op::ColInput: return col_input();
            case Op::Scalar:
                return line(fmt::format("float {}[1] = {{coda::scalar_from_slot({})}};", name(), word(0)));
            case Op::Const: return line(fmt::format("float {}[1] = {{{}}};", name(), float_literal(node_.value)));
            case Op::RowIndex:
                return line(fmt::format("int {}[1] = {{{}}};", name(), cx_.site == Site::Visit ? "c.m" : "l"));
            case Op::ColIndex: return col_index();
            case Op::Partials: return partials();
            case Op::Even: return pick(0);
            case Op::Odd: return pick(1);
            case Op::Join: return join();
            case Op::ReduceGroup: return group_value();
            case Op::Store: return store();
            case Op::StoreTransposed: return store_transposed();
            case Op::Accumulate: return accumulate();
            case Op::ReduceRow: return reduce("row_slot");
            case Op::ReduceCol: return reduce("col_slot");
            default: return elementwise();
        }
    }

    // The Inputs member that holds this input node's value, and the load that fills it.
    void input_member() { line(fmt::format("{} {}[{}];", register_type(type()), name(), lanes_out())); }
    void load_input() { line(load_statement("in." + name())); }

    // A tile tensor this node reads at the visit (tile_input, accumulate's old value): an L2 prefetch of it.
    void prefetch() {
        if (node_.op == Op::TileInput) line(fmt::format("coda::prefetch_l2({});", pointer(false) + tile_offset(lanes_out())));
        if (node_.op == Op::Accumulate) line(fmt::format("coda::prefetch_l2({});", sink_address(lanes(arg_type(0)))));
    }

private:
    std::string name() const { return value_identifier(g_.graph, id_); }
    std::string arg_name(std::size_t k) const { return value_identifier(g_.graph, node_.args.at(k)); }
    const ValueType& type() const { return g_.types.at(static_cast<std::size_t>(id_)); }
    const ValueType& arg_type(std::size_t k) const {
        return g_.types.at(static_cast<std::size_t>(node_.args.at(k)));
    }
    int lanes_out() const { return lanes(type()); }

    void line(const std::string& text) { out_ += indent_ + text + "\n"; }

    // Parameter word `k` of this node's binding, e.g. "args.slot[3]".
    std::string word(int k) const {
        const int first = cx_.slot.at(static_cast<std::size_t>(id_));
        if (first < 0) throw InternalError(fmt::format("node {} has no binding slot", id_));
        return fmt::format("args.slot[{}]", first + k);
    }
    std::string pointer(bool writable) const {
        return fmt::format("reinterpret_cast<{}{}*>({})", writable ? "" : "const ", storage_type(node_.dtype),
                           word(0));
    }
    // Offset of this visit's first element in a tile tensor of `v` lanes (two words: pointer, leading dim).
    std::string tile_offset(int v) const {
        return fmt::format(" + m * static_cast<long long>({}) + {}", word(1), pair_offset(v));
    }
    static std::string pair_offset(int v) { return v == 1 ? "pair" : fmt::format("pair * {}", v); }
    // Where a sink writes: a tile at a visit, element l of a vector in a finalize program.
    std::string sink_address(int v) const {
        return pointer(true) + (cx_.site == Site::Visit ? tile_offset(v) : " + l");
    }

    // Operand k's element at lane `lane` of the result: broadcast operands have a single lane.
    std::string element(std::size_t k, const std::string& lane) const {
        return element_of(node_.args.at(k), lane);
    }
    std::string element_of(int value, const std::string& lane) const {
        const int n = lanes(g_.types.at(static_cast<std::size_t>(value)));
        if (n != 1 && n != lanes_out())
            throw InternalError(fmt::format("node {}: operand of {} lanes feeds a result of {}", id_, n, lanes_out()));
        return fmt::format("{}[{}]", value_identifier(g_.graph, value), n == 1 ? "0" : lane);
    }

    // Declares this node's register array and fills each lane with expression(lane).
    template <class F>
    void map_lanes(F expression) {
        const std::string_view t = register_type(type());
        const int v = lanes_out();
        if (v == 1) return line(fmt::format("{} {}[1] = {{{}}};", t, name(), expression(std::string("0"))));
        line(fmt::format("{} {}[{}];", t, name(), v));
        line("#pragma unroll");
        line(fmt::format("for (int v = 0; v < {}; ++v) {}[v] = {};", v, name(), expression(std::string("v"))));
    }

    // Where a tile, row or column input is read.
    std::string source_address() const {
        switch (node_.op) {
            case Op::TileInput: return pointer(false) + tile_offset(lanes_out());
            case Op::RowInput: return pointer(false) + (cx_.site == Site::Visit ? " + m" : " + l");
            case Op::ColInput: return pointer(false) + " + " + pair_offset(lanes_out());
            default: throw InternalError(fmt::format("node {} reads no input tensor", id_));
        }
    }
    // The statement that loads this input into `target`: tile inputs through the visit's `tiles` (global memory, or
    // the tile a mainloop staged), the others from global memory.
    std::string load_statement(const std::string& target) const {
        const int index = cx_.tile_input_index.at(static_cast<std::size_t>(id_));
        if (node_.op == Op::TileInputTransposed)
            return fmt::format("tiles.template load_transposed<{}>({}, {}, static_cast<long long>({}), c, {});", lanes_out(),
                               index, pointer(false), word(1), target);
        if (node_.op == Op::TileInput)
            return fmt::format("tiles.template load<{}>({}, {}, c, {});", lanes_out(), index, source_address(), target);
        return fmt::format("coda::load<{}>({}, {});", lanes_out(), source_address(), target);
    }
    // Inputs come either loaded here, or from the Inputs struct Epilogue::load filled (cx_.sources_from_inputs).
    void input() {
        if (!cx_.sources_from_inputs) {
            line(fmt::format("{} {}[{}];", register_type(type()), name(), lanes_out()));
            return line(load_statement(name()));
        }
        line(fmt::format("const {} (&{})[{}] = in.{};", register_type(type()), name(), lanes_out(), name()));
    }
    void tile_input() { input(); }
    void row_input() { input(); }
    void col_input() { input(); }

    void col_index() {
        const int v = lanes_out();
        map_lanes([&](const std::string& lane) {
            return v == 1 ? std::string("pair") : fmt::format("pair * {} + {}", v, lane);
        });
    }

    // Folded by the element's strands together (finalize_program.cuh), so every lane of the warp runs it.
    void partials() {
        line(fmt::format("float {}[1] = {{coda::fold_partials<{}>(reinterpret_cast<const float*>({}), l, p, lane)}};",
                         name(), red_op(node_.reduce), word(0)));
    }

    void elementwise() {
        if (angle_of_product()) return;
        const OpInfo& info = op_info(node_.op);
        std::string_view pattern = info.cuda;
        if (node_.op == Op::Round) pattern = round_pattern(node_.dtype);
        if (info.category == OpCategory::Source || info.category == OpCategory::Pair ||
            info.category == OpCategory::Sink || pattern.empty())
            throw InternalError(fmt::format("op '{}' has no elementwise lowering", info.text));
        map_lanes([&](const std::string& lane) {
            std::vector<std::string> operands;
            for (std::size_t k = 0; k < node_.args.size(); ++k) operands.push_back(element(k, lane));
            return fill(pattern, operands);
        });
    }

    // sin / cos of a `mul` of two floats (RoPE's pos_i * theta_j): of the exact product, not of its fp32
    // rounding, which at 2^20 is off by up to 0.03 rad (templates/coda/angle.cuh). The mul's own statement stays
    // for other users and is dead code otherwise.
    bool angle_of_product() {
        if (node_.op != Op::Sin && node_.op != Op::Cos) return false;
        const Node& product = g_.graph.node(node_.args.at(0));
        if (product.op != Op::Mul) return false;
        for (int factor : product.args)
            if (g_.types.at(static_cast<std::size_t>(factor)).scalar != Scalar::F32) return false;
        map_lanes([&](const std::string& lane) {
            return fmt::format("coda::{}_of_product({}, {})", node_.op == Op::Sin ? "sin" : "cos",
                               element_of(product.args.at(0), lane), element_of(product.args.at(1), lane));
        });
        return true;
    }

    static std::string_view round_pattern(DType d) {
        switch (d) {
            case DType::BF16: return "coda::round_to_bf16({0})";
            case DType::F16: return "coda::round_to_f16({0})";
            case DType::F32: return "({0})";
            case DType::I32:
            case DType::E4M3:
            case DType::E5M2: break;
        }
        throw InternalError(fmt::format("round to {} reached codegen; validation should reject it", to_string(d)));
    }

    // even (parity 0) / odd (parity 1): lane j of the result is lane 2j + parity of the operand.
    void pick(int parity) {
        std::string lanes_text;
        for (int j = 0; j < lanes_out(); ++j)
            lanes_text += fmt::format("{}{}[{}]", j ? ", " : "", arg_name(0), 2 * j + parity);
        line(fmt::format("{} {}[{}] = {{{}}};", register_type(type()), name(), lanes_out(), lanes_text));
    }

    // join: the operands' lanes interleaved, even first.
    void join() {
        std::string lanes_text;
        for (int j = 0; j < lanes_out() / 2; ++j)
            lanes_text += fmt::format("{}{}[{}], {}[{}]", j ? ", " : "", arg_name(0), j, arg_name(1), j);
        line(fmt::format("{} {}[{}] = {{{}}};", register_type(type()), name(), lanes_out(), lanes_text));
    }

    // reduce_group at the visit: the value of the visit's row group, made before the visits (Epilogue::group_visit
    // and group_finish), the same in every lane.
    void group_value() {
        map_lanes([&](const std::string&) {
            return fmt::format("st.{}[row_slot][coda::group_of_slot<L>(col_slot)]", state_field(g_, id_));
        });
    }

    // What precedes a sink at this site: all strands of an element compute its values, but only one writes them.
    std::string writer_guard() const { return cx_.site == Site::Element ? "if (lane.writes) " : ""; }

    // At the visit site through the mainloop's tile sink (which may stage the tile in shared memory).
    void store() {
        const int v = lanes(arg_type(0));
        if (cx_.site == Site::Visit)
            return line(fmt::format("tiles.template store<{}>({}, {}, c, {});", v,
                                    cx_.tile_output_index.at(static_cast<std::size_t>(id_)), sink_address(v), arg_name(0)));
        line(fmt::format("{}coda::store<{}>({}, {});", writer_guard(), v, sink_address(v), arg_name(0)));
    }

    // out[column][m] for each of the visit's columns, through the mainloop's tile sink: straight to global memory
    // (epilogue_contract.cuh), or into a transposed tile in shared memory (tile programs that stage).
    void store_transposed() {
        const int v = lanes(arg_type(0));
        line(fmt::format("tiles.template store_transposed<{}>({}, {}, static_cast<long long>({}), c, {}, {});", v,
                         cx_.transposed_index.at(static_cast<std::size_t>(id_)), pointer(true), word(1),
                         pair_offset(v), arg_name(0)));
    }

    // out += x: read the current value in the sink's dtype, add in fp32, write back.
    void accumulate() {
        const int v = lanes(arg_type(0));
        line(writer_guard() + "{");
        line(fmt::format("    {}* const out = {};", storage_type(node_.dtype), sink_address(v)));
        line(fmt::format("    float sum[{}];", v));
        line(fmt::format("    coda::load<{}>(out, sum);", v));
        if (v == 1) {
            line(fmt::format("    sum[0] += {}[0];", arg_name(0)));
        } else {
            line("    #pragma unroll");
            line(fmt::format("    for (int v = 0; v < {}; ++v) sum[v] += {}[v];", v, arg_name(0)));
        }
        line(fmt::format("    coda::store<{}>(out, sum);", v));
        line("}");
    }

    // A row reduction adds through add_in_columns, which leaves its state as it was at pairs past N, where a
    // mainloop visits those (Tiles::kVisitsBeyondN). A column's state past N is never written out: column
    // reductions add directly.
    void reduce(const char* slot) {
        const int v = lanes(arg_type(0));
        const std::string field = state_field(g_, id_);
        const bool per_column = node_.op == Op::ReduceCol;
        const auto add = [&](const std::string& lane) {
            if (per_column)
                return fmt::format("{}::add(st.{}[{}][{}], {}[{}]);", reducer(node_.reduce), field, slot, lane,
                                   arg_name(0), lane);
            return fmt::format("coda::add_in_columns<Tiles, {}>(st.{}[{}], c, {}[{}]);", red_op(node_.reduce), field,
                               slot, arg_name(0), lane);
        };
        if (v == 1) return line(add("0"));
        line("#pragma unroll");
        line(fmt::format("for (int v = 0; v < {}; ++v) {}", v, add("v")));
    }

    const LoweringContext& cx_;
    const CheckedGraph& g_;
    int id_;
    const Node& node_;
    const std::string& indent_;
    std::string& out_;
};

}  // namespace

LoweringContext make_lowering_context(const CheckedGraph& g) {
    LoweringContext cx;
    cx.graph = &g;
    cx.site = g.graph.domain() == Domain::Finalize ? Site::Element : Site::Visit;
    cx.slot.assign(g.graph.nodes().size(), -1);
    for (std::size_t i = 0; i < g.bindings.size(); ++i) {
        const int node = g.bindings[i].node;
        if (node < 0 || node >= static_cast<int>(cx.slot.size()))
            throw InternalError(fmt::format("binding '{}' refers to node {}", g.bindings[i].name, node));
        cx.slot[static_cast<std::size_t>(node)] = first_slot(g, i);
    }
    cx.tile_input_index.assign(g.graph.nodes().size(), -1);
    cx.tile_output_index.assign(g.graph.nodes().size(), -1);
    cx.transposed_index.assign(g.graph.nodes().size(), -1);
    int tile_inputs = 0;
    int tile_outputs = 0;
    int transposed = 0;
    for (std::size_t id = 0; id < g.graph.nodes().size(); ++id) {
        const Op op = g.graph.nodes()[id].op;
        if (op == Op::TileInput || op == Op::TileInputTransposed) cx.tile_input_index[id] = tile_inputs++;
        if (op == Op::Store && cx.site == Site::Visit) cx.tile_output_index[id] = tile_outputs++;
        if (op == Op::StoreTransposed) cx.transposed_index[id] = transposed++;
    }
    return cx;
}

bool uses_row(Op op) {
    return op == Op::TileInput || op == Op::RowInput || op == Op::Store || op == Op::Accumulate;
}

bool uses_pair(Op op) {
    return op == Op::TileInput || op == Op::ColInput || op == Op::ColIndex || op == Op::Store ||
           op == Op::StoreTransposed ||
           op == Op::Accumulate;
}

std::string state_field(const CheckedGraph& g, int id) {
    const Op op = g.graph.node(id).op;
    if (op == Op::ReduceRow) return fmt::format("r{}", id);
    if (op == Op::ReduceCol) return fmt::format("c{}", id);
    if (op == Op::ReduceGroup) return fmt::format("g{}", id);
    throw InternalError(fmt::format("node {} is not a reduction and has no state", id));
}

void lower_node(const LoweringContext& cx, int id, const std::string& canonical_line, const std::string& indent,
                std::string& out) {
    out += indent + "// " + canonical_line + "\n";
    NodeWriter(cx, id, indent, out).write();
}

bool reads_tile(Op op) { return op == Op::TileInput || op == Op::Accumulate; }

bool reads_input(Op op) {
    return op == Op::TileInput || op == Op::TileInputTransposed || op == Op::RowInput || op == Op::ColInput;
}

void input_member(const LoweringContext& cx, int id, const std::string& indent, std::string& out) {
    NodeWriter(cx, id, indent, out).input_member();
}

void load_input(const LoweringContext& cx, int id, const std::string& indent, std::string& out) {
    NodeWriter(cx, id, indent, out).load_input();
}

void prefetch_node(const LoweringContext& cx, int id, const std::string& indent, std::string& out) {
    NodeWriter(cx, id, indent, out).prefetch();
}

}  // namespace coda::codegen
