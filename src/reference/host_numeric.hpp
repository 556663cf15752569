// Exact host-side conversions between f32 and the 16-bit storage formats (round-to-nearest-even, with
// subnormals, infinities and NaN), and the value a number takes once stored in a dtype.
#pragma once

#include <cstdint>

#include "coda/types.hpp"

namespace coda {

std::uint16_t float_to_bf16_bits(float x);
float bf16_bits_to_float(std::uint16_t bits);
std::uint16_t float_to_f16_bits(float x);
float f16_bits_to_float(std::uint16_t bits);

// The value `x` has after being stored in `d`, rounded once, directly from double (no double rounding
// through f32). F32: the nearest float. I32: `x` itself, which must be an integer (indices, labels).
double round_to_dtype(double x, DType d);

}  // namespace coda
