// Spelling of IR names, literals and types in generated CUDA. Float literals are hex floats so that a
// constant reaches the kernel bit for bit, whatever the compiler's decimal conversion does.
#include "codegen/cuda_spelling.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "coda/error.hpp"

namespace coda::codegen {

std::string value_identifier(const Graph& g, int id) {
    const Node& n = g.node(id);
    return n.name.empty() ? fmt::format("v{}", id) : fmt::format("v{}_{}", id, n.name);
}

std::string float_literal(float x) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &x, sizeof bits);
    const bool negative = (bits >> 31) != 0;
    const std::uint32_t exponent = (bits >> 23) & 0xffu;
    const std::uint32_t mantissa = bits & 0x7fffffu;
    if (exponent == 0xffu) {
        if (mantissa != 0) throw InternalError("a NaN constant reached codegen; validation should reject it");
        return negative ? "(-__int_as_float(0x7f800000))" : "__int_as_float(0x7f800000)";
    }
    const char* sign = negative ? "-" : "";
    if (exponent == 0 && mantissa == 0) return fmt::format("{}0.0f", sign);
    // 23 mantissa bits shifted left by one fill six hex digits; trailing zero digits are dropped.
    std::string digits = fmt::format("{:06x}", mantissa << 1);
    while (!digits.empty() && digits.back() == '0') digits.pop_back();
    const std::string fraction = digits.empty() ? "" : "." + digits;
    if (exponent == 0) return fmt::format("{}0x0{}p-126f", sign, fraction);
    const int power = static_cast<int>(exponent) - 127;
    return fmt::format("{}0x1{}p{:+d}f", sign, fraction, power);
}

int lanes(Width w) { return values_per_pair(w); }

int lanes(const ValueType& t) {
    switch (t.kind) {
        case Kind::Tile:
        case Kind::Col: return lanes(t.width);
        case Kind::Row:
        case Kind::Scalar: return 1;
        case Kind::Sink: break;
    }
    throw InternalError("a sink has no lanes");
}

std::string_view register_type(const ValueType& t) {
    switch (t.scalar) {
        case Scalar::F32: return "float";
        case Scalar::I32: return "int";
        case Scalar::None: break;
    }
    throw InternalError("a value without a scalar type reached codegen");
}

std::string_view storage_type(DType d) {
    switch (d) {
        case DType::BF16: return "coda::bf16";
        case DType::F16: return "coda::f16";
        case DType::F32: return "float";
        case DType::I32: return "int";
        case DType::E4M3: return "coda::e4m3";
        case DType::E5M2: return "coda::e5m2";
    }
    throw InternalError("unknown dtype");
}

std::string_view red_op(ReduceOp r) {
    switch (r) {
        case ReduceOp::Sum: return "coda::RedOp::Sum";
        case ReduceOp::Max: return "coda::RedOp::Max";
        case ReduceOp::Min: return "coda::RedOp::Min";
        case ReduceOp::SumSq: return "coda::RedOp::SumSq";
        case ReduceOp::Lse: return "coda::RedOp::Lse";
    }
    throw InternalError("unknown reduce op");
}

std::string reducer(ReduceOp r) { return fmt::format("coda::Reducer<{}>", red_op(r)); }

}  // namespace coda::codegen
