// The graph builder: appends nodes and checks only what cannot wait for validation (that a handle
// belongs to this graph). Everything else is checked by coda::check (src/ir/check_graph.cpp), all at once.
#include "coda/graph.hpp"

#include <array>
#include <cstring>

#include <fmt/format.h>

#include "coda/error.hpp"
#include "ir/graph_access.hpp"

namespace coda {

namespace detail {
struct GraphData {
    std::string name;
    Domain domain = Domain::Gemm;
    GemmSpec spec;
    std::vector<Node> nodes;
};
}  // namespace detail

namespace {

constexpr std::array<OpInfo, 0
#define CODA_OP(Enum, text, category, arity, cuda) +1
#include "coda/ops.def"
#undef CODA_OP
                     >
    kOps{{
#define CODA_OP(Enum, text, category, arity, cuda) {Op::Enum, text, OpCategory::category, arity, cuda},
#include "coda/ops.def"
#undef CODA_OP
    }};

}  // namespace

const OpInfo& op_info(Op op) {
    const auto index = static_cast<std::size_t>(op);
    if (index >= kOps.size()) throw InternalError(fmt::format("op index {} out of range", index));
    return kOps[index];
}

std::optional<Op> parse_op(std::string_view text) {
    for (const auto& info : kOps)
        if (info.text == text) return info.op;
    return std::nullopt;
}

bool Node::operator==(const Node& o) const {
    return op == o.op && args == o.args && name == o.name && dtype == o.dtype && width == o.width &&
           reduce == o.reduce && std::memcmp(&value, &o.value, sizeof value) == 0;
}

Graph::Graph(std::shared_ptr<detail::GraphData> data) : data_(std::move(data)) {}

Graph Graph::gemm(std::string name, GemmSpec spec) {
    auto data = std::make_shared<detail::GraphData>();
    data->name = std::move(name);
    data->domain = Domain::Gemm;
    data->spec = spec;
    return Graph(std::move(data));
}

Graph Graph::tile(std::string name) {
    auto data = std::make_shared<detail::GraphData>();
    data->name = std::move(name);
    data->domain = Domain::Tile;
    return Graph(std::move(data));
}

Graph Graph::finalize(std::string name) {
    auto data = std::make_shared<detail::GraphData>();
    data->name = std::move(name);
    data->domain = Domain::Finalize;
    return Graph(std::move(data));
}

Graph Graph::clone() const { return Graph(std::make_shared<detail::GraphData>(*data_)); }

Graph detail::GraphAccess::of(const Value& v) {
    if (!v.valid()) throw Error("an empty coda::Value (default-constructed) was used as an operand");
    return Graph(v.data_);
}

const std::string& Graph::name() const { return data_->name; }
Domain Graph::domain() const { return data_->domain; }
const GemmSpec& Graph::spec() const { return data_->spec; }
const std::vector<Node>& Graph::nodes() const { return data_->nodes; }

const Node& Graph::node(int id) const {
    if (id < 0 || id >= static_cast<int>(data_->nodes.size()))
        throw InternalError(fmt::format("node id {} out of range in graph '{}'", id, data_->name));
    return data_->nodes[static_cast<std::size_t>(id)];
}

std::string Graph::display_name(int id) const {
    const Node& n = node(id);
    return n.name.empty() ? fmt::format("_{}", id) : n.name;
}

int Graph::id_of(const Value& v, std::string_view role) const {
    if (!v.valid())
        throw Error(fmt::format("graph '{}': the {} is an empty coda::Value (default-constructed)", data_->name,
                                role));
    if (v.data_ != data_)
        throw Error(fmt::format("graph '{}': the {} belongs to another graph ('{}'); values cannot cross graphs",
                                data_->name, role, v.data_->name));
    return v.id_;
}

int Graph::append(Node node) {
    const int id = static_cast<int>(data_->nodes.size());
    for (int arg : node.args)
        if (arg < 0 || arg >= id)
            throw Error(fmt::format("graph '{}': node {} refers to node {}, which does not precede it", data_->name,
                                    id, arg));
    data_->nodes.push_back(std::move(node));
    return id;
}

Value Graph::add_node(Node node) { return Value(data_, append(std::move(node))); }

static Node make(Op op, std::vector<int> args, const std::string& name) {
    Node n;
    n.op = op;
    n.args = std::move(args);
    n.name = name;
    return n;
}

Value Graph::accumulator(const std::string& name) { return add_node(make(Op::Accumulator, {}, name)); }

Value Graph::tile_input(const std::string& name, DType dtype, Width width) {
    Node n = make(Op::TileInput, {}, name);
    n.dtype = dtype;
    n.width = width;
    return add_node(n);
}

Value Graph::tile_input_transposed(const std::string& name, DType dtype) {
    Node n = make(Op::TileInputTransposed, {}, name);
    n.dtype = dtype;
    return add_node(n);
}

Value Graph::row_input(const std::string& name, DType dtype) {
    Node n = make(Op::RowInput, {}, name);
    n.dtype = dtype;
    return add_node(n);
}

Value Graph::col_input(const std::string& name, DType dtype, Width width) {
    Node n = make(Op::ColInput, {}, name);
    n.dtype = dtype;
    n.width = width;
    return add_node(n);
}

Value Graph::scalar(const std::string& name) { return add_node(make(Op::Scalar, {}, name)); }

Value Graph::constant(float value, const std::string& name) {
    Node n = make(Op::Const, {}, name);
    n.value = value;
    return add_node(n);
}

Value Graph::row_index(const std::string& name) { return add_node(make(Op::RowIndex, {}, name)); }

Value Graph::col_index(Width width, const std::string& name) {
    Node n = make(Op::ColIndex, {}, name);
    n.width = width;
    return add_node(n);
}

Value Graph::partials(const std::string& name, ReduceOp combine) {
    Node n = make(Op::Partials, {}, name);
    n.reduce = combine;
    return add_node(n);
}

Value Graph::unary(Op op, Value x, const std::string& name) {
    if (op_info(op).category != OpCategory::Unary || op == Op::Round || op == Op::ReduceGroup)
        throw Error(fmt::format("graph '{}': '{}' is not a one-operand elementwise op", data_->name,
                                op_info(op).text));
    return add_node(make(op, {id_of(x, "operand")}, name));
}

Value Graph::binary(Op op, Value a, Value b, const std::string& name) {
    const OpCategory c = op_info(op).category;
    if (c != OpCategory::Binary && c != OpCategory::Compare)
        throw Error(fmt::format("graph '{}': '{}' is not a two-operand elementwise op", data_->name,
                                op_info(op).text));
    return add_node(make(op, {id_of(a, "first operand"), id_of(b, "second operand")}, name));
}

Value Graph::round(Value x, DType dtype, const std::string& name) {
    Node n = make(Op::Round, {id_of(x, "operand")}, name);
    n.dtype = dtype;
    return add_node(n);
}

Value Graph::reduce_group(Value x, ReduceOp op, const std::string& name) {
    Node n = make(Op::ReduceGroup, {id_of(x, "reduced value")}, name);
    n.reduce = op;
    return add_node(n);
}

Value Graph::select(Value mask, Value a, Value b, const std::string& name) {
    return add_node(make(Op::Select, {id_of(mask, "mask"), id_of(a, "first choice"), id_of(b, "second choice")},
                         name));
}

Value Graph::even(Value x, const std::string& name) { return add_node(make(Op::Even, {id_of(x, "operand")}, name)); }
Value Graph::odd(Value x, const std::string& name) { return add_node(make(Op::Odd, {id_of(x, "operand")}, name)); }

Value Graph::join(Value even, Value odd, const std::string& name) {
    return add_node(make(Op::Join, {id_of(even, "even half"), id_of(odd, "odd half")}, name));
}

void Graph::store(Value x, const std::string& name, DType dtype) {
    Node n = make(Op::Store, {id_of(x, "stored value")}, name);
    n.dtype = dtype;
    add_node(n);
}

void Graph::store_transposed(Value x, const std::string& name, DType dtype) {
    Node n = make(Op::StoreTransposed, {id_of(x, "stored value")}, name);
    n.dtype = dtype;
    add_node(n);
}

void Graph::accumulate(Value x, const std::string& name, DType dtype) {
    Node n = make(Op::Accumulate, {id_of(x, "accumulated value")}, name);
    n.dtype = dtype;
    add_node(n);
}

void Graph::reduce_row(Value x, ReduceOp op, const std::string& name) {
    Node n = make(Op::ReduceRow, {id_of(x, "reduced value")}, name);
    n.reduce = op;
    add_node(n);
}

void Graph::reduce_col(Value x, ReduceOp op, const std::string& name) {
    Node n = make(Op::ReduceCol, {id_of(x, "reduced value")}, name);
    n.reduce = op;
    add_node(n);
}

bool Graph::operator==(const Graph& o) const {
    return data_->name == o.data_->name && data_->domain == o.data_->domain && data_->spec == o.data_->spec &&
           data_->nodes == o.data_->nodes;
}

Value operator+(Value a, Value b) { return detail::GraphAccess::of(a).add(a, b); }
Value operator-(Value a, Value b) { return detail::GraphAccess::of(a).sub(a, b); }
Value operator*(Value a, Value b) { return detail::GraphAccess::of(a).mul(a, b); }
Value operator/(Value a, Value b) { return detail::GraphAccess::of(a).div(a, b); }
Value operator-(Value x) { return detail::GraphAccess::of(x).neg(x); }
Value operator+(Value a, float b) { Graph g = detail::GraphAccess::of(a); return g.add(a, g.constant(b)); }
Value operator-(Value a, float b) { Graph g = detail::GraphAccess::of(a); return g.sub(a, g.constant(b)); }
Value operator*(Value a, float b) { Graph g = detail::GraphAccess::of(a); return g.mul(a, g.constant(b)); }
Value operator/(Value a, float b) { Graph g = detail::GraphAccess::of(a); return g.div(a, g.constant(b)); }
Value operator+(float a, Value b) { Graph g = detail::GraphAccess::of(b); return g.add(g.constant(a), b); }
Value operator-(float a, Value b) { Graph g = detail::GraphAccess::of(b); return g.sub(g.constant(a), b); }
Value operator*(float a, Value b) { Graph g = detail::GraphAccess::of(b); return g.mul(g.constant(a), b); }
Value operator/(float a, Value b) { Graph g = detail::GraphAccess::of(b); return g.div(g.constant(a), b); }

}  // namespace coda
