// templates/coda/angle.cuh on the host: the same fmaf / rintf steps the device runs (codegen lowers RoPE's
// sin(pos * theta) to it), swept against double over RoPE's positions and frequencies.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "coda/angle.cuh"

namespace {

struct MaxError {
    double sin = 0, cos = 0;
    void add(coda::SinCos got, double angle) {
        sin = std::max(sin, std::fabs(static_cast<double>(got.sin) - std::sin(angle)));
        cos = std::max(cos, std::fabs(static_cast<double>(got.cos) - std::cos(angle)));
    }
};

// theta_j = base^(-2j / head_dim) as the f32 column vector a model passes.
std::vector<float> rope_frequencies(double base, int head_dim) {
    std::vector<float> theta;
    for (int j = 0; j < head_dim / 2; ++j)
        theta.push_back(static_cast<float>(std::pow(base, -2.0 * j / head_dim)));
    return theta;
}

// Every 31st position up to 2^20 (starting at j mod 31, so the frequencies together see every residue), and
// each power of two with its neighbours.
std::vector<int> positions(int j) {
    std::vector<int> pos;
    for (int p = j % 31; p <= (1 << 20); p += 31) pos.push_back(p);
    for (int e = 0; e <= 20; ++e)
        for (int d : {-1, 0, 1}) pos.push_back((1 << e) + d);
    return pos;
}

}  // namespace

TEST_CASE("sin and cos of pos * theta match double for positions up to 2^20", "[codegen][angle]") {
    for (double base : {1e4, 5e5, 1e6})
        for (int head_dim : {64, 128}) {
            INFO("base " << base << " head_dim " << head_dim);
            MaxError err;
            const std::vector<float> theta = rope_frequencies(base, head_dim);
            for (std::size_t j = 0; j < theta.size(); ++j)
                for (int p : positions(static_cast<int>(j))) {
                    const float pos = static_cast<float>(p);
                    // The exact product of two floats fits a double (24 + 24 significant bits).
                    err.add(coda::sincos_of_product(pos, theta[j]), static_cast<double>(pos) * theta[j]);
                }
            // angle.cuh: 7.4e-8 measured over every position (an ulp of 1 is 1.2e-7).
            CHECK(err.sin < 1e-7);
            CHECK(err.cos < 1e-7);
        }
}

TEST_CASE("sin and cos of a product stay accurate up to |a * b| = 2^22, and of one float", "[codegen][angle]") {
    std::mt19937_64 rng(14);
    std::uniform_real_distribution<float> big(-4194304.0f, 4194304.0f), unit(-1.0f, 1.0f);
    MaxError product, single;
    for (int i = 0; i < 1000000; ++i) {
        const float a = big(rng), b = unit(rng);
        product.add(coda::sincos_of_product(a, b), static_cast<double>(a) * b);
        const float x = a * b;
        single.add(coda::sincos(x), x);
    }
    CHECK(product.sin < 1.5e-7);
    CHECK(product.cos < 1.5e-7);
    CHECK(single.sin < 1.5e-7);
    CHECK(single.cos < 1.5e-7);
}

TEST_CASE("the rounded fp32 angle is what sincos_of_product avoids", "[codegen][angle]") {
    // pos * theta rounded to fp32 at pos near 2^20 is off by up to half an ulp, 2^-5 rad: sin of the rounded
    // product misses sin of the exact one by about that much, for some theta. The lowering must not round first.
    const std::vector<float> theta = rope_frequencies(1e4, 128);
    double worst = 0;
    for (float t : theta) {
        const float pos = 1048573.0f;
        const double exact = std::sin(static_cast<double>(pos) * t);
        worst = std::max(worst, std::fabs(static_cast<double>(coda::sincos(pos * t).sin) - exact));
        CHECK(std::fabs(static_cast<double>(coda::sincos_of_product(pos, t).sin) - exact) < 1.5e-7);
    }
    CHECK(worst > 1e-3);
}
