// An exact FP8 encoder for tests: the e4m3 (OCP E4M3FN) and e5m2 byte of a double, rounded once to nearest even
// and saturating as cvt.rn.satfinite does. Built from a table of every code's value, sharing nothing with the
// library's conversions (src/reference/host_numeric.cpp), so that it can judge them and the device's stores.
#pragma once

#include <cstdint>

#include "coda/types.hpp"

namespace coda::test {

// The byte `x` is stored as in `fp8` (DType::E4M3 or DType::E5M2): the nearest finite value, ties to the even code;
// anything beyond the largest finite magnitude (448, 57344), infinities included, saturates to it with x's sign;
// below half the smallest subnormal, a zero of x's sign. NaN gives 0x7f, a NaN in both formats.
std::uint8_t exact_fp8_byte(double x, DType fp8);

// The value of `byte`: NaN for NaN codes, +-infinity for e5m2's infinities.
double exact_fp8_value(std::uint8_t byte, DType fp8);

bool is_fp8_nan(std::uint8_t byte, DType fp8);

// Whether x lies exactly halfway between two adjacent finite values of `fp8` (its sign aside), zero and the
// smallest subnormal included: where an input rounded once more on its way (an f32 product) may go either way.
// False beyond the largest finite magnitude, where every value saturates to it.
bool is_fp8_tie(double x, DType fp8);

double fp8_largest(DType fp8);             // 448, 57344
double fp8_smallest_subnormal(DType fp8);  // 2^-9, 2^-16
double fp8_smallest_normal(DType fp8);     // 2^-6, 2^-14

}  // namespace coda::test
