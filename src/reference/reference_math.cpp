// Double-precision meaning of the elementwise ops and reductions, for the CPU reference interpreter.
// Comparisons give 1.0 / 0.0 and select picks its second operand where the mask is non-zero.
#include "reference/reference_math.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "coda/error.hpp"
#include "reference/host_numeric.hpp"

namespace coda {
namespace {

constexpr double kPi = 3.14159265358979323846;

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

double operand(const std::vector<double>& xs, std::size_t k, Op op) {
    if (k >= xs.size())
        throw InternalError(fmt::format("reference: '{}' given {} operands", op_info(op).text, xs.size()));
    return xs[k];
}

}  // namespace

double apply_elementwise(Op op, DType round_to, const std::vector<double>& xs) {
    const double a = operand(xs, 0, op);
    const auto b = [&] { return operand(xs, 1, op); };
    switch (op) {
        case Op::Neg: return -a;
        case Op::Abs: return std::fabs(a);
        case Op::Exp: return std::exp(a);
        case Op::Exp2: return std::exp2(a);
        case Op::Log: return std::log(a);
        case Op::Sqrt: return std::sqrt(a);
        case Op::Rsqrt: return 1.0 / std::sqrt(a);
        case Op::Sin: return std::sin(a);
        case Op::Cos: return std::cos(a);
        case Op::Tanh: return std::tanh(a);
        case Op::Sigmoid: return sigmoid(a);
        case Op::Silu: return a * sigmoid(a);
        case Op::GeluErf: return 0.5 * a * (1.0 + std::erf(a / std::sqrt(2.0)));
        case Op::GeluTanh: {
            const double k = std::sqrt(2.0 / kPi);
            return 0.5 * a * (1.0 + std::tanh(k * (a + 0.044715 * a * a * a)));
        }
        case Op::Relu: return std::fmax(a, 0.0);
        case Op::Square: return a * a;
        case Op::ToF32: return a;
        case Op::Round: return round_to_dtype(a, round_to);
        case Op::Add: return a + b();
        case Op::Sub: return a - b();
        case Op::Mul: return a * b();
        case Op::Div: return a / b();
        case Op::Max: return std::fmax(a, b());
        case Op::Min: return std::fmin(a, b());
        case Op::Eq: return a == b() ? 1.0 : 0.0;
        case Op::Ne: return a != b() ? 1.0 : 0.0;
        case Op::Lt: return a < b() ? 1.0 : 0.0;
        case Op::Le: return a <= b() ? 1.0 : 0.0;
        case Op::Gt: return a > b() ? 1.0 : 0.0;
        case Op::Ge: return a >= b() ? 1.0 : 0.0;
        case Op::Select: return a != 0.0 ? b() : operand(xs, 2, op);
        // Not elementwise: the interpreter evaluates these itself (reference.cpp). Listed, not defaulted, so that an
        // op added to ops.def fails to compile here until it has a meaning (-Werror=switch).
        case Op::Accumulator:
        case Op::TileInput:
        case Op::TileInputTransposed:
        case Op::RowInput:
        case Op::ColInput:
        case Op::Scalar:
        case Op::Const:
        case Op::RowIndex:
        case Op::ColIndex:
        case Op::Partials:
        case Op::Even:
        case Op::Odd:
        case Op::Join:
        case Op::ReduceGroup:
        case Op::Store:
        case Op::StoreTransposed:
        case Op::Accumulate:
        case Op::ReduceRow:
        case Op::ReduceCol: break;
    }
    throw InternalError(fmt::format("reference: '{}' is not an elementwise op", op_info(op).text));
}

double reduce_values(ReduceOp op, const std::vector<double>& values) {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    switch (op) {
        case ReduceOp::Sum: {
            double s = 0;
            for (double x : values) s += x;
            return s;
        }
        case ReduceOp::SumSq: {
            double s = 0;
            for (double x : values) s += x * x;
            return s;
        }
        case ReduceOp::Max: {
            double r = -kInf;
            for (double x : values) r = std::max(r, x);
            return r;
        }
        case ReduceOp::Min: {
            double r = kInf;
            for (double x : values) r = std::min(r, x);
            return r;
        }
        case ReduceOp::Lse: {
            double top = -kInf;
            for (double x : values) top = std::max(top, x);
            if (std::isinf(top)) return top;  // empty, all -inf, or a +inf: exp(x - top) would be NaN
            double s = 0;
            for (double x : values) s += std::exp(x - top);
            return top + std::log(s);
        }
    }
    throw InternalError("unknown reduce op");
}

}  // namespace coda
