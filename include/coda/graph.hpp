// The epilogue-graph builder: users assemble a graph at run time from the primitives of ops.def.
// Building is cheap and local (no checks beyond handle ownership); coda::check validates the whole graph.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coda/types.hpp"

namespace coda {

enum class Op {
#define CODA_OP(Enum, text, category, arity, cuda) Enum,
#include "coda/ops.def"
#undef CODA_OP
};

enum class OpCategory { Source, Unary, Binary, Compare, Select, Pair, Sink };

struct OpInfo {
    Op op;
    std::string_view text;
    OpCategory category;
    int arity;
    std::string_view cuda;  // elementwise expression template over {0} {1} {2}
};

const OpInfo& op_info(Op op);
std::optional<Op> parse_op(std::string_view text);

// The operands of a GEMM-domain graph: A (M x K) and B (K x N) in bf16, f16, e4m3 or e5m2, fp32 accumulation.
// FP8 operands are both K-major and may differ in type (e5m2 gradients x e4m3 weights: input_b); 16-bit ones
// are one type.
//
// scales (FP8 only; ScaleMode::Off, the default, for none): the mainloop applies block scales, DeepSeek-V3's recipe.
//   Block128x128 ("scales=block" in text): the accumulator is, over k-blocks kb (128 k each),
//     acc[m][n] = sum over kb of SA[kb][m] * SB[n / 128][kb] * sum_{k in kb} A[m][k] B[k][n]
//   promoted to fp32 at every block. The block scales (coda::block_scale_operands, which names them) are bound beside
//   A and B: A's SA, f32 [ceil(K / 128) x M] (one scale per row of A and 128 k; row-major, leading dimension >= M),
//   and B's SB, f32 [ceil(N / 128) x ceil(K / 128)] (one per 128 x 128 block of B as an N x K weight; row-major,
//   leading dimension >= ceil(K / 128)).
//   Block1x128 ("scales=block_1x128"): B's scales are A's kind instead, one per row of B (as N x K) and 128 k,
//     acc[m][n] = sum over kb of SA[kb][m] * SB[kb][n] * (the block's part of A B)[m][n]
//   with SB f32 [ceil(K / 128) x N] (leading dimension >= N): both operands activations or gradients, as in
//   DeepSeek-V3's weight gradient dW = dY^T X, whose K is the tokens.
//
// accumulation (FP8 operands without block scales): Fast sums every product in Hopper's FP8 wgmma accumulator,
//   which keeps about 14 bits where f32 keeps 24, so the error grows with K (cuBLAS's use_fast_accum=True). Promoted
//   lets wgmma sum each 128-k block alone and adds that sum into an f32 accumulator, as cuBLAS does with
//   use_fast_accum=False: for K in the thousands, a weight gradient's K = tokens above all. It is the block-scaled
//   mainloop with unit scales, so it takes its tiles (cooperative 128 x 128 or 128 x 256). Block-scaled GEMMs always
//   promote and take Fast.
struct GemmSpec {
    DType input = DType::BF16;  // A's type, and B's unless input_b says otherwise
    Major a = Major::K;  // K: A stored M x K row-major; MN: A stored K x M row-major
    Major b = Major::K;  // K: B stored N x K row-major (Y = X W^T); MN: B stored K x N row-major
    std::optional<DType> input_b = std::nullopt;  // B's type when it is not A's
    ScaleMode scales = ScaleMode::Off;  // FP8 block scales of A and B, promoted every 128 k (above)
    Accumulation accumulation = Accumulation::Fast;  // FP8 only: Promoted adds each 128-k block's sum in f32 (above)
    DType b_input() const { return input_b.value_or(input); }
    // Whether the mainloop applies block scales (bound as coda::block_scale_operands names them).
    bool block_scaled() const { return scales != ScaleMode::Off; }
    // Whether the mainloop adds each 128-k block's sum into the f32 accumulator: block-scaled or Promoted.
    bool promotes() const { return block_scaled() || accumulation == Accumulation::Promoted; }
    bool operator==(const GemmSpec& o) const {
        return input == o.input && a == o.a && b == o.b && b_input() == o.b_input() &&
               scales == o.scales && accumulation == o.accumulation;
    }
};

// The k-block of block scales (GemmSpec::scales): 128 elements of K (one FP8 k-tile of the Hopper mainloop).
constexpr int kScaleBlock = 128;

// A block-scale tensor's shape for one problem: rows and columns of a row-major f32 matrix.
struct BlockScaleShape {
    long long rows, cols;
};

// One tensor a block-scaled GEMM's mainloop reads beside A and B (GemmSpec::scales). The mainloop declares them
// (block_scale_operands) and the rest of coda (launch checks, the CPU reference, the tools, the Python binding)
// iterates over that declaration, so a name or shape is spelt once. Each is bound by name, like the epilogue's
// tensors, as a row-major matrix whose leading dimension is at least its columns.
struct BlockScaleOperand {
    std::string_view name;     // the binding name Args::bind takes, which a node of the graph may not have
    std::string_view operand;  // the GEMM operand whose blocks it scales: "A"
    std::string_view what;     // for messages: "block scales of A"
    std::string_view layout;   // its shape in words: "f32 [ceil(K / 128) x M]: one per row of A and 128 k"
    DType dtype = DType::F32;
    BlockScaleShape (*shape)(long long m, long long n, long long k) = nullptr;  // for an M x N x K problem
    // The kernel parameter words each takes after the bindings' (coda::EpilogueArgs): pointer, leading dimension.
    static constexpr int kSlots = 2;
};

// The block scales a GEMM of `spec` binds, in the order of their parameter slots (A's, then B's); none unless
// spec.block_scaled().
const std::vector<BlockScaleOperand>& block_scale_operands(const GemmSpec& spec);

// One node of the graph. Attributes that an op does not use keep their defaults and are not printed.
struct Node {
    Op op = Op::Const;
    std::vector<int> args;           // ids of operand nodes, always smaller than this node's id
    std::string name;                // the user's name; empty means auto-named "_<id>" in text and code
    DType dtype = DType::F32;        // storage dtype: inputs, partials (f32), sinks, round target
    Width width = Width::Full;       // tile_input, col_input, col_index
    ReduceOp reduce = ReduceOp::Sum;  // reduce_row, reduce_col, partials (how to combine)
    float value = 0.0f;              // const
    bool operator==(const Node& o) const;
};

namespace detail {
struct GraphData;
struct GraphAccess;
}  // namespace detail

// A handle to a node of one graph. Arithmetic operators build elementwise nodes in that graph
// (a float operand becomes a constant node).
class Value {
public:
    Value() = default;
    int id() const { return id_; }
    bool valid() const { return data_ != nullptr; }

private:
    friend class Graph;
    friend struct detail::GraphAccess;
    Value(std::shared_ptr<detail::GraphData> data, int id) : data_(std::move(data)), id_(id) {}
    std::shared_ptr<detail::GraphData> data_;
    int id_ = -1;
};

Value operator+(Value a, Value b);
Value operator-(Value a, Value b);
Value operator*(Value a, Value b);
Value operator/(Value a, Value b);
Value operator-(Value x);
Value operator+(Value a, float b);
Value operator-(Value a, float b);
Value operator*(Value a, float b);
Value operator/(Value a, float b);
Value operator+(float a, Value b);
Value operator-(float a, Value b);
Value operator*(float a, Value b);
Value operator/(float a, Value b);

class Graph {
public:
    // A GEMM epilogue graph; `spec` fixes the operand dtype and layouts.
    static Graph gemm(std::string name, GemmSpec spec = {});
    // A tile program: the same graphs over M x N input tiles, with no accumulator.
    static Graph tile(std::string name);
    // A finalizer: combines reduction partials, then maps the per-row (or per-column) results.
    static Graph finalize(std::string name);

    const std::string& name() const;
    Domain domain() const;
    const GemmSpec& spec() const;  // meaningful for Domain::Gemm only
    const std::vector<Node>& nodes() const;
    const Node& node(int id) const;
    // The name a node carries in text and generated code: the user's name, or "_<id>".
    std::string display_name(int id) const;

    // Sources. Names of inputs are the names they are bound by at launch.
    Value accumulator(const std::string& name = "acc");
    Value tile_input(const std::string& name, DType dtype, Width width = Width::Full);
    // A tile input stored transposed (N x M): x[m][n] = in[n][m]. Tile programs only (ops.def).
    Value tile_input_transposed(const std::string& name, DType dtype);
    Value row_input(const std::string& name, DType dtype);
    Value col_input(const std::string& name, DType dtype, Width width = Width::Full);
    Value scalar(const std::string& name);  // a runtime f32 scalar, bound at launch
    Value constant(float value, const std::string& name = "");
    Value row_index(const std::string& name = "");
    Value col_index(Width width = Width::Full, const std::string& name = "");
    // Finalize only: the combination (sum/max/min/lse) over partials of one reduction.
    Value partials(const std::string& name, ReduceOp combine);

    // Elementwise math. Row, column and scalar operands broadcast against tiles.
    Value unary(Op op, Value x, const std::string& name = "");
    Value binary(Op op, Value a, Value b, const std::string& name = "");
    Value neg(Value x, const std::string& name = "") { return unary(Op::Neg, x, name); }
    Value abs(Value x, const std::string& name = "") { return unary(Op::Abs, x, name); }
    Value exp(Value x, const std::string& name = "") { return unary(Op::Exp, x, name); }
    // 2^x: one MUFU instruction and a subnormal fix-up, where exp is eight; exp(x) = exp2(x * log2(e)).
    Value exp2(Value x, const std::string& name = "") { return unary(Op::Exp2, x, name); }
    Value log(Value x, const std::string& name = "") { return unary(Op::Log, x, name); }
    Value sqrt(Value x, const std::string& name = "") { return unary(Op::Sqrt, x, name); }
    Value rsqrt(Value x, const std::string& name = "") { return unary(Op::Rsqrt, x, name); }
    Value sin(Value x, const std::string& name = "") { return unary(Op::Sin, x, name); }
    Value cos(Value x, const std::string& name = "") { return unary(Op::Cos, x, name); }
    Value tanh(Value x, const std::string& name = "") { return unary(Op::Tanh, x, name); }
    Value sigmoid(Value x, const std::string& name = "") { return unary(Op::Sigmoid, x, name); }
    Value silu(Value x, const std::string& name = "") { return unary(Op::Silu, x, name); }
    Value gelu_erf(Value x, const std::string& name = "") { return unary(Op::GeluErf, x, name); }
    Value gelu_tanh(Value x, const std::string& name = "") { return unary(Op::GeluTanh, x, name); }
    Value relu(Value x, const std::string& name = "") { return unary(Op::Relu, x, name); }
    Value square(Value x, const std::string& name = "") { return unary(Op::Square, x, name); }
    Value to_f32(Value x, const std::string& name = "") { return unary(Op::ToF32, x, name); }
    // Round to a storage dtype and back to f32, matching eager-mode rounding of an intermediate.
    Value round(Value x, DType dtype, const std::string& name = "");
    // op (sum, max or min) over x in the same row and 128-column group, at every element (ops.def reduce_group).
    Value reduce_group(Value x, ReduceOp op, const std::string& name = "");
    Value add(Value a, Value b, const std::string& name = "") { return binary(Op::Add, a, b, name); }
    Value sub(Value a, Value b, const std::string& name = "") { return binary(Op::Sub, a, b, name); }
    Value mul(Value a, Value b, const std::string& name = "") { return binary(Op::Mul, a, b, name); }
    Value div(Value a, Value b, const std::string& name = "") { return binary(Op::Div, a, b, name); }
    Value max(Value a, Value b, const std::string& name = "") { return binary(Op::Max, a, b, name); }
    Value min(Value a, Value b, const std::string& name = "") { return binary(Op::Min, a, b, name); }
    Value eq(Value a, Value b, const std::string& name = "") { return binary(Op::Eq, a, b, name); }
    Value ne(Value a, Value b, const std::string& name = "") { return binary(Op::Ne, a, b, name); }
    Value lt(Value a, Value b, const std::string& name = "") { return binary(Op::Lt, a, b, name); }
    Value le(Value a, Value b, const std::string& name = "") { return binary(Op::Le, a, b, name); }
    Value gt(Value a, Value b, const std::string& name = "") { return binary(Op::Gt, a, b, name); }
    Value ge(Value a, Value b, const std::string& name = "") { return binary(Op::Ge, a, b, name); }
    Value select(Value mask, Value a, Value b, const std::string& name = "");

    // Pairwise over adjacent columns (2j, 2j+1): even/odd halve the width, join doubles it.
    Value even(Value x, const std::string& name = "");
    Value odd(Value x, const std::string& name = "");
    Value join(Value even, Value odd, const std::string& name = "");

    // Sinks. Their names are the output tensors' binding names at launch.
    void store(Value x, const std::string& name, DType dtype);
    // x written transposed: the output `name` is N x M (columns of x by rows), for a K-major operand of a later GEMM
    // whose K is this one's M (a weight gradient's). Gemm graphs and tile programs (ops.def store_transposed).
    void store_transposed(Value x, const std::string& name, DType dtype);
    void accumulate(Value x, const std::string& name, DType dtype);  // out += x
    // Writes one fp32 partial per (N-tile, row) [reduce_row] or (M-tile, column) [reduce_col].
    void reduce_row(Value x, ReduceOp op, const std::string& name);
    void reduce_col(Value x, ReduceOp op, const std::string& name);

    bool operator==(const Graph& o) const;

    // Copies of a Graph share their nodes (building through one shows in all); a clone does not.
    Graph clone() const;

private:
    friend struct detail::GraphAccess;  // the text parser, the runtime's fast path (src/ir/graph_access.hpp)
    explicit Graph(std::shared_ptr<detail::GraphData> data);
    int append(Node node);
    Value add_node(Node node);
    int id_of(const Value& v, std::string_view role) const;
    std::shared_ptr<detail::GraphData> data_;
};

}  // namespace coda
