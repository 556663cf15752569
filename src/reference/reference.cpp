// The CPU reference interpreter: every node becomes a dense array of doubles over the whole problem (a
// tile is M x C, a row vector M, a column vector C, a scalar 1), evaluated in node order with broadcasting.
#include "reference/reference.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "coda/error.hpp"
#include "mainloop/block_scales.hpp"
#include "reference/host_numeric.hpp"
#include "reference/reference_math.hpp"

namespace coda {
namespace {

// A node's value over the whole problem. Row vectors ignore the column, column vectors the row.
struct Dense {
    Kind kind = Kind::Scalar;
    long long rows = 1;
    long long cols = 1;
    std::vector<double> v;

    double at(long long i, long long j) const {
        switch (kind) {
            case Kind::Tile: return v[static_cast<std::size_t>(i * cols + j)];
            case Kind::Row: return v[static_cast<std::size_t>(i)];
            case Kind::Col: return v[static_cast<std::size_t>(j)];
            case Kind::Scalar: return v[0];
            case Kind::Sink: break;
        }
        throw InternalError("reference: a sink has no value");
    }
};

std::string shape_text(const std::vector<long long>& shape) {
    std::string out = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) out += fmt::format("{}{}", i ? " x " : "", shape[i]);
    return out + "]";
}

class Interpreter {
public:
    Interpreter(const CheckedGraph& g, const ReferenceProblem& p) : g_(g), p_(p) {
        const Domain d = g.graph.domain();
        if (p.m < 0 || p.n < 0 || p.k < 0 || p.t < 0) fail("has a negative size");
        if (d != Domain::Finalize && p.n % 2 != 0) fail(fmt::format("has N = {}; N must be even", p.n));
        if (p.bm <= 0 || p.bn <= 0) fail(fmt::format("has tile bm={} bn={}; both must be positive", p.bm, p.bn));
    }

    std::map<std::string, HostTensor> run() {
        const int count = static_cast<int>(g_.graph.nodes().size());
        values_.resize(static_cast<std::size_t>(count));
        // Each value is freed after its last use, so big problems need memory for the live values only.
        std::vector<int> last_use(static_cast<std::size_t>(count), -1);
        for (int id = 0; id < count; ++id)
            for (int arg : g_.graph.node(id).args) last_use[static_cast<std::size_t>(arg)] = id;
        for (int id = 0; id < count; ++id) {
            evaluate(id);
            for (int arg : g_.graph.node(id).args)
                if (last_use[static_cast<std::size_t>(arg)] == id) values_[static_cast<std::size_t>(arg)] = Dense{};
        }
        return std::move(sinks_);
    }

private:
    [[noreturn]] void fail(const std::string& what) const {
        throw Error(fmt::format("reference run of graph '{}': the problem {}", g_.graph.name(), what));
    }

    const ValueType& type(int id) const { return g_.types.at(static_cast<std::size_t>(id)); }
    const Dense& value(int id) const { return values_.at(static_cast<std::size_t>(id)); }

    Dense shaped(const ValueType& t) const {
        Dense d;
        d.kind = t.kind;
        if (t.kind == Kind::Tile || t.kind == Kind::Row) d.rows = p_.m;
        if (t.kind == Kind::Tile || t.kind == Kind::Col) d.cols = columns(t.width, p_.n);
        d.v.assign(static_cast<std::size_t>(d.rows * d.cols), 0.0);
        return d;
    }

    static std::vector<long long> shape_of(const Dense& d) {
        switch (d.kind) {
            case Kind::Tile: return {d.rows, d.cols};
            case Kind::Row: return {d.rows};
            case Kind::Col: return {d.cols};
            default: return {};
        }
    }

    // Stored values are read as the dtype holds them; i32 tensors must hold integers.
    double stored(double x, DType d, const std::string& name) const {
        if (d == DType::I32 && !(std::isfinite(x) && x == std::trunc(x)))
            fail(fmt::format("gives i32 tensor '{}' the non-integer value {}", name, x));
        return round_to_dtype(x, d);
    }

    const HostTensor& tensor(const std::string& name, const std::vector<long long>& shape, const char* what) const {
        const auto it = p_.inputs.find(name);
        if (it == p_.inputs.end())
            fail(fmt::format("lacks '{}' ({} of shape {}); add it to ReferenceProblem::inputs", name, what,
                             shape_text(shape)));
        const HostTensor& t = it->second;
        long long count = 1;
        for (long long s : t.shape) count *= s;
        if (t.shape != shape || static_cast<long long>(t.values.size()) != count)
            fail(fmt::format("gives '{}' ({}) shape {} with {} values; expected shape {}", name, what,
                             shape_text(t.shape), t.values.size(), shape_text(shape)));
        return t;
    }

    Dense load(int id, const char* what) const {
        const Node& n = g_.graph.node(id);
        Dense d = shaped(type(id));
        const HostTensor& t = tensor(n.name, shape_of(d), what);
        for (std::size_t i = 0; i < d.v.size(); ++i) d.v[i] = stored(t.values[i], n.dtype, n.name);
        return d;
    }

    // x[i][j] = in[j][i]: the tensor bound is N x M.
    Dense load_transposed(int id) const {
        const Node& n = g_.graph.node(id);
        Dense d = shaped(type(id));
        const HostTensor& t = tensor(n.name, {d.cols, d.rows}, "tile_input_transposed");
        for (long long i = 0; i < d.rows; ++i)
            for (long long j = 0; j < d.cols; ++j)
                d.v[static_cast<std::size_t>(i * d.cols + j)] =
                    stored(t.values[static_cast<std::size_t>(j * d.rows + i)], n.dtype, n.name);
        return d;
    }

    Dense accumulator() const {
        const GemmSpec& spec = g_.graph.spec();
        if (p_.a == nullptr || p_.b == nullptr) fail("lacks the GEMM operands a and b");
        const auto check = [&](const HostTensor& t, long long r, long long c, const char* name) {
            if (t.shape != std::vector<long long>{r, c} || static_cast<long long>(t.values.size()) != r * c)
                fail(fmt::format("gives GEMM operand {} shape {}; expected [{} x {}]", name, shape_text(t.shape), r,
                                 c));
        };
        check(*p_.a, p_.m, p_.k, "a");
        check(*p_.b, p_.k, p_.n, "b");
        std::vector<double> a(p_.a->values.size()), b(p_.b->values.size());
        for (std::size_t i = 0; i < a.size(); ++i) a[i] = round_to_dtype(p_.a->values[i], spec.input);
        for (std::size_t i = 0; i < b.size(); ++i) b[i] = round_to_dtype(p_.b->values[i], spec.b_input());
        Dense d = shaped(ValueType{Kind::Tile, Width::Full, Scalar::F32});
        if (spec.block_scaled()) {
            block_scaled_product(a, b, d);
            return d;
        }
        for (long long i = 0; i < p_.m; ++i)
            for (long long kk = 0; kk < p_.k; ++kk) {
                const double x = a[static_cast<std::size_t>(i * p_.k + kk)];
                for (long long j = 0; j < p_.n; ++j)
                    d.v[static_cast<std::size_t>(i * p_.n + j)] += x * b[static_cast<std::size_t>(kk * p_.n + j)];
            }
        return d;
    }

    // GemmSpec::scales: acc[i][j] = sum over k-blocks kb of SA[kb][i] * SB[j / 128][kb] (with Block1x128,
    // SB[kb][j]) * (the block's part of A B)[i][j], with SA and SB read as f32 from the inputs that
    // coda::block_scale_operands names (A's, then B's).
    void block_scaled_product(const std::vector<double>& a, const std::vector<double>& b, Dense& d) const {
        const GemmSpec& spec = g_.graph.spec();
        std::vector<const HostTensor*> scales;
        for (const BlockScaleOperand& s : block_scale_operands(spec)) {
            const BlockScaleShape shape = s.shape(p_.m, p_.n, p_.k);
            scales.push_back(&tensor(std::string(s.name), {shape.rows, shape.cols},
                                     fmt::format("{}, {}", s.what, s.layout).c_str()));
        }
        const HostTensor& a_scale = *scales.at(0);
        const HostTensor& b_scale = *scales.at(1);
        const long long kbs = (p_.k + kScaleBlock - 1) / kScaleBlock;
        const auto b_at = [&](long long kb, long long j) {
            return spec.scales == ScaleMode::Block1x128 ? kb * p_.n + j : (j / kScaleBlock) * kbs + kb;
        };
        std::vector<double> block(static_cast<std::size_t>(p_.n));
        for (long long i = 0; i < p_.m; ++i)
            for (long long kb = 0; kb < kbs; ++kb) {
                std::fill(block.begin(), block.end(), 0.0);
                for (long long kk = kb * kScaleBlock; kk < std::min(p_.k, (kb + 1) * kScaleBlock); ++kk) {
                    const double x = a[static_cast<std::size_t>(i * p_.k + kk)];
                    for (long long j = 0; j < p_.n; ++j)
                        block[static_cast<std::size_t>(j)] += x * b[static_cast<std::size_t>(kk * p_.n + j)];
                }
                // at(): a declared shape that no longer fits these layouts fails here, not out of bounds.
                const double sa =
                    round_to_dtype(a_scale.values.at(static_cast<std::size_t>(kb * p_.m + i)), DType::F32);
                for (long long j = 0; j < p_.n; ++j) {
                    const double sb =
                        round_to_dtype(b_scale.values.at(static_cast<std::size_t>(b_at(kb, j))), DType::F32);
                    d.v[static_cast<std::size_t>(i * p_.n + j)] += sa * sb * block[static_cast<std::size_t>(j)];
                }
            }
    }

    Dense partials(int id) const {
        const Node& n = g_.graph.node(id);
        if (n.reduce == ReduceOp::SumSq) throw InternalError("partials combined by sumsq passed validation");
        const HostTensor& t = tensor(n.name, {p_.t, p_.m}, "partials");
        Dense d = shaped(type(id));
        for (long long l = 0; l < p_.m; ++l) {
            std::vector<double> column;
            for (long long r = 0; r < p_.t; ++r) column.push_back(t.values[static_cast<std::size_t>(r * p_.m + l)]);
            d.v[static_cast<std::size_t>(l)] = reduce_values(n.reduce, column);
        }
        return d;
    }

    Dense scalar(int id) const {
        const Node& n = g_.graph.node(id);
        const auto it = p_.scalars.find(n.name);
        if (it == p_.scalars.end()) fail(fmt::format("lacks scalar '{}'; add it to ReferenceProblem::scalars", n.name));
        Dense d;
        d.v = {round_to_dtype(it->second, DType::F32)};
        return d;
    }

    Dense elementwise(int id) const {
        const Node& n = g_.graph.node(id);
        Dense d = shaped(type(id));
        std::vector<double> operands(n.args.size());
        for (long long i = 0; i < d.rows; ++i)
            for (long long j = 0; j < d.cols; ++j) {
                for (std::size_t k = 0; k < n.args.size(); ++k) operands[k] = value(n.args[k]).at(i, j);
                d.v[static_cast<std::size_t>(i * d.cols + j)] = apply_elementwise(n.op, n.dtype, operands);
            }
        return d;
    }

    // even / odd take columns 2j + parity; join interleaves its operands' columns.
    Dense pair_op(int id) const {
        const Node& n = g_.graph.node(id);
        Dense d = shaped(type(id));
        for (long long i = 0; i < d.rows; ++i)
            for (long long j = 0; j < d.cols; ++j) {
                double x = 0;
                if (n.op == Op::Join) x = value(n.args[static_cast<std::size_t>(j % 2)]).at(i, j / 2);
                else x = value(n.args[0]).at(i, 2 * j + (n.op == Op::Odd ? 1 : 0));
                d.v[static_cast<std::size_t>(i * d.cols + j)] = x;
            }
        return d;
    }

    // reduce_group: every element gets the reduction over its row's elements in the same group of kScaleBlock full
    // columns (of the value's width: columns(width, kScaleBlock) values a group), the last group cut at N.
    Dense group_reduction(int id) const {
        const Node& n = g_.graph.node(id);
        const Dense& x = value(n.args.at(0));
        Dense d = shaped(type(id));
        const long long per_group = columns(type(id).width, kScaleBlock);
        for (long long i = 0; i < d.rows; ++i)
            for (long long g0 = 0; g0 < d.cols; g0 += per_group) {
                const long long end = std::min(d.cols, g0 + per_group);
                std::vector<double> xs;
                for (long long j = g0; j < end; ++j) xs.push_back(x.at(i, j));
                const double r = reduce_values(n.reduce, xs);
                for (long long j = g0; j < end; ++j) d.v[static_cast<std::size_t>(i * d.cols + j)] = r;
            }
        return d;
    }

    // The outputs of the sinks, one function each, so that evaluate() names every sink op (no default).
    HostTensor store(int id) const {
        const Node& n = g_.graph.node(id);
        const Dense& x = value(n.args.at(0));
        return HostTensor{n.dtype, shape_of(x), x.v};
    }

    // out[j][i] = x[i][j]: N x M.
    HostTensor store_transposed(int id) const {
        const Node& n = g_.graph.node(id);
        const Dense& x = value(n.args.at(0));
        std::vector<double> v(x.v.size());
        for (long long i = 0; i < x.rows; ++i)
            for (long long j = 0; j < x.cols; ++j)
                v[static_cast<std::size_t>(j * x.rows + i)] = x.v[static_cast<std::size_t>(i * x.cols + j)];
        return HostTensor{n.dtype, {x.cols, x.rows}, std::move(v)};
    }

    HostTensor accumulate(int id) const {
        const Node& n = g_.graph.node(id);
        const Dense& x = value(n.args.at(0));
        const HostTensor& initial = tensor(n.name, shape_of(x), "initial value of an accumulate output");
        HostTensor out{n.dtype, shape_of(x), x.v};
        for (std::size_t i = 0; i < out.values.size(); ++i)
            out.values[i] += stored(initial.values[i], n.dtype, n.name);
        return out;
    }

    // One partial per (N-tile, row). An N-tile of bn full columns holds columns(width, bn) of the value.
    HostTensor row_partials(int id) const {
        const Node& n = g_.graph.node(id);
        const Dense& x = value(n.args.at(0));
        const long long tiles = (p_.n + p_.bn - 1) / p_.bn;
        const long long per_tile = columns(type(n.args.at(0)).width, p_.bn);
        HostTensor out{DType::F32, {tiles, p_.m}, {}};
        for (long long tn = 0; tn < tiles; ++tn)
            for (long long i = 0; i < p_.m; ++i) {
                std::vector<double> xs;
                const long long end = std::min(x.cols, (tn + 1) * per_tile);
                for (long long j = tn * per_tile; j < end; ++j) xs.push_back(x.at(i, j));
                out.values.push_back(reduce_values(n.reduce, xs));
            }
        return out;
    }

    // One partial per (M-tile, column of the value).
    HostTensor col_partials(int id) const {
        const Node& n = g_.graph.node(id);
        const Dense& x = value(n.args.at(0));
        const long long tiles = (p_.m + p_.bm - 1) / p_.bm;
        HostTensor out{DType::F32, {tiles, x.cols}, {}};
        for (long long tm = 0; tm < tiles; ++tm)
            for (long long j = 0; j < x.cols; ++j) {
                std::vector<double> xs;
                for (long long i = tm * p_.bm; i < std::min(p_.m, (tm + 1) * p_.bm); ++i) xs.push_back(x.at(i, j));
                out.values.push_back(reduce_values(n.reduce, xs));
            }
        return out;
    }

    void evaluate(int id) {
        const Node& n = g_.graph.node(id);
        Dense& d = values_[static_cast<std::size_t>(id)];
        switch (n.op) {
            case Op::Accumulator: d = accumulator(); return;
            case Op::TileInput: d = load(id, "tile_input"); return;
            case Op::TileInputTransposed: d = load_transposed(id); return;
            case Op::RowInput: d = load(id, "row_input"); return;
            case Op::ColInput: d = load(id, "col_input"); return;
            case Op::Scalar: d = scalar(id); return;
            case Op::Const: d.v = {static_cast<double>(n.value)}; return;
            case Op::RowIndex:
            case Op::ColIndex: {
                d = shaped(type(id));
                for (std::size_t i = 0; i < d.v.size(); ++i) d.v[i] = static_cast<double>(i);
                return;
            }
            case Op::Partials: d = partials(id); return;
            case Op::Even:
            case Op::Odd:
            case Op::Join: d = pair_op(id); return;
            case Op::ReduceGroup: d = group_reduction(id); return;
            case Op::Store: sinks_[n.name] = store(id); return;
            case Op::StoreTransposed: sinks_[n.name] = store_transposed(id); return;
            case Op::Accumulate: sinks_[n.name] = accumulate(id); return;
            case Op::ReduceRow: sinks_[n.name] = row_partials(id); return;
            case Op::ReduceCol: sinks_[n.name] = col_partials(id); return;
            // Elementwise: reference_math.cpp gives each its meaning. Listed, not defaulted, so that an op added to
            // ops.def fails to compile here until the reference evaluates it (-Werror=switch).
            case Op::Neg:
            case Op::Abs:
            case Op::Exp:
            case Op::Exp2:
            case Op::Log:
            case Op::Sqrt:
            case Op::Rsqrt:
            case Op::Sin:
            case Op::Cos:
            case Op::Tanh:
            case Op::Sigmoid:
            case Op::Silu:
            case Op::GeluErf:
            case Op::GeluTanh:
            case Op::Relu:
            case Op::Square:
            case Op::ToF32:
            case Op::Round:
            case Op::Add:
            case Op::Sub:
            case Op::Mul:
            case Op::Div:
            case Op::Max:
            case Op::Min:
            case Op::Eq:
            case Op::Ne:
            case Op::Lt:
            case Op::Le:
            case Op::Gt:
            case Op::Ge:
            case Op::Select: d = elementwise(id); return;
        }
        throw InternalError(fmt::format("reference: op {} has no evaluation", static_cast<int>(n.op)));
    }

    const CheckedGraph& g_;
    const ReferenceProblem& p_;
    std::vector<Dense> values_;
    std::map<std::string, HostTensor> sinks_;
};

}  // namespace

std::map<std::string, HostTensor> run_reference(const CheckedGraph& g, const ReferenceProblem& p) {
    if (g.types.size() != g.graph.nodes().size())
        throw InternalError(fmt::format("checked graph '{}' has {} types for {} nodes", g.graph.name(),
                                        g.types.size(), g.graph.nodes().size()));
    return Interpreter(g, p).run();
}

}  // namespace coda
