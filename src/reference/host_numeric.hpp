// Exact host-side conversions between f32 and the 16- and 8-bit storage formats (round-to-nearest-even, with
// subnormals, infinities and NaN), and the value a number takes once stored in a dtype.
#pragma once

#include <cstdint>

#include "coda/types.hpp"

namespace coda {

std::uint16_t float_to_bf16_bits(float x);
float bf16_bits_to_float(std::uint16_t bits);
std::uint16_t float_to_f16_bits(float x);
float f16_bits_to_float(std::uint16_t bits);

// OCP FP8. Encoding saturates like the device's cvt.rn.satfinite: a finite value beyond the largest finite
// magnitude, and an infinity, become that magnitude with its sign (448 for e4m3, 57344 for e5m2). NaN becomes
// S.1111111 (0x7f with the sign bit): e4m3's only NaN, and one of e5m2's NaNs, chosen canonical for both.
std::uint8_t float_to_e4m3_bits(float x);
float e4m3_bits_to_float(std::uint8_t bits);
std::uint8_t float_to_e5m2_bits(float x);
float e5m2_bits_to_float(std::uint8_t bits);

// The value `x` has after being stored in `d`, rounded once, directly from double (no double rounding
// through f32). F32: the nearest float. E4M3, E5M2: saturating as their encoding does (infinities included).
// I32: `x` itself, which must be an integer (indices, labels).
double round_to_dtype(double x, DType d);

}  // namespace coda
