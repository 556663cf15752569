// sin and cos in fp32 without a double-precision or local-memory slow path, for the angles of rotary embeddings
// (pos_i * theta_j, up to 2^20 and beyond). Plain C++ that compiles for the device (NVRTC, through numeric.cuh)
// and for the host, where tests/codegen/angle_test.cpp sweeps it against double: every step is an fmaf or a
// single rounded operation, so host and device compute the same bits.
//
// sincos_of_product(a, b) is sin and cos of the EXACT product a * b, not of its fp32 rounding: at 2^20 one ulp
// of the rounded product is 0.0625 rad, while the exact product of two floats is hi + lo (hi = a * b,
// lo = fma(a, b, -hi)). The reduction subtracts k * pi/2, pi/2 split in three floats (Cody-Waite): the first
// step hi - k * C1 is exact with one FMA (both are multiples of ulp(C1) = 2^-23 once |hi| >= 1, and the
// difference is below 2), the small terms lo - k * (C2 + C3) are summed first, then added once. Taylor
// polynomials to degree 11 (sin) and 12 (cos) cover |r| <= 1.2: r exceeds pi/4 by the rounding of k and by lo,
// to at most 0.95 below |a * b| = 2^21 and 1.2 below 2^22.
//
// Maximum absolute error against double, measured on the host: 7.4e-8 for sin and cos (0.6 ulp of 1) over
// EVERY position 0..2^20 and every theta_j = base^(-2j/head_dim) of base 1e4, 5e5, 1e6 and head_dim 64, 128;
// 1.3e-7 over 2e7 random products up to |a * b| = 2^22. tests/codegen/angle_test.cpp asserts 1e-7 and 1.5e-7
// on a strided subset. Beyond |a * b| = 2^22 the rounding shift below no longer yields k: not supported.
#pragma once

#include "coda/kernel_abi.cuh"  // CODA_HOST_DEVICE

#if !defined(__CUDACC_RTC__)
#include <cmath>
#include <cstring>
#endif

namespace coda {

struct SinCos {
    float sin;
    float cos;
};

namespace angle {

constexpr float kTwoOverPi = 0.636619772367581343f;
// pi/2 = kPiOverTwo1 + kPiOverTwo2 + kPiOverTwo3 to about 2^-72; kPiOverTwo1 = fl(pi/2).
constexpr float kPiOverTwo1 = 1.57079637050628662109375f;
constexpr float kPiOverTwo2 = -4.3711388286737929e-8f;
constexpr float kPiOverTwo3 = -1.7151245100058819e-15f;

// sin(r) and cos(r) for |r| <= 1.2; the truncation errors (r^13/13!, r^14/14!) are below 2e-9.
CODA_HOST_DEVICE inline float sin_poly(float r) {
    const float r2 = r * r;
    float p = -2.5052108385441720e-8f;               // -1/11!
    p = fmaf(p, r2, 2.7557319223985893e-6f);         // 1/9!
    p = fmaf(p, r2, -1.9841269841269841e-4f);        // -1/7!
    p = fmaf(p, r2, 8.3333333333333333e-3f);         // 1/5!
    p = fmaf(p, r2, -1.6666666666666667e-1f);        // -1/3!
    return fmaf(p * r2, r, r);
}

CODA_HOST_DEVICE inline float cos_poly(float r) {
    const float r2 = r * r;
    float p = -2.0876756987868099e-9f;               // -1/12!
    p = fmaf(p, r2, 2.7557319223985891e-7f);         // 1/10!
    p = fmaf(p, r2, -2.4801587301587302e-5f);        // -1/8!
    p = fmaf(p, r2, 1.3888888888888889e-3f);         // 1/6!
    p = fmaf(p, r2, -4.1666666666666667e-2f);        // -1/4!
    p = fmaf(p, r2, 0.5f);                           // 1/2!
    return fmaf(-p, r2, 1.0f);
}

// Adding 1.5 * 2^23 rounds a float below 2^22 in magnitude to an integer, which lands in the low mantissa bits:
// k and its quadrant from one FFMA, one FADD and a register move, where rintf and a float-to-int conversion
// would take two instructions of the SM's slower conversion pipe per angle.
constexpr float kRoundingShift = 12582912.0f;

CODA_HOST_DEVICE inline int low_bits(float x) {
#if defined(__CUDA_ARCH__)
    return __float_as_int(x);
#else
    int bits;
    std::memcpy(&bits, &x, sizeof bits);
    return bits;
#endif
}

// sin and cos of hi + lo, where |lo| <= ulp(hi) / 2 (or lo = 0) and |hi| <= 2^22.
CODA_HOST_DEVICE inline SinCos sincos_of_sum(float hi, float lo) {
    const float shifted = fmaf(hi, kTwoOverPi, kRoundingShift);
    const float k = shifted - kRoundingShift;  // exact: k = rint(hi * 2/pi)
    const float r1 = fmaf(-k, kPiOverTwo1, hi);  // exact
    const float tail = fmaf(-k, kPiOverTwo3, fmaf(-k, kPiOverTwo2, lo));
    const float r = r1 + tail;
    const float s = sin_poly(r), c = cos_poly(r);
    // x = r + k * pi/2: quadrant 1 swaps sin and cos, quadrant 2 negates both, quadrant 3 both.
    const int quadrant = low_bits(shifted) & 3;  // the mantissa's last bits are k's (two's complement mod 4)
    const float sin_x = (quadrant & 1) ? c : s;
    const float cos_x = (quadrant & 1) ? s : c;
    return {(quadrant & 2) ? -sin_x : sin_x, ((quadrant + 1) & 2) ? -cos_x : cos_x};
}

}  // namespace angle

// sin and cos of the exact product a * b (see above).
CODA_HOST_DEVICE inline SinCos sincos_of_product(float a, float b) {
    const float hi = a * b;
    return angle::sincos_of_sum(hi, fmaf(a, b, -hi));
}

CODA_HOST_DEVICE inline SinCos sincos(float x) { return angle::sincos_of_sum(x, 0.0f); }

}  // namespace coda
