// Bit-exact f32 <-> bf16/f16/e4m3/e5m2 conversions for the CPU reference and for tests that prepare device inputs.
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

// FP8 storage saturates (satfinite): finite overflow and infinities land on the largest finite magnitude.
double round_to_saturating_format(double x, int mantissa_bits, int min_exponent, double max_finite) {
    if (std::isnan(x)) return x;
    const double r = round_to_format(x, mantissa_bits, min_exponent, max_finite);
    return std::fabs(r) > max_finite ? std::copysign(max_finite, x) : r;
}

// An 8-bit float S.E..E.M..M with `mantissa_bits` and exponent `bias`, rounded to nearest even, saturating at
// the magnitude code `max_code`; NaN is S.1111111 (see the header).
std::uint8_t float_to_fp8_bits(float x, int mantissa_bits, int bias, std::uint32_t max_code) {
    const std::uint32_t b = bits_of(x);
    const auto sign = static_cast<std::uint8_t>((b >> 24) & 0x80u);
    const std::uint32_t magnitude = b & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return static_cast<std::uint8_t>(sign | 0x7fu);
    if (magnitude == 0x7f800000u) return static_cast<std::uint8_t>(sign | max_code);
    const int exponent = static_cast<int>(magnitude >> 23) - 127;  // f32 subnormals (-127) fall below any fp8 one
    const int min_exponent = 1 - bias;                              // of the smallest fp8 normal
    // Below half the smallest subnormal 2^(min_exponent - mantissa_bits): rounds to zero.
    if (exponent < min_exponent - mantissa_bits - 1) return sign;
    // Count units of the fp8 quantum at x's exponent (2^(min_exponent - mantissa_bits) for subnormals): a shift
    // of the 24-bit significand by 23 - mantissa_bits for normals, up to 24 at the bottom of the subnormals.
    const int kept = std::max(exponent, min_exponent);
    const std::uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    const int shift = 23 - mantissa_bits + (kept - exponent);
    std::uint32_t units = significand >> shift;
    const std::uint32_t rest = significand & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (units & 1u))) ++units;
    // A normal's units include the leading one (2^m .. 2^(m+1)), so adding them to the biased exponent less
    // one gives exponent and mantissa fields at once; a carry out of the mantissa bumps the exponent, and a
    // subnormal (field 0) rounding up to 2^m becomes the smallest normal.
    const std::uint32_t code = (static_cast<std::uint32_t>(kept + bias - 1) << mantissa_bits) + units;
    return static_cast<std::uint8_t>(sign | std::min(code, max_code));
}

// The finite value of an 8-bit float's exponent field and mantissa.
float fp8_finite_value(std::uint8_t bits, int mantissa_bits, int bias) {
    const int exponent = (bits & 0x7f) >> mantissa_bits;
    const int mantissa = bits & ((1 << mantissa_bits) - 1);
    const float magnitude = exponent == 0
                                ? std::ldexp(static_cast<float>(mantissa), 1 - bias - mantissa_bits)
                                : std::ldexp(static_cast<float>(mantissa + (1 << mantissa_bits)),
                                             exponent - bias - mantissa_bits);
    return (bits & 0x80u) ? -magnitude : magnitude;
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

// e4m3: bias 7, no infinity; S.1111.111 is NaN, so S.1111.110 = 448 is the largest finite magnitude.
std::uint8_t float_to_e4m3_bits(float x) { return float_to_fp8_bits(x, 3, 7, 0x7eu); }

float e4m3_bits_to_float(std::uint8_t bits) {
    if ((bits & 0x7fu) == 0x7fu) return std::numeric_limits<float>::quiet_NaN();
    return fp8_finite_value(bits, 3, 7);
}

// e5m2: bias 15, IEEE-like: exponent field 31 holds infinity (mantissa 0) and NaN; 57344 is the largest finite.
std::uint8_t float_to_e5m2_bits(float x) { return float_to_fp8_bits(x, 2, 15, 0x7bu); }

float e5m2_bits_to_float(std::uint8_t bits) {
    if ((bits & 0x7cu) == 0x7cu) {
        const float inf = std::numeric_limits<float>::infinity();
        if ((bits & 0x03u) != 0) return std::numeric_limits<float>::quiet_NaN();
        return (bits & 0x80u) ? -inf : inf;
    }
    return fp8_finite_value(bits, 2, 15);
}

double round_to_dtype(double x, DType d) {
    switch (d) {
        case DType::F32: return round_to_format(x, 23, -126, static_cast<double>(std::numeric_limits<float>::max()));
        case DType::BF16: return round_to_format(x, 7, -126, 3.3895313892515355e38);
        case DType::F16: return round_to_format(x, 10, -14, 65504.0);
        case DType::E4M3: return round_to_saturating_format(x, 3, -6, 448.0);
        case DType::E5M2: return round_to_saturating_format(x, 2, -14, 57344.0);
        case DType::I32:
            if (std::isfinite(x) && x == std::trunc(x)) return x;
            throw InternalError(fmt::format("round_to_dtype(i32) of the non-integer {}", x));
    }
    throw InternalError("unknown dtype");
}

}  // namespace coda
