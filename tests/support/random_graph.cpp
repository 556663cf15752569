// Random valid graphs: grows a pool of typed values with bounded magnitude from the domain's sources,
// then folds every value left unused into sinks, so the result always passes validation.
#include "support/random_graph.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "ir/checked_graph.hpp"

namespace coda::test {
namespace {

constexpr double kInputBound = 4;         // assumed |input| (tiles, vectors, scalars, partials)
constexpr double kAccumulatorBound = 16;  // assumed |GEMM result|
constexpr double kPartialsBound = 32;     // a combination of a few partials
constexpr double kIndexBound = 4096;      // row/column indices and i32 inputs
constexpr double kMaxBound = 64;          // no f32 intermediate may grow beyond this

bool has_width(Kind k) { return k == Kind::Tile || k == Kind::Col; }

struct Val {
    Value v;
    ValueType t;
    double bound = 0;    // estimated max |value|
    bool exact = false;  // identical in fp32 and fp64 (inputs, constants, indices): safe to compare
};

class Generator {
public:
    // Steps stop once the graph plus an estimate of what finish() adds reaches `budget`.
    Generator(std::mt19937_64& rng, Domain domain, GemmSpec spec, int budget)
        : rng_(rng), domain_(domain), budget_(budget), g_(make_graph(domain, spec)) {}

    Graph run() {
        base_ = domain_ == Domain::Gemm   ? push(g_.accumulator(), tile(Width::Full), kAccumulatorBound, false)
                : domain_ == Domain::Tile ? push(g_.tile_input("x", DType::F32), tile(Width::Full), kInputBound, true)
                                          : partials();
        while (nodes() + finish_cost() < budget_) step();
        finish();
        return g_;
    }

private:
    Graph make_graph(Domain d, GemmSpec spec) {
        const std::string name = fmt::format("random_{}", to_string(d));
        return d == Domain::Gemm ? Graph::gemm(name, spec) : d == Domain::Tile ? Graph::tile(name) : Graph::finalize(name);
    }

    static ValueType tile(Width w, Scalar s = Scalar::F32) { return {Kind::Tile, w, s}; }
    static ValueType col(Width w, Scalar s = Scalar::F32) { return {Kind::Col, w, s}; }
    static ValueType row(Scalar s = Scalar::F32) { return {Kind::Row, Width::Full, s}; }
    static ValueType scalar() { return {Kind::Scalar, Width::Full, Scalar::F32}; }

    int nodes() const { return static_cast<int>(g_.nodes().size()); }
    bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
    int below(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
    template <class T>
    T one_of(std::initializer_list<T> items) { return *(items.begin() + below(static_cast<int>(items.size()))); }
    std::string fresh(const char* prefix) { return fmt::format("{}{}", prefix, counter_++); }
    std::string maybe_name() { return chance(0.5) ? fresh("v") : std::string(); }
    bool tile_domain() const { return domain_ != Domain::Finalize; }

    Val push(Value v, ValueType t, double bound, bool exact) {
        pool_.push_back(Val{v, t, bound, exact});
        return pool_.back();
    }

    std::vector<bool> used() const {
        std::vector<bool> out(g_.nodes().size(), false);
        for (const Node& n : g_.nodes())
            for (int a : n.args) out[static_cast<std::size_t>(a)] = true;
        return out;
    }

    std::vector<Val> unused() const {
        const std::vector<bool> u = used();
        std::vector<Val> out;
        for (const Val& v : pool_)
            if (!u[static_cast<std::size_t>(v.v.id())]) out.push_back(v);
        return out;
    }

    // About the nodes finish() adds: a fold per unused value (after a 3-node conversion for i32 values),
    // and a sink per width group.
    int finish_cost() const {
        int cost = 2;
        for (const Val& v : unused()) cost += v.t.scalar == Scalar::I32 ? 4 : 1;
        return cost;
    }

    // A value satisfying `ok`, preferring values nothing reads yet so that fewer are left for finish().
    std::optional<Val> pick(const std::function<bool(const Val&)>& ok) {
        std::vector<Val> all, unread;
        const std::vector<bool> u = used();
        for (const Val& v : pool_) {
            if (!ok(v)) continue;
            all.push_back(v);
            if (!u[static_cast<std::size_t>(v.v.id())]) unread.push_back(v);
        }
        const std::vector<Val>& from = !unread.empty() && chance(0.7) ? unread : all;
        if (from.empty()) return std::nullopt;
        return from[static_cast<std::size_t>(below(static_cast<int>(from.size())))];
    }

    static bool widths_agree(const ValueType& a, const ValueType& b) {
        return !has_width(a.kind) || !has_width(b.kind) || a.width == b.width;
    }

    static ValueType broadcast(const ValueType& a, const ValueType& b) {
        ValueType out = a;
        if (a.kind == Kind::Scalar) out = b;
        else if (b.kind != Kind::Scalar && a.kind != b.kind) out.kind = Kind::Tile;
        if (!has_width(a.kind) && has_width(b.kind)) out.width = b.width;
        out.scalar = Scalar::F32;
        return out;
    }

    // ---- sources ----
    Val partials() {
        const ReduceOp combine = one_of({ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Lse});
        return push(g_.partials(fresh("p"), combine), row(), kPartialsBound, false);
    }

    Val constant(float value) { return push(g_.constant(value, maybe_name()), scalar(), std::fabs(value), true); }

    Val one() {
        if (!one_) one_ = constant(1.0f);
        return *one_;
    }

    Val source() {
        const DType dtype = chance(0.2) ? DType::I32 : one_of({DType::BF16, DType::F16, DType::F32});
        const Scalar s = dtype == DType::I32 ? Scalar::I32 : Scalar::F32;
        const double bound = s == Scalar::I32 ? kIndexBound : kInputBound;
        const Width w = one_of({Width::Half, Width::Full, Width::Full, Width::Double});
        const int choice = below(tile_domain() ? 7 : 5);
        switch (choice) {
            case 0: return push(g_.row_input(fresh("r"), dtype), row(s), bound, true);
            case 1: return push(g_.scalar(fresh("s")), scalar(), kInputBound, true);
            case 2: return constant(one_of({0.5f, -1.25f, 2.0f, 0.001f, 3.0f, -0.0f}));
            case 3: return push(g_.row_index(maybe_name()), row(Scalar::I32), kIndexBound, true);
            case 4: return tile_domain() ? push(g_.col_index(w, maybe_name()), col(w, Scalar::I32), kIndexBound, true)
                                         : partials();
            case 5:
                // Tile programs also read full-width tiles stored transposed (N x M).
                if (domain_ == Domain::Tile && w == Width::Full && chance(0.3))
                    return push(g_.tile_input_transposed(fresh("t"), dtype), tile(w, s), bound, true);
                return push(g_.tile_input(fresh("t"), dtype, w), tile(w, s), bound, true);
            default: return push(g_.col_input(fresh("c"), dtype, w), col(w, s), bound, true);
        }
    }

    // ---- elementwise ----
    Val unary(Op op, const Val& x) {
        const ValueType t{x.t.kind, x.t.width, Scalar::F32};
        return push(g_.unary(op, x.v, maybe_name()), t, x.bound, false);
    }

    Val binary(Op op, const Val& a, const Val& b, double bound) {
        ValueType t = broadcast(a.t, b.t);
        const bool compare = op_info(op).category == OpCategory::Compare;
        return push(g_.binary(op, a.v, b.v, maybe_name()), t, compare ? 1.0 : bound, compare);
    }

    Val tame(const Val& x) {  // into [-1, 1]
        Val y = unary(one_of({Op::Tanh, Op::Sin, Op::Cos, Op::Sigmoid}), x);
        y.bound = 1;
        return y;
    }

    Val plus_one_abs(const Val& x) {  // |x| + 1 >= 1: a safe argument for log, sqrt, rsqrt and division
        return binary(Op::Add, unary(Op::Abs, x), one(), x.bound + 1);
    }

    Val apply_unary(Op op, Val x) {
        switch (op) {
            case Op::Exp:
                if (x.bound > 3) x = tame(x);
                return with_bound(unary(Op::Exp, x), std::exp(x.bound));
            case Op::Exp2:
                if (x.bound > 4) x = tame(x);
                return with_bound(unary(Op::Exp2, x), std::exp2(x.bound));
            case Op::Log: x = plus_one_abs(x); return with_bound(unary(Op::Log, x), std::log(x.bound));
            case Op::Sqrt: x = plus_one_abs(x); return with_bound(unary(Op::Sqrt, x), std::sqrt(x.bound));
            case Op::Rsqrt: return with_bound(unary(Op::Rsqrt, plus_one_abs(x)), 1);
            case Op::Square:
                if (x.bound * x.bound > kMaxBound) x = tame(x);
                return with_bound(unary(Op::Square, x), x.bound * x.bound);
            case Op::Round: {
                const DType d = one_of({DType::BF16, DType::F16, DType::F32});
                const ValueType t = x.t;
                return push(g_.round(x.v, d, maybe_name()), t, x.bound, x.exact);
            }
            case Op::Tanh:
            case Op::Sigmoid:
            case Op::Sin:
            case Op::Cos: return with_bound(unary(op, x), 1);
            case Op::Neg:
            case Op::Abs: return with_bound(unary(op, x), x.bound, x.exact);
            default:  // relu, silu, the gelus: |f(x)| <= |x| + 1
                if (x.bound + 1 > kMaxBound) x = tame(x);
                return with_bound(unary(op, x), x.bound + 1);
        }
    }

    static Val with_bound(Val v, double bound, bool exact = false) {
        v.bound = bound;
        v.exact = exact;
        return v;
    }

    Val apply_binary(Op op, Val a, Val b) {
        switch (op) {
            case Op::Add:
            case Op::Sub:
                if (a.bound + b.bound > kMaxBound) return binary(Op::Max, a, b, std::max(a.bound, b.bound));
                return binary(op, a, b, a.bound + b.bound);
            case Op::Mul:
                if (a.bound * b.bound > kMaxBound) a = tame(a);
                if (a.bound * b.bound > kMaxBound) b = tame(b);
                return binary(op, a, b, a.bound * b.bound);
            case Op::Div: b = plus_one_abs(b); return binary(Op::Div, a, b, a.bound);
            default: return binary(op, a, b, std::max(a.bound, b.bound));  // max, min
        }
    }

    std::optional<Val> f32_value() {
        return pick([](const Val& v) { return v.t.scalar == Scalar::F32; });
    }

    // i32 indices become f32 (exact) scaled by 2^-8 to stay tame; the unscaled value never joins the pool.
    Val as_f32(const Val& x) {
        if (x.t.scalar == Scalar::F32) return x;
        const Value f = g_.to_f32(x.v, maybe_name());
        const Val scale = constant(0.00390625f);
        const ValueType t{x.t.kind, x.t.width, Scalar::F32};
        return push(g_.mul(f, scale.v, maybe_name()), t, x.bound / 256, true);
    }

    void step() {
        switch (below(8)) {
            case 0: source(); return;
            case 1:
            case 2: {
                const std::optional<Val> x = pick([](const Val&) { return true; });
                const Op op = one_of({Op::Neg, Op::Abs, Op::Exp, Op::Exp2, Op::Log, Op::Sqrt, Op::Rsqrt, Op::Sin, Op::Cos,
                                      Op::Tanh, Op::Sigmoid, Op::Silu, Op::GeluErf, Op::GeluTanh, Op::Relu,
                                      Op::Square, Op::Round});
                apply_unary(op, as_f32(*x));
                return;
            }
            case 3: {
                const Val a = as_f32(*f32_value());
                const std::optional<Val> b = pick([&](const Val& v) {
                    return v.t.scalar == Scalar::F32 && widths_agree(a.t, v.t) && v.v.id() != a.v.id();
                });
                if (b) apply_binary(one_of({Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Max, Op::Min}), a, *b);
                return;
            }
            case 4: compare_select(); return;
            case 5:
                if (tile_domain()) pairs();
                return;
            case 6:
                if (tile_domain()) outer_product();
                return;
            default: {
                const std::optional<Val> x = pick([&](const Val& v) { return storable(v.t); });
                if (x) sink(*x);
                return;
            }
        }
    }

    // A mask from two exact values, then either a select or a product with the mask. The label pattern
    // (a row of i32 labels against the column index) is the cross-entropy target pick.
    void compare_select() {
        const Op cmp = one_of({Op::Eq, Op::Ne, Op::Lt, Op::Le, Op::Gt, Op::Ge});
        Val mask;
        if (tile_domain() && chance(0.4)) {
            const std::optional<Val> labels =
                pick([](const Val& v) { return v.t.kind == Kind::Row && v.t.scalar == Scalar::I32; });
            const Val l = labels ? *labels : push(g_.row_input(fresh("labels"), DType::I32), row(Scalar::I32),
                                                  kIndexBound, true);
            const Width w = one_of({Width::Half, Width::Full, Width::Double});
            const Val c = push(g_.col_index(w, maybe_name()), col(w, Scalar::I32), kIndexBound, true);
            mask = binary(cmp, l, c, 1);
        } else {
            const std::optional<Val> a = pick([](const Val& v) { return v.exact; });
            if (!a) return;
            const std::optional<Val> b = pick([&](const Val& v) {
                return v.exact && v.t.scalar == a->t.scalar && widths_agree(a->t, v.t) && v.v.id() != a->v.id();
            });
            mask = binary(cmp, *a, b ? *b : *a, 1);
        }
        const std::optional<Val> x =
            pick([&](const Val& v) { return widths_agree(mask.t, v.t) && v.v.id() != mask.v.id(); });
        if (!x) return;
        if (x->t.scalar == Scalar::F32 && chance(0.3)) {
            binary(Op::Mul, mask, *x, x->bound);
            return;
        }
        const std::optional<Val> y = pick([&](const Val& v) {
            return v.t.scalar == x->t.scalar && widths_agree(mask.t, v.t) && widths_agree(x->t, v.t);
        });
        const Val other = y ? *y : x->t.scalar == Scalar::F32 ? constant(0.0f) : *x;
        ValueType t = broadcast(broadcast(mask.t, x->t), other.t);
        t.scalar = x->t.scalar;
        push(g_.select(mask.v, x->v, other.v, maybe_name()), t, std::max(x->bound, other.bound),
             x->exact && other.exact);
    }

    // even/odd of a full or double value, then the SwiGLU contraction, a rotation-like join, or neither.
    void pairs() {
        std::optional<Val> x = pick([](const Val& v) {
            return has_width(v.t.kind) && v.t.width != Width::Half && v.t.scalar == Scalar::F32;
        });
        if (!x) {
            const Width w = one_of({Width::Full, Width::Double});
            x = push(g_.tile_input(fresh("pair"), one_of({DType::BF16, DType::F32}), w), tile(w), kInputBound, true);
        }
        const Width half = x->t.width == Width::Double ? Width::Full : Width::Half;
        const ValueType ht{x->t.kind, half, Scalar::F32};
        const Val e = push(g_.even(x->v, maybe_name()), ht, x->bound, x->exact);
        const Val o = push(g_.odd(x->v, maybe_name()), ht, x->bound, x->exact);
        switch (below(3)) {
            case 0: apply_binary(Op::Mul, apply_unary(Op::Silu, e), o); return;
            case 1: {
                const Val a = apply_binary(Op::Sub, e, o), b = apply_binary(Op::Add, e, o);
                const ValueType jt{x->t.kind, x->t.width, Scalar::F32};
                push(g_.join(a.v, b.v, maybe_name()), jt, std::max(a.bound, b.bound), false);
                return;
            }
            default: return;
        }
    }

    // RoPE's angle: positions (a row) times frequencies (a column) is a tile, then sin or cos.
    void outer_product() {
        std::optional<Val> pos = pick([](const Val& v) { return v.t.kind == Kind::Row; });
        if (!pos) pos = push(g_.row_input(fresh("pos"), DType::I32), row(Scalar::I32), kIndexBound, true);
        std::optional<Val> theta = pick([](const Val& v) { return v.t.kind == Kind::Col && v.t.scalar == Scalar::F32; });
        if (!theta) {
            const Width w = one_of({Width::Half, Width::Full});
            theta = push(g_.col_input(fresh("theta"), DType::F32, w), col(w), kInputBound, true);
        }
        apply_unary(one_of({Op::Sin, Op::Cos}), apply_binary(Op::Mul, as_f32(*pos), *theta));
    }

    // ---- sinks ----
    bool storable(const ValueType& t) const { return t.kind == (tile_domain() ? Kind::Tile : Kind::Row); }

    void sink(const Val& x) {
        if (x.t.scalar == Scalar::I32) {
            g_.store(x.v, fresh("out"), DType::I32);
            return;
        }
        const int choice = below(tile_domain() ? 5 : 3);
        const ReduceOp r = one_of({ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::SumSq, ReduceOp::Lse});
        const DType d = one_of({DType::BF16, DType::F16, DType::F32});
        if (choice == 0) g_.accumulate(x.v, fresh("grad"), d);
        else if (choice == 3) g_.reduce_row(x.v, r, fresh("rowred"));
        else if (choice == 4) g_.reduce_col(x.v, r, fresh("colred"));
        else g_.store(x.v, fresh("out"), d);
    }

    Val fold(const Val& a, const Val& b) {  // one node, whatever the bounds
        const Op op = one_of({Op::Add, Op::Sub, Op::Mul, Op::Max, Op::Min});
        if (op == Op::Mul && a.bound * b.bound > kMaxBound) return binary(Op::Max, a, b, std::max(a.bound, b.bound));
        return apply_binary(op, a, b);
    }

    // Folds every unused value into sinks: i32 values become f32, values of one width are combined, rows
    // and scalars join a width group (or the base value), columns meet a tile of their width.
    void finish() {
        std::map<Width, Val> groups;
        std::optional<Val> widthless;
        for (Val v : unused()) {
            if (v.t.scalar == Scalar::I32) {
                if (storable(v.t) && chance(0.5)) {
                    sink(v);
                    continue;
                }
                v = as_f32(v);
            }
            if (!has_width(v.t.kind)) {
                widthless = widthless ? fold(*widthless, v) : v;
                continue;
            }
            const auto it = groups.find(v.t.width);
            if (it == groups.end()) groups.emplace(v.t.width, v);
            else it->second = fold(it->second, v);
        }
        if (widthless) {
            if (!groups.empty()) {
                auto it = groups.begin();
                std::advance(it, below(static_cast<int>(groups.size())));
                it->second = fold(it->second, *widthless);
            } else if (!storable(widthless->t)) {
                groups.emplace(Width::Full, fold(base_, *widthless));
            } else {
                groups.emplace(Width::Full, *widthless);
            }
        }
        for (auto& [width, v] : groups) {
            if (v.t.kind == Kind::Col) {
                const Val t = push(g_.tile_input(fresh("t"), DType::F32, width), tile(width), kInputBound, true);
                v = fold(t, v);
            }
            sink(v);
        }
        const bool has_sink = std::any_of(g_.nodes().begin(), g_.nodes().end(), [](const Node& n) {
            return op_info(n.op).category == OpCategory::Sink;
        });
        if (!has_sink) sink(base_);
    }

    std::mt19937_64& rng_;
    Domain domain_;
    int budget_;
    Graph g_;
    std::vector<Val> pool_;
    Val base_;
    std::optional<Val> one_;
    int counter_ = 0;
};

}  // namespace

Graph random_graph(std::mt19937_64& rng, Domain domain, GemmSpec spec, const RandomGraphOptions& options) {
    if (options.max_nodes < 8)
        throw std::invalid_argument(fmt::format("random_graph: max_nodes must be at least 8, got {}", options.max_nodes));
    // finish_cost() is an estimate; a graph that overshoots is drawn again with a smaller budget. With a
    // budget of 0 no step runs and the graph (a source and a sink or two) always fits.
    for (int budget = options.max_nodes;; budget = std::max(0, budget - 2)) {
        Graph g = Generator(rng, domain, spec, budget).run();
        if (static_cast<int>(g.nodes().size()) <= options.max_nodes) return g;
    }
}

Graph random_graph(std::mt19937_64& rng, const RandomGraphOptions& options) {
    if (options.domains.empty()) throw std::invalid_argument("random_graph: options.domains is empty");
    const Domain d = options.domains[std::uniform_int_distribution<std::size_t>(0, options.domains.size() - 1)(rng)];
    GemmSpec spec;
    spec.input = std::bernoulli_distribution(0.5)(rng) ? DType::BF16 : DType::F16;
    spec.a = std::bernoulli_distribution(0.5)(rng) ? Major::K : Major::MN;
    spec.b = std::bernoulli_distribution(0.5)(rng) ? Major::K : Major::MN;
    return random_graph(rng, d, spec, options);
}

}  // namespace coda::test
