// Tests of the test-only exact FP8 encoder (tests/support/fp8_exact.hpp) on values checked by hand: the largest
// finite values and saturation past them, subnormals, ties to even, signs, NaN and infinities.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "support/fp8_exact.hpp"

namespace coda::test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST_CASE("exact e4m3 bytes: 448 is the largest, everything past it saturates", "[fp8_exact]") {
    const DType d = DType::E4M3;
    CHECK(fp8_largest(d) == 448.0);
    CHECK(exact_fp8_byte(448.0, d) == 0x7e);  // S.1111.110 = 1.75 * 2^8; S.1111.111 is NaN
    // 480 (1.875 * 2^8) would be the next value, so 464 is halfway to it; satfinite takes all of them to 448.
    for (double x : {449.0, 464.0, 465.0, 480.0, 1e6, 1e300, kInf}) {
        INFO(x);
        CHECK(exact_fp8_byte(x, d) == 0x7e);
        CHECK(exact_fp8_byte(-x, d) == 0xfe);
        CHECK_FALSE(is_fp8_tie(x, d));
    }
    // 432 is halfway between 416 (0x7d) and 448 (0x7e): the even code, 448.
    CHECK(exact_fp8_byte(432.0, d) == 0x7e);
    CHECK(exact_fp8_byte(431.9, d) == 0x7d);
    CHECK(is_fp8_tie(432.0, d));
}

TEST_CASE("exact e4m3 bytes: normals, ties to even, subnormals and zeros", "[fp8_exact]") {
    const DType d = DType::E4M3;
    CHECK(exact_fp8_byte(1.0, d) == 0x38);   // exponent field 7 (the bias)
    CHECK(exact_fp8_byte(16.0, d) == 0x58);  // 0.1011.000
    CHECK(exact_fp8_byte(-16.0, d) == 0xd8);
    // Between 16 and 32 the step is 2: 17 lies halfway between 16 (even code 0x58) and 18 (0x59), 19 between 18
    // and 20 (even code 0x5a).
    CHECK(exact_fp8_byte(17.0, d) == 0x58);
    CHECK(exact_fp8_byte(std::nextafter(17.0, kInf), d) == 0x59);
    CHECK(exact_fp8_byte(19.0, d) == 0x5a);
    CHECK(is_fp8_tie(17.0, d));
    CHECK_FALSE(is_fp8_tie(17.5, d));
    CHECK_FALSE(is_fp8_tie(18.0, d));
    // Subnormals count units of 2^-9 below the smallest normal 2^-6 (0x08).
    CHECK(fp8_smallest_subnormal(d) == std::ldexp(1.0, -9));
    CHECK(fp8_smallest_normal(d) == std::ldexp(1.0, -6));
    CHECK(exact_fp8_byte(std::ldexp(1.0, -9), d) == 0x01);
    CHECK(exact_fp8_byte(std::ldexp(7.0, -9), d) == 0x07);
    CHECK(exact_fp8_byte(std::ldexp(1.0, -6), d) == 0x08);
    CHECK(exact_fp8_byte(std::ldexp(7.5, -9), d) == 0x08);  // halfway between 0x07 and 0x08
    CHECK(exact_fp8_byte(std::ldexp(1.5, -9), d) == 0x02);  // halfway between 0x01 and 0x02
    // Half the smallest subnormal is a tie with zero, which is even; anything above it rounds up.
    CHECK(exact_fp8_byte(std::ldexp(1.0, -10), d) == 0x00);
    CHECK(is_fp8_tie(std::ldexp(1.0, -10), d));
    CHECK(exact_fp8_byte(std::nextafter(std::ldexp(1.0, -10), 1.0), d) == 0x01);
    CHECK(exact_fp8_byte(-std::ldexp(1.0, -12), d) == 0x80);  // a zero keeps its sign
    CHECK(exact_fp8_byte(-0.0, d) == 0x80);
    CHECK(exact_fp8_byte(0.0, d) == 0x00);
}

TEST_CASE("exact e5m2 bytes: 57344 is the largest, everything past it saturates", "[fp8_exact]") {
    const DType d = DType::E5M2;
    CHECK(fp8_largest(d) == 57344.0);
    CHECK(exact_fp8_byte(57344.0, d) == 0x7b);  // S.11110.11 = 1.75 * 2^15; S.11111.00 is infinity
    for (double x : {57345.0, 61440.0, 65536.0, 1e6, kInf}) {
        INFO(x);
        CHECK(exact_fp8_byte(x, d) == 0x7b);
        CHECK(exact_fp8_byte(-x, d) == 0xfb);
    }
    // 53248 is halfway between 49152 (0x7a) and 57344 (0x7b): the even code, 49152.
    CHECK(exact_fp8_byte(53248.0, d) == 0x7a);
    CHECK(exact_fp8_byte(std::nextafter(53248.0, kInf), d) == 0x7b);
    CHECK(is_fp8_tie(53248.0, d));
}

TEST_CASE("exact e5m2 bytes: normals, subnormals and ties", "[fp8_exact]") {
    const DType d = DType::E5M2;
    CHECK(exact_fp8_byte(1.0, d) == 0x3c);  // exponent field 15 (the bias)
    CHECK(exact_fp8_byte(5.0, d) == 0x45);  // 0.10001.01 = 1.25 * 2^2
    CHECK(exact_fp8_byte(-5.0, d) == 0xc5);
    CHECK(fp8_smallest_subnormal(d) == std::ldexp(1.0, -16));
    CHECK(fp8_smallest_normal(d) == std::ldexp(1.0, -14));
    CHECK(exact_fp8_byte(std::ldexp(1.0, -16), d) == 0x01);
    CHECK(exact_fp8_byte(std::ldexp(1.0, -14), d) == 0x04);
    CHECK(exact_fp8_byte(std::ldexp(1.0, -17), d) == 0x00);  // the tie with zero
    CHECK(exact_fp8_byte(std::ldexp(3.0, -17), d) == 0x02);  // halfway between 0x01 and 0x02
    CHECK(is_fp8_tie(std::ldexp(3.0, -17), d));
    CHECK_FALSE(is_fp8_tie(std::ldexp(1.0, -16), d));
}

TEST_CASE("exact FP8 values: NaN, infinities, and every code round trips", "[fp8_exact]") {
    CHECK(exact_fp8_byte(std::nan(""), DType::E4M3) == 0x7f);
    CHECK(exact_fp8_byte(-std::nan(""), DType::E5M2) == 0x7f);
    CHECK(is_fp8_nan(0x7f, DType::E4M3));
    CHECK(is_fp8_nan(0xff, DType::E4M3));
    CHECK_FALSE(is_fp8_nan(0x7e, DType::E4M3));
    CHECK(exact_fp8_value(0x7c, DType::E5M2) == kInf);
    CHECK(exact_fp8_value(0xfc, DType::E5M2) == -kInf);
    CHECK_FALSE(is_fp8_nan(0x7c, DType::E5M2));
    for (int b : {0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff}) CHECK(is_fp8_nan(static_cast<std::uint8_t>(b), DType::E5M2));
    CHECK_FALSE(is_fp8_tie(std::nan(""), DType::E4M3));
    for (DType d : {DType::E4M3, DType::E5M2})
        for (int b = 0; b < 256; ++b) {
            const auto byte = static_cast<std::uint8_t>(b);
            const double v = exact_fp8_value(byte, d);
            INFO(to_string(d) << " byte " << b << " value " << v);
            if (is_fp8_nan(byte, d)) {
                CHECK(std::isnan(v));
                continue;
            }
            if (std::isinf(v)) continue;
            CHECK(exact_fp8_byte(v, d) == byte);
            CHECK_FALSE(is_fp8_tie(v, d));
            // Codes grow with their values.
            if ((b & 0x7f) > 0) CHECK(std::fabs(v) > std::fabs(exact_fp8_value(static_cast<std::uint8_t>(b - 1), d)));
        }
}

}  // namespace
}  // namespace coda::test
