// The exact FP8 encoder (fp8_exact.hpp): each format's finite magnitudes as a sorted table indexed by code, so
// rounding is a search and one exact comparison with the midpoint, with no bit tricks to get wrong.
#include "support/fp8_exact.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace coda::test {
namespace {

struct Format {
    int mantissa_bits;
    int bias;
    std::uint8_t largest_code;      // of the largest finite magnitude
    std::vector<double> magnitude;  // magnitude[code] for codes 0 .. largest_code, increasing with the code
};

Format make_format(int mantissa_bits, int bias, std::uint8_t largest_code) {
    Format f{mantissa_bits, bias, largest_code, {}};
    for (int code = 0; code <= largest_code; ++code) {
        const int exponent = code >> mantissa_bits;
        const int mantissa = code & ((1 << mantissa_bits) - 1);
        // Subnormals (exponent field 0) share the smallest normal's exponent without the implicit one.
        const double significand = exponent == 0 ? mantissa : mantissa + (1 << mantissa_bits);
        f.magnitude.push_back(std::ldexp(significand, std::max(exponent, 1) - bias - mantissa_bits));
    }
    return f;
}

const Format& format_of(DType fp8) {
    // e4m3fn: no infinities, S.1111.111 is its NaN, so S.1111.110 = 448 is the largest. e5m2: IEEE-like, exponent
    // field 31 holds infinities and NaNs, so S.11110.11 = 57344 is the largest.
    static const Format e4m3 = make_format(3, 7, 0x7e);
    static const Format e5m2 = make_format(2, 15, 0x7b);
    switch (fp8) {
        case DType::E4M3: return e4m3;
        case DType::E5M2: return e5m2;
        default: throw std::invalid_argument("fp8_exact: " + std::string(to_string(fp8)) + " is not an FP8 dtype");
    }
}

// The code below |x| (x finite, below the largest): magnitude[code] <= |x| < magnitude[code + 1].
std::size_t code_below(const Format& f, double magnitude) {
    const auto above = std::upper_bound(f.magnitude.begin(), f.magnitude.end(), magnitude);
    return static_cast<std::size_t>(above - f.magnitude.begin()) - 1;
}

}  // namespace

std::uint8_t exact_fp8_byte(double x, DType fp8) {
    const Format& f = format_of(fp8);
    if (std::isnan(x)) return 0x7f;
    const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
    const double m = std::fabs(x);
    if (m >= f.magnitude.back()) return static_cast<std::uint8_t>(sign | f.largest_code);
    const std::size_t lo = code_below(f, m);
    // Adjacent FP8 values have a few significant bits each, so twice |x| and their sum compare exactly.
    const double twice = 2 * m, sum = f.magnitude[lo] + f.magnitude[lo + 1];
    const bool up = twice > sum || (twice == sum && (lo & 1) != 0);
    return static_cast<std::uint8_t>(sign | (up ? lo + 1 : lo));
}

double exact_fp8_value(std::uint8_t byte, DType fp8) {
    const Format& f = format_of(fp8);
    const std::uint8_t code = byte & 0x7f;
    double magnitude = 0;
    if (code <= f.largest_code)
        magnitude = f.magnitude[code];
    else if (is_fp8_nan(byte, fp8))
        return std::numeric_limits<double>::quiet_NaN();
    else
        magnitude = std::numeric_limits<double>::infinity();
    return (byte & 0x80) ? -magnitude : magnitude;
}

bool is_fp8_nan(std::uint8_t byte, DType fp8) {
    // Every code above the largest finite one is a NaN, but e5m2's first, 0x7c: its infinity.
    const std::uint8_t code = byte & 0x7f;
    return code > format_of(fp8).largest_code && !(fp8 == DType::E5M2 && code == 0x7c);
}

bool is_fp8_tie(double x, DType fp8) {
    const Format& f = format_of(fp8);
    const double m = std::fabs(x);
    if (!std::isfinite(m) || m >= f.magnitude.back()) return false;
    const std::size_t lo = code_below(f, m);
    return 2 * m == f.magnitude[lo] + f.magnitude[lo + 1];
}

double fp8_largest(DType fp8) { return format_of(fp8).magnitude.back(); }
double fp8_smallest_subnormal(DType fp8) { return format_of(fp8).magnitude[1]; }
double fp8_smallest_normal(DType fp8) {
    const Format& f = format_of(fp8);
    return f.magnitude[std::size_t{1} << f.mantissa_bits];
}

}  // namespace coda::test
