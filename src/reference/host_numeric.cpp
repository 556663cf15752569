// Bit-exact f32 <-> bf16/f16 conversions for the CPU reference and for tests that prepare device inputs.
// Written from the IEEE 754 formats directly, independent of the device code in templates/coda/numeric.cuh.
#include "reference/host_numeric.hpp"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "coda/error.hpp"

namespace coda {
namespace {

std::uint32_t bits_of(float x) {
    std::uint32_t b = 0;
    std::memcpy(&b, &x, sizeof b);
    return b;
}

float float_of(std::uint32_t b) {
    float x = 0;
    std::memcpy(&x, &b, sizeof x);
    return x;
}

// Rounds x to `mantissa_bits` bits after the leading one, with the exponent clamped below at `min_exponent`
// (gradual underflow) and overflow to infinity above `max_finite`. Ties go to even.
double round_to_format(double x, int mantissa_bits, int min_exponent, double max_finite) {
    if (!std::isfinite(x) || x == 0.0) return x;
    int e = 0;
    std::frexp(x, &e);  // |x| = f * 2^e with f in [0.5, 1): the leading bit has weight 2^(e-1)
    const int quantum = std::max(e - 1, min_exponent) - mantissa_bits;
    const double r = std::ldexp(std::nearbyint(std::ldexp(x, -quantum)), quantum);
    if (std::fabs(r) > max_finite) return std::copysign(std::numeric_limits<double>::infinity(), x);
    return r;
}

}  // namespace

std::uint16_t float_to_bf16_bits(float x) {
    const std::uint32_t b = bits_of(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((b >> 16) | 0x0040u);  // quiet NaN
    // Adding 0x7fff plus the lowest kept bit rounds to nearest with ties to even; a carry out of the
    // mantissa correctly bumps the exponent (up to infinity).
    const std::uint32_t rounded = b + 0x7fffu + ((b >> 16) & 1u);
    return static_cast<std::uint16_t>(rounded >> 16);
}

float bf16_bits_to_float(std::uint16_t bits) { return float_of(static_cast<std::uint32_t>(bits) << 16); }

std::uint16_t float_to_f16_bits(float x) {
    const std::uint32_t b = bits_of(x);
    const auto sign = static_cast<std::uint16_t>((b >> 16) & 0x8000u);
    const std::uint32_t magnitude = b & 0x7fffffffu;
    if (magnitude > 0x7f800000u)  // NaN: keep the top payload bits, force quiet
        return static_cast<std::uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
    if (magnitude == 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u);
    const int exponent = static_cast<int>(magnitude >> 23) - 127;
    if (exponent > 15) return static_cast<std::uint16_t>(sign | 0x7c00u);
    if (exponent >= -14) {  // a normal f16: drop 13 mantissa bits
        const std::uint32_t mantissa = magnitude & 0x7fffffu;
        std::uint32_t h = (static_cast<std::uint32_t>(exponent + 15) << 10) | (mantissa >> 13);
        const std::uint32_t rest = mantissa & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // may carry into infinity: correct
        return static_cast<std::uint16_t>(sign | h);
    }
    if (exponent < -25) return sign;  // below half the smallest subnormal: rounds to zero
    // A subnormal f16 counts units of 2^-24; the f32 value is (1.mantissa) * 2^exponent.
    const std::uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    const int shift = -(exponent + 1);  // 14 .. 24
    std::uint32_t h = significand >> shift;
    const std::uint32_t rest = significand & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (h & 1u))) ++h;
    return static_cast<std::uint16_t>(sign | h);
}

float f16_bits_to_float(std::uint16_t bits) {
    const bool negative = (bits & 0x8000u) != 0;
    const int exponent = (bits >> 10) & 0x1f;
    const int mantissa = bits & 0x3ff;
    float magnitude = 0;
    if (exponent == 0x1f) {
        magnitude = mantissa == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
    } else if (exponent == 0) {
        magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    } else {
        magnitude = std::ldexp(static_cast<float>(mantissa + 1024), exponent - 25);
    }
    return negative ? -magnitude : magnitude;
}

double round_to_dtype(double x, DType d) {
    switch (d) {
        case DType::F32: return round_to_format(x, 23, -126, static_cast<double>(std::numeric_limits<float>::max()));
        case DType::BF16: return round_to_format(x, 7, -126, 3.3895313892515355e38);
        case DType::F16: return round_to_format(x, 10, -14, 65504.0);
        case DType::I32:
            if (std::isfinite(x) && x == std::trunc(x)) return x;
            throw InternalError(fmt::format("round_to_dtype(i32) of the non-integer {}", x));
    }
    throw InternalError("unknown dtype");
}

}  // namespace coda
