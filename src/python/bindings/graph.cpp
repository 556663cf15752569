// The vocabulary types, the graph builder with Python operators, validation and the text form.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <fmt/format.h>

#include "bindings.hpp"
#include "coda/error.hpp"
#include "coda/text.hpp"
#include "coda/validate.hpp"
#include "ir/check_graph.hpp"

namespace coda::python {
namespace {

using namespace nb::literals;

// An operand of a named binary method: a Value, or a number that becomes a constant node of the graph (as the
// arithmetic operators do).
Value operand(Graph& g, nb::handle x, const char* role) {
    Value v;
    if (nb::try_cast(x, v, false)) return v;
    double number = 0;
    if (!nb::isinstance<nb::bool_>(x) && nb::try_cast(x, number)) return g.constant(static_cast<float>(number));
    throw nb::type_error(fmt::format("{}: expected a coda.Value or a float, got {}", role,
                                     nb::type_name(x.type()).c_str())
                             .c_str());
}

using Binary = Value (Graph::*)(Value, Value, const std::string&);

void def_binary(nb::class_<Graph>& cls, const char* name, Binary method) {
    cls.def(
        name,
        [method, name](Graph& g, nb::handle a, nb::handle b, const std::string& node_name) {
            const Value va = operand(g, a, name), vb = operand(g, b, name);
            return (g.*method)(va, vb, node_name);
        },
        "a"_a, "b"_a, "name"_a = "");
}

using Unary = Value (Graph::*)(Value, const std::string&);

void def_unary(nb::class_<Graph>& cls, const char* name, Unary method) {
    cls.def(name, [method](Graph& g, Value x, const std::string& node_name) { return (g.*method)(x, node_name); },
            "x"_a, "name"_a = "");
}

// ScaleMode's Python name, for GemmSpec's repr.
const char* scale_mode_name(ScaleMode s) {
    switch (s) {
        case ScaleMode::Off: return "Off";
        case ScaleMode::Block128x128: return "Block128x128";
        case ScaleMode::Block1x128: return "Block1x128";
    }
    return "?";
}

// GemmSpec's scale mode from scales= and the older block_scales= / b_scales_1x128= keywords, where given: they must
// name one mode between them.
ScaleMode scale_mode(ScaleMode scales, std::optional<bool> block_scales, std::optional<bool> b_scales_1x128) {
    if (!block_scales && !b_scales_1x128) return scales;
    const bool blocks = block_scales.value_or(false), rows = b_scales_1x128.value_or(false);
    if (rows && !blocks)
        throw Error("GemmSpec: b_scales_1x128=True says how B's block scales are laid out, and block_scales is not "
                    "set: set block_scales=True too, or give scales=coda.ScaleMode.Block1x128 alone");
    const ScaleMode legacy = !blocks ? ScaleMode::Off : rows ? ScaleMode::Block1x128 : ScaleMode::Block128x128;
    if (scales != ScaleMode::Off && scales != legacy)
        throw Error(fmt::format("GemmSpec: scales=coda.ScaleMode.{} and block_scales={}, b_scales_1x128={} name "
                                "different scales: give scales= alone",
                                scale_mode_name(scales), blocks ? "True" : "False", rows ? "True" : "False"));
    return legacy;
}

void bind_types(nb::module_& m) {
    nb::enum_<DType>(m, "DType")
        .value("BF16", DType::BF16)
        .value("F16", DType::F16)
        .value("F32", DType::F32)
        .value("I32", DType::I32)
        .value("E4M3", DType::E4M3)
        .value("E5M2", DType::E5M2);
    m.attr("bf16") = DType::BF16;
    m.attr("f16") = DType::F16;
    m.attr("f32") = DType::F32;
    m.attr("i32") = DType::I32;
    m.attr("e4m3") = DType::E4M3;
    m.attr("e5m2") = DType::E5M2;
    nb::enum_<Domain>(m, "Domain").value("Gemm", Domain::Gemm).value("Tile", Domain::Tile).value("Finalize",
                                                                                               Domain::Finalize);
    nb::enum_<Width>(m, "Width").value("Half", Width::Half).value("Full", Width::Full).value("Double", Width::Double);
    nb::enum_<ReduceOp>(m, "ReduceOp")
        .value("Sum", ReduceOp::Sum)
        .value("Max", ReduceOp::Max)
        .value("Min", ReduceOp::Min)
        .value("SumSq", ReduceOp::SumSq)
        .value("Lse", ReduceOp::Lse);
    nb::enum_<Major>(m, "Major").value("K", Major::K).value("MN", Major::MN);
    nb::enum_<Accumulation>(m, "Accumulation",
                            "How a GEMM on FP8 operands sums its products: Fast in the wgmma accumulator alone "
                            "(use_fast_accum=True), Promoted each 128-k block's sum added in f32 "
                            "(use_fast_accum=False).")
        .value("Fast", Accumulation::Fast)
        .value("Promoted", Accumulation::Promoted);

    nb::enum_<ScaleMode>(m, "ScaleMode",
                         "Which block scales a GEMM's mainloop applies (GemmSpec.scales): Off, none (per-tensor and "
                         "row-wise FP8 scales are epilogue inputs); Block128x128, A's scales per row of A and 128 k "
                         "and B's per 128 x 128 block of B (text scales=block); Block1x128, B's per row of B and "
                         "128 k as A's (scales=block_1x128). coda.block_scale_operands(spec) names them.")
        .value("Off", ScaleMode::Off)
        .value("Block128x128", ScaleMode::Block128x128)
        .value("Block1x128", ScaleMode::Block1x128);
    m.def("size_of", &size_of, "dtype"_a, "Bytes of one element of dtype.");

    nb::class_<GemmSpec>(m, "GemmSpec",
                         "The operands of a GEMM graph: A (M x K) and B (K x N) in bf16, f16, e4m3 or e5m2; input_b "
                         "is B's type where it is not A's (two FP8 types, e.g. e5m2 gradients x e4m3 weights); "
                         "scales: FP8 operands with DeepSeek-V3's block scales, bound by the names "
                         "coda.block_scale_names(spec) gives (ScaleMode.Block128x128: B's per 128 x 128 block; "
                         "ScaleMode.Block1x128: per row of B and 128 k, as A's); accumulation: FP8 without block "
                         "scales, Accumulation.Promoted adds each 128-k block's sum in f32. block_scales= and "
                         "b_scales_1x128= are the older spelling of scales=.")
        .def(
            "__init__",
            [](GemmSpec* self, DType input, Major a, Major b, std::optional<DType> input_b, ScaleMode scales,
               Accumulation accumulation, std::optional<bool> block_scales, std::optional<bool> b_scales_1x128) {
                new (self) GemmSpec{input, a, b, input_b, scale_mode(scales, block_scales, b_scales_1x128),
                                    accumulation};
            },
            "input"_a = DType::BF16, "a"_a = Major::K, "b"_a = Major::K, "input_b"_a = nb::none(),
            "scales"_a = ScaleMode::Off, "accumulation"_a = Accumulation::Fast, "block_scales"_a = nb::none(),
            "b_scales_1x128"_a = nb::none())
        .def_rw("input", &GemmSpec::input)
        .def_rw("a", &GemmSpec::a)
        .def_rw("b", &GemmSpec::b)
        .def_rw("input_b", &GemmSpec::input_b, "B's type where it is not A's; None: A's.")
        .def_rw("scales", &GemmSpec::scales,
                "FP8 block scales applied by the mainloop (coda.block_scale_operands(spec): names and shapes): "
                "ScaleMode.Block128x128, A's SA f32 [ceil(K / 128) x M] and B's SB f32 [ceil(N / 128) x "
                "ceil(K / 128)], acc = sum over 128-k blocks kb of SA[kb][m] * SB[n / 128][kb] * (A B over kb)[m][n]; "
                "ScaleMode.Block1x128, SB f32 [ceil(K / 128) x N], one per row of B (as N x K) and 128 k, as A's (a "
                "weight gradient's operands, both activations): acc uses SB[kb][n]; ScaleMode.Off (default): none.")
        .def_prop_ro("block_scales", &GemmSpec::block_scaled, "Whether scales is not ScaleMode.Off (read-only).")
        .def_prop_ro(
            "b_scales_1x128", [](const GemmSpec& s) { return s.scales == ScaleMode::Block1x128; },
            "Whether scales is ScaleMode.Block1x128 (read-only).")
        .def_rw("accumulation", &GemmSpec::accumulation,
                "FP8 operands without block scales: Accumulation.Fast sums every product in Hopper's FP8 wgmma "
                "accumulator (about 14 bits; use_fast_accum=True); Accumulation.Promoted lets wgmma sum each 128-k "
                "block and adds it into f32 (use_fast_accum=False), on cooperative 128 x 128 or 128 x 256 tiles.")
        .def("__eq__", [](const GemmSpec& x, const GemmSpec& y) { return x == y; })
        .def("__repr__", [](const GemmSpec& s) {
            return fmt::format("coda.GemmSpec(input=coda.{}, a=coda.Major.{}, b=coda.Major.{}{}{}{})",
                               to_string(s.input),
                               s.a == Major::K ? "K" : "MN", s.b == Major::K ? "K" : "MN",
                               s.input_b ? fmt::format(", input_b=coda.{}", to_string(*s.input_b)) : "",
                               s.block_scaled() ? fmt::format(", scales=coda.ScaleMode.{}", scale_mode_name(s.scales))
                                                : "",
                               s.accumulation == Accumulation::Promoted
                                   ? ", accumulation=coda.Accumulation.Promoted"
                                   : "");
        });

    nb::class_<BlockScaleOperand>(m, "BlockScaleOperand",
                                  "One tensor a block-scaled GEMM's mainloop reads beside A and B (GemmSpec.scales), "
                                  "bound by name like the epilogue's tensors: row-major, leading dimension at least "
                                  "its columns (read-only).")
        .def_prop_ro("name", [](const BlockScaleOperand& s) { return s.name; }, "The binding name.")
        .def_prop_ro("operand", [](const BlockScaleOperand& s) { return s.operand; },
                     "The GEMM operand whose blocks it scales: 'A' or 'B'.")
        .def_prop_ro("what", [](const BlockScaleOperand& s) { return s.what; }, "In words, e.g. 'block scales of A'.")
        .def_prop_ro("layout", [](const BlockScaleOperand& s) { return s.layout; },
                     "Its shape in words, e.g. 'f32 [ceil(K / 128) x M]: one per row of A and 128 k'.")
        .def_prop_ro("dtype", [](const BlockScaleOperand& s) { return s.dtype; })
        .def(
            "shape",
            [](const BlockScaleOperand& s, long long m, long long n, long long k) {
                const BlockScaleShape shape = s.shape(m, n, k);
                return std::make_pair(shape.rows, shape.cols);
            },
            "m"_a, "n"_a, "k"_a, "Its (rows, columns) for an m x n x k GEMM.")
        .def("__repr__", [](const BlockScaleOperand& s) {
            return fmt::format("coda.BlockScaleOperand(name='{}', operand='{}', layout='{}')", s.name, s.operand,
                               s.layout);
        });
    m.def(
        "block_scale_operands", [](const GemmSpec& spec) { return block_scale_operands(spec); }, "spec"_a,
        "The tensors a GEMM of `spec` binds beside A and B for its mainloop: A's block scales, then B's; [] unless "
        "spec.block_scales.");
    m.def(
        "block_scale_names",
        [](const GemmSpec& spec) {
            nb::list names;
            for (const BlockScaleOperand& s : block_scale_operands(spec))
                names.append(nb::str(s.name.data(), s.name.size()));
            return nb::tuple(names);
        },
        "spec"_a,
        "The names a GEMM of `spec` binds its block scales to, A's then B's (block_scale_operands' names); () unless "
        "spec.block_scales.");
}

void bind_builder(nb::module_& m) {
    nb::class_<Node>(m, "Node", "One node of a graph (read-only); attributes its op does not use keep defaults.")
        .def_prop_ro("op", [](const Node& n) { return std::string(op_info(n.op).text); })
        .def_ro("args", &Node::args)
        .def_ro("name", &Node::name)
        .def_ro("dtype", &Node::dtype)
        .def_ro("width", &Node::width)
        .def_ro("reduce", &Node::reduce)
        .def_ro("value", &Node::value)
        .def("__eq__", [](const Node& a, const Node& b) { return a == b; });

    // Arithmetic on Values appends nodes to their graph; a number operand becomes a constant node.
    nb::class_<Value>(m, "Value", "A handle to a node of one graph.")
        .def_prop_ro("id", &Value::id)
        .def("__add__", [](Value a, Value b) { return a + b; }, nb::is_operator())
        .def("__add__", [](Value a, float b) { return a + b; }, nb::is_operator())
        .def("__radd__", [](Value b, float a) { return a + b; }, nb::is_operator())
        .def("__sub__", [](Value a, Value b) { return a - b; }, nb::is_operator())
        .def("__sub__", [](Value a, float b) { return a - b; }, nb::is_operator())
        .def("__rsub__", [](Value b, float a) { return a - b; }, nb::is_operator())
        .def("__mul__", [](Value a, Value b) { return a * b; }, nb::is_operator())
        .def("__mul__", [](Value a, float b) { return a * b; }, nb::is_operator())
        .def("__rmul__", [](Value b, float a) { return a * b; }, nb::is_operator())
        .def("__truediv__", [](Value a, Value b) { return a / b; }, nb::is_operator())
        .def("__truediv__", [](Value a, float b) { return a / b; }, nb::is_operator())
        .def("__rtruediv__", [](Value b, float a) { return a / b; }, nb::is_operator())
        .def("__neg__", [](Value x) { return -x; })
        .def("__repr__", [](const Value& v) { return fmt::format("<coda.Value %{}>", v.id()); });

    nb::class_<Graph> g(m, "Graph", "An epilogue graph under construction (include/coda/graph.hpp).");
    g.def_static("gemm", &Graph::gemm, "name"_a, "spec"_a = GemmSpec{}, "A GEMM epilogue graph.")
        .def_static("tile", &Graph::tile, "name"_a, "A tile program: the same graphs over M x N input tiles.")
        .def_static("finalize", &Graph::finalize, "name"_a, "A finalizer: combines reduction partials.")
        .def_prop_ro("name", &Graph::name)
        .def_prop_ro("domain", &Graph::domain)
        .def_prop_ro("spec", &Graph::spec)
        .def_prop_ro("nodes", &Graph::nodes)
        .def("node", &Graph::node, "id"_a)
        .def("display_name", &Graph::display_name, "id"_a)
        .def("clone", &Graph::clone, "A copy that no longer shares its nodes with this graph.")
        .def("__eq__", [](const Graph& a, const Graph& b) { return a == b; })
        .def("__str__", [](const Graph& graph) { return to_text(graph); })
        .def("__repr__",
             [](const Graph& graph) {
                 return fmt::format("<coda.Graph '{}' {}, {} nodes>", graph.name(), to_string(graph.domain()),
                                    graph.nodes().size());
             })
        // Sources
        .def("accumulator", &Graph::accumulator, "name"_a = "acc")
        .def("tile_input", &Graph::tile_input, "name"_a, "dtype"_a, "width"_a = Width::Full)
        .def("tile_input_transposed", &Graph::tile_input_transposed, "name"_a, "dtype"_a,
             "A tile input stored transposed, N x M (ops.def tile_input_transposed): tile programs only.")
        .def("row_input", &Graph::row_input, "name"_a, "dtype"_a)
        .def("col_input", &Graph::col_input, "name"_a, "dtype"_a, "width"_a = Width::Full)
        .def("scalar", &Graph::scalar, "name"_a)
        .def("constant", &Graph::constant, "value"_a, "name"_a = "")
        .def("row_index", &Graph::row_index, "name"_a = "")
        .def("col_index", &Graph::col_index, "width"_a = Width::Full, "name"_a = "")
        .def("partials", &Graph::partials, "name"_a, "combine"_a)
        // Pairwise, rounding, select
        .def("round", &Graph::round, "x"_a, "dtype"_a, "name"_a = "")
        .def("even", &Graph::even, "x"_a, "name"_a = "")
        .def("odd", &Graph::odd, "x"_a, "name"_a = "")
        .def("join", &Graph::join, "even"_a, "odd"_a, "name"_a = "")
        .def(
            "select",
            [](Graph& graph, Value mask, nb::handle a, nb::handle b, const std::string& name) {
                const Value va = operand(graph, a, "select"), vb = operand(graph, b, "select");
                return graph.select(mask, va, vb, name);
            },
            "mask"_a, "a"_a, "b"_a, "name"_a = "")
        // Sinks
        .def("store", &Graph::store, "x"_a, "name"_a, "dtype"_a)
        .def("store_transposed", &Graph::store_transposed, "x"_a, "name"_a, "dtype"_a,
             "x written transposed: the output is N x M (ops.def store_transposed).")
        .def("accumulate", &Graph::accumulate, "x"_a, "name"_a, "dtype"_a)
        .def("reduce_group", &Graph::reduce_group, "x"_a, "op"_a, "name"_a = "",
             "op (sum, max, min) over x in the same row and 128-column group, at every element (gemm graphs, Hopper)")
        .def("reduce_row", &Graph::reduce_row, "x"_a, "op"_a, "name"_a)
        .def("reduce_col", &Graph::reduce_col, "x"_a, "op"_a, "name"_a);

    def_unary(g, "neg", &Graph::neg);
    def_unary(g, "abs", &Graph::abs);
    def_unary(g, "exp", &Graph::exp);
    def_unary(g, "exp2", &Graph::exp2);
    def_unary(g, "log", &Graph::log);
    def_unary(g, "sqrt", &Graph::sqrt);
    def_unary(g, "rsqrt", &Graph::rsqrt);
    def_unary(g, "sin", &Graph::sin);
    def_unary(g, "cos", &Graph::cos);
    def_unary(g, "tanh", &Graph::tanh);
    def_unary(g, "sigmoid", &Graph::sigmoid);
    def_unary(g, "silu", &Graph::silu);
    def_unary(g, "gelu_erf", &Graph::gelu_erf);
    def_unary(g, "gelu_tanh", &Graph::gelu_tanh);
    def_unary(g, "relu", &Graph::relu);
    def_unary(g, "square", &Graph::square);
    def_unary(g, "to_f32", &Graph::to_f32);
    def_binary(g, "add", &Graph::add);
    def_binary(g, "sub", &Graph::sub);
    def_binary(g, "mul", &Graph::mul);
    def_binary(g, "div", &Graph::div);
    def_binary(g, "max", &Graph::max);
    def_binary(g, "min", &Graph::min);
    def_binary(g, "eq", &Graph::eq);
    def_binary(g, "ne", &Graph::ne);
    def_binary(g, "lt", &Graph::lt);
    def_binary(g, "le", &Graph::le);
    def_binary(g, "gt", &Graph::gt);
    def_binary(g, "ge", &Graph::ge);
}

void bind_checks_and_text(nb::module_& m) {
    m.def("check", &check, "graph"_a, "Raises coda.Error listing every problem of an invalid graph.");
    m.def(
        "problems",
        [](const Graph& graph) {
            std::vector<std::pair<int, std::string>> out;
            for (const Problem& p : find_problems(graph)) out.emplace_back(p.node, p.message);
            return out;
        },
        "graph"_a, "Every problem of the graph as (node id or -1, message); empty when it is valid.");

    // What a kernel for the graph binds at launch, in parameter order (validates the graph first).
    nb::class_<Binding>(m, "Binding")
        .def_ro("name", &Binding::name)
        .def_ro("node", &Binding::node)
        .def_prop_ro("role", [](const Binding& b) { return std::string(to_string(b.role)); })
        .def_ro("transposed", &Binding::transposed,
                "Stored N x M: a store_transposed output or a tile_input_transposed input.")
        .def_prop_ro("kind", [](const Binding& b) { return std::string(to_string(b.kind)); })
        .def_ro("width", &Binding::width)
        .def_ro("dtype", &Binding::dtype)
        .def("__repr__", [](const Binding& b) {
            return fmt::format("<coda.Binding '{}' {} {} {}>", b.name, to_string(b.role), to_string(b.kind),
                               to_string(b.dtype));
        });
    m.def(
        "bindings", [](const Graph& graph) { return check_graph(graph).bindings; }, "graph"_a,
        "The tensors and scalars a kernel of the graph binds at launch; raises coda.Error for an invalid graph.");

    m.def("to_text", &to_text, "graph"_a, "The canonical text form: parse_graph(to_text(g)) == g.");
    m.def("parse_graph", &parse_graph, "text"_a, "Exactly one graph (not validated).");
    m.def("parse_graphs", &parse_graphs, "text"_a, "source_name"_a = "<string>",
          "Every graph of a text, e.g. a .coda file's (not validated).");
}

}  // namespace

void bind_graph(nb::module_& m) {
    bind_types(m);
    bind_builder(m);
    bind_checks_and_text(m);
}

}  // namespace coda::python
