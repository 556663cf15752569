// Tests of the host bf16/f16/e4m3/e5m2 conversions against known bit patterns (signs, extremes, subnormals, ties
// to even, infinities, NaN, FP8 saturation), exhaustive round trips, and direct rounding of doubles by
// round_to_dtype; and FP8 through verify's encode/decode, which the device checks use.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "reference/host_numeric.hpp"
#include "verify/host_data.hpp"

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

TEST_CASE("every e4m3 and e5m2 code round-trips through float", "[reference]") {
    for (std::uint32_t c = 0; c <= 0xff; ++c) {
        const auto bits = static_cast<std::uint8_t>(c);
        const float e4 = e4m3_bits_to_float(bits);
        const float e5 = e5m2_bits_to_float(bits);
        // e4m3 has only S.1111.111 as NaN; e5m2 has S.11111.mm with mm != 0.
        REQUIRE(std::isnan(e4) == ((c & 0x7f) == 0x7f));
        REQUIRE(std::isnan(e5) == ((c & 0x7c) == 0x7c && (c & 0x03) != 0));
        if (!std::isnan(e4)) {
            REQUIRE(float_to_e4m3_bits(e4) == bits);
            REQUIRE(std::signbit(e4) == ((c & 0x80) != 0));  // -0 included
            REQUIRE(round_to_dtype(e4, DType::E4M3) == static_cast<double>(e4));
        }
        if (!std::isnan(e5) && !std::isinf(e5)) {
            REQUIRE(float_to_e5m2_bits(e5) == bits);
            REQUIRE(std::signbit(e5) == ((c & 0x80) != 0));
            REQUIRE(round_to_dtype(e5, DType::E5M2) == static_cast<double>(e5));
        }
        // Decoding is monotonic in the magnitude code: each positive finite value exceeds the previous one.
        if (c > 0 && c < 0x7f) REQUIRE(e4 > e4m3_bits_to_float(static_cast<std::uint8_t>(c - 1)));
        if (c > 0 && c < 0x7c) REQUIRE(e5 > e5m2_bits_to_float(static_cast<std::uint8_t>(c - 1)));
    }
}

TEST_CASE("e4m3 conversions match known values", "[reference]") {
    CHECK(e4m3_bits_to_float(0x38) == 1.0f);
    CHECK(float_to_e4m3_bits(1.0f) == 0x38);
    CHECK(float_to_e4m3_bits(-2.5f) == 0xc2);
    CHECK(float_to_e4m3_bits(-0.0f) == 0x80);
    CHECK(e4m3_bits_to_float(0x7e) == 448.0f);  // largest finite
    CHECK(e4m3_bits_to_float(0x08) == std::ldexp(1.0f, -6));  // smallest normal
    CHECK(e4m3_bits_to_float(0x07) == std::ldexp(7.0f, -9));  // largest subnormal
    CHECK(e4m3_bits_to_float(0x01) == std::ldexp(1.0f, -9));  // smallest subnormal
    CHECK(float_to_e4m3_bits(std::ldexp(1.0f, -9)) == 0x01);
    CHECK(float_to_e4m3_bits(std::ldexp(1.0f, -10)) == 0x00);  // tie between 0 and 2^-9: even is 0
    CHECK(float_to_e4m3_bits(-std::ldexp(1.0f, -10)) == 0x80);
    CHECK(float_to_e4m3_bits(std::ldexp(1.0f, -10) * 1.0001f) == 0x01);
    CHECK(float_to_e4m3_bits(std::ldexp(3.0f, -10)) == 0x02);  // 1.5 units: tie, even is 2
    CHECK(float_to_e4m3_bits(std::ldexp(15.0f, -10)) == 0x08);  // 7.5 units: tie, rounds up to the smallest normal
    CHECK(float_to_e4m3_bits(std::numeric_limits<float>::denorm_min()) == 0x00);
    // Ties to even between 1.0 (0x38) and 1.125 (0x39), and between 1.125 and 1.25 (0x3a).
    CHECK(float_to_e4m3_bits(1.0625f) == 0x38);
    CHECK(float_to_e4m3_bits(1.0626f) == 0x39);
    CHECK(float_to_e4m3_bits(1.1875f) == 0x3a);
    CHECK(float_to_e4m3_bits(1.96875f) == 0x40);  // the tie above 1.875 carries into the next binade: 2.0
    // Saturation: finite overflow and infinities become +-448; there is no infinity.
    CHECK(float_to_e4m3_bits(464.0f) == 0x7e);  // the tie above 448 (even: 448 anyway)
    CHECK(float_to_e4m3_bits(479.0f) == 0x7e);
    CHECK(float_to_e4m3_bits(1000.0f) == 0x7e);
    CHECK(float_to_e4m3_bits(-1000.0f) == 0xfe);
    CHECK(float_to_e4m3_bits(std::numeric_limits<float>::max()) == 0x7e);
    CHECK(float_to_e4m3_bits(kInf) == 0x7e);
    CHECK(float_to_e4m3_bits(-kInf) == 0xfe);
    CHECK(float_to_e4m3_bits(std::numeric_limits<float>::quiet_NaN()) == 0x7f);
    CHECK(float_to_e4m3_bits(-std::numeric_limits<float>::quiet_NaN()) == 0xff);
    CHECK(std::isnan(e4m3_bits_to_float(0xff)));
}

TEST_CASE("e5m2 conversions match known values", "[reference]") {
    CHECK(e5m2_bits_to_float(0x3c) == 1.0f);
    CHECK(float_to_e5m2_bits(1.0f) == 0x3c);
    CHECK(float_to_e5m2_bits(-2.5f) == 0xc1);
    CHECK(float_to_e5m2_bits(-0.0f) == 0x80);
    CHECK(e5m2_bits_to_float(0x7b) == 57344.0f);  // largest finite
    CHECK(e5m2_bits_to_float(0x7c) == kInf);
    CHECK(e5m2_bits_to_float(0xfc) == -kInf);
    CHECK(e5m2_bits_to_float(0x04) == std::ldexp(1.0f, -14));  // smallest normal
    CHECK(e5m2_bits_to_float(0x01) == std::ldexp(1.0f, -16));  // smallest subnormal
    CHECK(float_to_e5m2_bits(std::ldexp(1.0f, -16)) == 0x01);
    CHECK(float_to_e5m2_bits(std::ldexp(1.0f, -17)) == 0x00);  // tie between 0 and 2^-16: even is 0
    CHECK(float_to_e5m2_bits(std::ldexp(3.0f, -17)) == 0x02);
    CHECK(float_to_e5m2_bits(std::ldexp(7.0f, -17)) == 0x04);  // 3.5 units: tie, rounds up to the smallest normal
    // Ties to even between 1.0 (0x3c) and 1.25 (0x3d), and between 1.25 and 1.5 (0x3e).
    CHECK(float_to_e5m2_bits(1.125f) == 0x3c);
    CHECK(float_to_e5m2_bits(1.375f) == 0x3e);
    CHECK(float_to_e5m2_bits(1.875f) == 0x40);  // carries into the next binade: 2.0
    // Saturation (satfinite): finite overflow and infinities become +-57344, never the infinity code.
    CHECK(float_to_e5m2_bits(61440.0f) == 0x7b);  // the tie above 57344
    CHECK(float_to_e5m2_bits(1e6f) == 0x7b);
    CHECK(float_to_e5m2_bits(-1e6f) == 0xfb);
    CHECK(float_to_e5m2_bits(kInf) == 0x7b);
    CHECK(float_to_e5m2_bits(-kInf) == 0xfb);
    CHECK(float_to_e5m2_bits(std::numeric_limits<float>::quiet_NaN()) == 0x7f);
    CHECK(float_to_e5m2_bits(-std::numeric_limits<float>::quiet_NaN()) == 0xff);
    CHECK(std::isnan(e5m2_bits_to_float(0x7d)));
    CHECK(std::isnan(e5m2_bits_to_float(0xfe)));
}

TEST_CASE("e4m3 and e5m2 encoding picks the nearest value and agrees with round_to_dtype", "[reference]") {
    std::mt19937 rng(13);
    std::uniform_real_distribution<float> mantissa(-2.0f, 2.0f);
    std::uniform_int_distribution<int> exponent(-20, 18);
    for (int i = 0; i < 100000; ++i) {
        const float x = std::ldexp(mantissa(rng), exponent(rng));
        for (const DType d : {DType::E4M3, DType::E5M2}) {
            const bool e4 = d == DType::E4M3;
            const std::uint8_t code = e4 ? float_to_e4m3_bits(x) : float_to_e5m2_bits(x);
            const auto decode = [e4](std::uint32_t c) {
                const auto bits = static_cast<std::uint8_t>(c);
                return e4 ? e4m3_bits_to_float(bits) : e5m2_bits_to_float(bits);
            };
            const float v = decode(code);
            const float max_finite = e4 ? 448.0f : 57344.0f;
            REQUIRE(std::isfinite(v));
            REQUIRE(std::signbit(v) == std::signbit(x));
            REQUIRE(round_to_dtype(x, d) == static_cast<double>(v));
            if (std::fabs(x) >= max_finite) {
                REQUIRE(std::fabs(v) == max_finite);
                continue;
            }
            // Neither neighbour in magnitude is closer to x; at an exact tie the chosen code is even.
            const std::uint32_t magnitude = code & 0x7fu;
            for (const std::uint32_t other : {magnitude - 1, magnitude + 1}) {
                if (other > 0x7fu) continue;  // none below zero
                const float n = std::copysign(decode(other), x);
                if (!std::isfinite(n)) continue;
                REQUIRE(std::fabs(v - x) <= std::fabs(n - x));
                if (std::fabs(v - x) == std::fabs(n - x)) REQUIRE((code & 1u) == 0);
            }
        }
    }
    // round_to_dtype rounds doubles once and saturates the same way.
    CHECK(round_to_dtype(1.0625 + 1e-12, DType::E4M3) == 1.125);
    CHECK(round_to_dtype(1.0625, DType::E4M3) == 1.0);
    CHECK(round_to_dtype(1e300, DType::E4M3) == 448.0);
    CHECK(round_to_dtype(-std::numeric_limits<double>::infinity(), DType::E4M3) == -448.0);
    CHECK(round_to_dtype(1e300, DType::E5M2) == 57344.0);
    CHECK(round_to_dtype(std::numeric_limits<double>::infinity(), DType::E5M2) == 57344.0);
    CHECK(round_to_dtype(std::ldexp(3.0, -18), DType::E5M2) == std::ldexp(1.0, -16));
    CHECK(std::signbit(round_to_dtype(-std::ldexp(1.0, -20), DType::E5M2)));
    CHECK(std::isnan(round_to_dtype(std::nan(""), DType::E4M3)));
    CHECK(std::isnan(round_to_dtype(std::nan(""), DType::E5M2)));
}

// verify's encode/decode have no test file of their own; FP8 through them is checked here, next to the conversions.
TEST_CASE("verify encodes and decodes e4m3 and e5m2 one byte per value", "[verify]") {
    for (const DType d : {DType::E4M3, DType::E5M2}) {
        // Every non-NaN code's value, decoded from the bytes 0..255, encodes back to the same bytes.
        std::vector<std::uint8_t> all(256);
        for (std::size_t c = 0; c < all.size(); ++c) all[c] = static_cast<std::uint8_t>(c);
        const std::vector<double> values = verify::decode(all, d);
        REQUIRE(values.size() == 256);
        std::vector<double> finite;
        std::vector<std::uint8_t> finite_codes;
        for (std::size_t c = 0; c < values.size(); ++c)
            if (std::isfinite(values[c])) {
                finite.push_back(values[c]);
                finite_codes.push_back(static_cast<std::uint8_t>(c));
            }
        CHECK(verify::encode(finite, d) == finite_codes);
        // Values that are not exact are rounded once from the double, saturated, and NaN stays NaN.
        const std::vector<double> inexact = {1.0625 + 1e-12, -1e9, std::numeric_limits<double>::infinity(),
                                             std::nan("")};
        const std::vector<double> back = verify::decode(verify::encode(inexact, d), d);
        REQUIRE(back.size() == inexact.size());
        for (std::size_t i = 0; i + 1 < inexact.size(); ++i) CHECK(back[i] == round_to_dtype(inexact[i], d));
        CHECK(std::isnan(back.back()));
        // Random draws are exact in the dtype and not all zero.
        std::mt19937_64 rng(5);
        const auto drawn = verify::random_values(rng, 1000, d, verify::Distribution::Uniform, 0.25);
        int nonzero = 0;
        for (double v : drawn) {
            REQUIRE(round_to_dtype(v, d) == v);
            REQUIRE(std::fabs(v) <= 0.25);
            nonzero += v != 0.0;
        }
        CHECK(nonzero > 900);
        CHECK(verify::decode(verify::encode(drawn, d), d) == drawn);
    }
}

}  // namespace
}  // namespace coda
