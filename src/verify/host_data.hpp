// Host-side test data for checking kernels: random values that are exact in their storage dtype, and
// conversion between logical double values and the raw bytes a device tensor holds.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "coda/types.hpp"

namespace coda::verify {

// Raw bytes of `values` stored as dtype (round-to-nearest-even for 16- and 8-bit floats, the 8-bit ones
// saturating at their largest finite value; i32 by truncation of values that are already integers).
std::vector<std::uint8_t> encode(const std::vector<double>& values, DType dtype);
// Logical values of raw bytes of dtype.
std::vector<double> decode(const std::vector<std::uint8_t>& bytes, DType dtype);
// Rounds each value to what dtype can hold.
void round_in_place(std::vector<double>& values, DType dtype);

// How random values are drawn; every draw is rounded to the dtype afterwards.
enum class Distribution {
    Normal,        // N(0, scale^2): activations, weights, logits
    Positive,      // uniform [0.5, 1.5] * scale: rstd, gamma, scalars, sum-of-squares partials
    Index,         // integers uniform in [0, limit): labels, positions
    Uniform,       // uniform [-scale, scale]: FP8 GEMM operands (bounded, and less mass than a normal near 0,
                   // where e4m3 and e5m2 have only a few coarse subnormals)
};

std::vector<double> random_values(std::mt19937_64& rng, std::size_t count, DType dtype, Distribution d,
                                  double scale = 1.0, std::int64_t limit = 1);

}  // namespace coda::verify
