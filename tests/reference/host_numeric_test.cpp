// Tests of the host bf16/f16 conversions against known bit patterns (signs, extremes, subnormals, ties to
// even, infinities, NaN), exhaustive round trips, and direct rounding of doubles by round_to_dtype.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "reference/host_numeric.hpp"

namespace coda {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST_CASE("bf16 conversions match known bit patterns", "[reference]") {
    CHECK(float_to_bf16_bits(1.0f) == 0x3f80);
    CHECK(float_to_bf16_bits(-2.5f) == 0xc020);
    CHECK(float_to_bf16_bits(0.0f) == 0x0000);
    CHECK(float_to_bf16_bits(-0.0f) == 0x8000);
    CHECK(bf16_bits_to_float(0x7f7f) == std::ldexp(255.0f / 128.0f, 127));  // largest finite bf16
    CHECK(float_to_bf16_bits(std::ldexp(255.0f / 128.0f, 127)) == 0x7f7f);
    CHECK(float_to_bf16_bits(std::numeric_limits<float>::max()) == 0x7f80);  // rounds up to infinity
    CHECK(bf16_bits_to_float(0x0001) == std::ldexp(1.0f, -133));             // smallest subnormal
    CHECK(float_to_bf16_bits(std::ldexp(1.0f, -133)) == 0x0001);
    CHECK(float_to_bf16_bits(std::numeric_limits<float>::denorm_min()) == 0x0000);
    // Ties to even: 1 + 2^-8 lies halfway between 0x3f80 (even) and 0x3f81.
    CHECK(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);
    CHECK(float_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);
    CHECK(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) == 0x3f81);
    CHECK(float_to_bf16_bits(kInf) == 0x7f80);
    CHECK(float_to_bf16_bits(-kInf) == 0xff80);
    const std::uint16_t nan = float_to_bf16_bits(std::numeric_limits<float>::quiet_NaN());
    CHECK((nan & 0x7f80) == 0x7f80);
    CHECK((nan & 0x007f) != 0);
    CHECK(std::isnan(bf16_bits_to_float(0x7fc1)));
    CHECK(bf16_bits_to_float(0xff80) == -kInf);
}

TEST_CASE("f16 conversions match known bit patterns", "[reference]") {
    CHECK(float_to_f16_bits(1.0f) == 0x3c00);
    CHECK(float_to_f16_bits(-2.5f) == 0xc100);
    CHECK(float_to_f16_bits(-0.0f) == 0x8000);
    CHECK(float_to_f16_bits(65504.0f) == 0x7bff);
    CHECK(f16_bits_to_float(0x7bff) == 65504.0f);
    CHECK(float_to_f16_bits(65519.0f) == 0x7bff);
    CHECK(float_to_f16_bits(65520.0f) == 0x7c00);  // the tie between 65504 and 2^16 goes to even: infinity
    CHECK(float_to_f16_bits(1e6f) == 0x7c00);
    CHECK(float_to_f16_bits(std::ldexp(1.0f, -14)) == 0x0400);  // smallest normal
    CHECK(float_to_f16_bits(std::ldexp(1.0f, -24)) == 0x0001);  // smallest subnormal
    CHECK(f16_bits_to_float(0x0001) == std::ldexp(1.0f, -24));
    CHECK(f16_bits_to_float(0x03ff) == std::ldexp(1023.0f, -24));  // largest subnormal
    CHECK(float_to_f16_bits(std::ldexp(1.0f, -25)) == 0x0000);     // tie between 0 and 2^-24: even is 0
    CHECK(float_to_f16_bits(std::ldexp(1.5f, -25)) == 0x0001);
    CHECK(float_to_f16_bits(std::ldexp(3.0f, -25)) == 0x0002);     // 1.5 units: tie, even is 2
    CHECK(float_to_f16_bits(std::ldexp(5.0f, -25)) == 0x0002);     // 2.5 units: tie, even is 2
    CHECK(float_to_f16_bits(std::ldexp(1.0f, -30)) == 0x0000);
    CHECK(float_to_f16_bits(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
    CHECK(float_to_f16_bits(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
    CHECK(float_to_f16_bits(kInf) == 0x7c00);
    CHECK(float_to_f16_bits(-kInf) == 0xfc00);
    const std::uint16_t nan = float_to_f16_bits(std::numeric_limits<float>::quiet_NaN());
    CHECK((nan & 0x7c00) == 0x7c00);
    CHECK((nan & 0x03ff) != 0);
    CHECK(std::isnan(f16_bits_to_float(0x7e00)));
    CHECK(f16_bits_to_float(0xfc00) == -kInf);
}

TEST_CASE("every bf16 and f16 bit pattern round-trips through float", "[reference]") {
    for (std::uint32_t b = 0; b <= 0xffff; ++b) {
        const auto bits = static_cast<std::uint16_t>(b);
        const float bf = bf16_bits_to_float(bits);
        const float h = f16_bits_to_float(bits);
        if (!std::isnan(bf)) REQUIRE(float_to_bf16_bits(bf) == bits);
        if (!std::isnan(h)) REQUIRE(float_to_f16_bits(h) == bits);
    }
}

TEST_CASE("conversions pick the nearest representable value", "[reference]") {
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> mantissa(-2.0f, 2.0f);
    std::uniform_int_distribution<int> exponent(-30, 17);
    for (int i = 0; i < 100000; ++i) {
        const float x = std::ldexp(mantissa(rng), exponent(rng));
        const float h = f16_bits_to_float(float_to_f16_bits(x));
        const float b = bf16_bits_to_float(float_to_bf16_bits(x));
        // Neither neighbour of the chosen value is closer to x.
        for (int step : {-1, 1}) {
            const float hn = f16_bits_to_float(static_cast<std::uint16_t>(float_to_f16_bits(x) + step));
            const float bn = bf16_bits_to_float(static_cast<std::uint16_t>(float_to_bf16_bits(x) + step));
            if (std::isfinite(hn) && std::isfinite(h)) REQUIRE(std::fabs(h - x) <= std::fabs(hn - x));
            if (std::isfinite(bn)) REQUIRE(std::fabs(b - x) <= std::fabs(bn - x));
        }
        // round_to_dtype agrees with the bit conversions on values that are floats already.
        REQUIRE(round_to_dtype(x, DType::BF16) == static_cast<double>(b));
        if (std::isfinite(h)) REQUIRE(round_to_dtype(x, DType::F16) == static_cast<double>(h));
    }
}

TEST_CASE("round_to_dtype rounds doubles once, directly", "[reference]") {
    // Just above the bf16 tie 1 + 2^-8: rounding through f32 first would land on the tie and go to 1.0.
    const double above_tie = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
    CHECK(round_to_dtype(above_tie, DType::BF16) == 1.0 + std::ldexp(1.0, -7));
    CHECK(round_to_dtype(1.0 + std::ldexp(1.0, -8), DType::BF16) == 1.0);
    CHECK(round_to_dtype(0.1, DType::F32) == static_cast<double>(0.1f));
    CHECK(round_to_dtype(1e300, DType::F32) == std::numeric_limits<double>::infinity());
    CHECK(round_to_dtype(-70000.0, DType::F16) == -std::numeric_limits<double>::infinity());
    CHECK(round_to_dtype(65519.99, DType::F16) == 65504.0);
    CHECK(round_to_dtype(std::ldexp(1.0, -26), DType::F16) == 0.0);
    CHECK(round_to_dtype(std::ldexp(3.0, -26), DType::F16) == std::ldexp(1.0, -24));
    CHECK(round_to_dtype(-7.0, DType::I32) == -7.0);
    CHECK(std::isnan(round_to_dtype(std::nan(""), DType::BF16)));
}

}  // namespace
}  // namespace coda
