// The library's host-side FP8 rounding against the test-only exact encoder (tests/support/fp8_exact.hpp), byte
// for byte, ties included (both round the same value once): round_to_dtype, the f32 encoders the device checks'
// inputs go through, verify::encode and decode, and the CPU reference reading an FP8 tile input. The values span
// the subnormals, the normals, every code, every tie and its neighbours, and magnitudes past the largest.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "coda/graph.hpp"
#include "ir/check_graph.hpp"
#include "reference/host_numeric.hpp"
#include "reference/reference.hpp"
#include "support/fp8_exact.hpp"
#include "verify/host_data.hpp"

namespace coda::test {
namespace {

// Every finite value of `d`, each tie and the doubles on either side of it, and `random` draws of random sign with
// binades from 3 below the smallest subnormal to 3 past the largest value; then infinities and NaN.
std::vector<double> fp8_probe_values(DType d, std::size_t random, std::uint64_t seed) {
    std::vector<double> out;
    for (int b = 0; b < 0x80; ++b) {
        const double v = exact_fp8_value(static_cast<std::uint8_t>(b), d);
        const double next = exact_fp8_value(static_cast<std::uint8_t>(b + 1), d);
        if (!std::isfinite(v)) continue;
        out.push_back(v);
        if (!std::isfinite(next)) continue;
        const double tie = (v + next) / 2;
        for (double x : {tie, std::nextafter(tie, 0.0), std::nextafter(tie, next)}) out.push_back(x);
    }
    const std::size_t exact = out.size();
    for (std::size_t i = 0; i < exact; ++i) out.push_back(-out[i]);
    std::mt19937_64 rng(seed);
    const int lowest = std::ilogb(fp8_smallest_subnormal(d)) - 3, highest = std::ilogb(fp8_largest(d)) + 3;
    std::uniform_int_distribution<int> binade(lowest, highest);
    std::uniform_real_distribution<double> significand(1.0, 2.0);
    std::bernoulli_distribution negative(0.5);
    for (std::size_t i = 0; i < random; ++i) {
        const double x = std::ldexp(significand(rng), binade(rng));
        out.push_back(negative(rng) ? -x : x);
    }
    const double inf = std::numeric_limits<double>::infinity();
    for (double x : {inf, -inf, std::numeric_limits<double>::quiet_NaN()}) out.push_back(x);
    return out;
}

// Equal bytes, or two NaNs (the library keeps a NaN's sign, the exact encoder gives 0x7f).
bool same_byte(std::uint8_t got, std::uint8_t want, DType d) {
    return got == want || (is_fp8_nan(got, d) && is_fp8_nan(want, d));
}

std::uint8_t library_f32_byte(float x, DType d) {
    return d == DType::E4M3 ? float_to_e4m3_bits(x) : float_to_e5m2_bits(x);
}

TEST_CASE("round_to_dtype and verify::encode round doubles to FP8 as the exact encoder does",
          "[reference][fp8_exact]") {
    for (DType d : {DType::E4M3, DType::E5M2}) {
        const std::vector<double> xs = fp8_probe_values(d, 20000, 1);
        const std::vector<std::uint8_t> encoded = verify::encode(xs, d);
        REQUIRE(encoded.size() == xs.size());
        int saturated = 0, subnormal = 0, ties = 0;
        for (std::size_t i = 0; i < xs.size(); ++i) {
            const double x = xs[i];
            const std::uint8_t want = exact_fp8_byte(x, d);
            INFO(to_string(d) << " x = " << x << " (hex float " << std::hexfloat << x << std::defaultfloat
                              << ") want byte " << int{want});
            REQUIRE(same_byte(exact_fp8_byte(round_to_dtype(x, d), d), want, d));
            REQUIRE(same_byte(encoded[i], want, d));
            saturated += std::fabs(x) > fp8_largest(d);
            subnormal += std::fabs(x) < fp8_smallest_normal(d) && (want & 0x7f) != 0;
            ties += is_fp8_tie(x, d);
        }
        // The draws reached every region.
        CHECK(saturated > 1000);
        CHECK(subnormal > 500);
        CHECK(ties > 200);
    }
}

TEST_CASE("the f32 encoders give the exact encoder's FP8 byte of every float", "[reference][fp8_exact]") {
    for (DType d : {DType::E4M3, DType::E5M2}) {
        // Ties and the neighbours of ties are floats too (few significant bits; nextafter in float here).
        std::vector<float> xs;
        for (double x : fp8_probe_values(d, 20000, 2)) {
            const auto f = static_cast<float>(x);
            xs.push_back(f);
            if (is_fp8_tie(f, d)) {
                xs.push_back(std::nextafter(f, 0.0f));
                xs.push_back(std::nextafter(f, 2 * f));
            }
        }
        for (float x : xs) {
            const std::uint8_t want = exact_fp8_byte(x, d);
            INFO(to_string(d) << " x = " << x << " (hex float " << std::hexfloat << x << std::defaultfloat
                              << ") want byte " << int{want});
            REQUIRE(same_byte(library_f32_byte(x, d), want, d));
        }
        // Decoding agrees on all 256 bytes.
        for (int b = 0; b < 256; ++b) {
            const auto byte = static_cast<std::uint8_t>(b);
            const double want = exact_fp8_value(byte, d);
            const double got = d == DType::E4M3 ? e4m3_bits_to_float(byte) : e5m2_bits_to_float(byte);
            INFO(to_string(d) << " byte " << b);
            CHECK((got == want || (std::isnan(got) && std::isnan(want))));
        }
    }
}

TEST_CASE("the CPU reference reads an FP8 tile input as the exact encoder rounds it", "[reference][fp8_exact]") {
    for (DType d : {DType::E4M3, DType::E5M2}) {
        Graph g = Graph::tile("read_fp8");
        g.store(g.tile_input("x", d), "y", DType::F32);
        std::vector<double> xs = fp8_probe_values(d, 4000, 3);
        xs.pop_back();  // NaN: the reference keeps it, a test of nothing here
        constexpr long long kColumns = 64;
        xs.resize((xs.size() + kColumns - 1) / kColumns * kColumns, 0.0);
        ReferenceProblem p;
        p.m = static_cast<long long>(xs.size()) / kColumns;
        p.n = kColumns;
        p.inputs["x"] = HostTensor{d, {p.m, p.n}, xs};
        const std::vector<double> y = run_reference(check_graph(g), p).at("y").values;
        REQUIRE(y.size() == xs.size());
        for (std::size_t i = 0; i < xs.size(); ++i) {
            INFO(to_string(d) << " x = " << xs[i]);
            REQUIRE(y[i] == exact_fp8_value(exact_fp8_byte(xs[i], d), d));
        }
    }
}

}  // namespace
}  // namespace coda::test
