// Encoding through the reference's exact host conversions, so checks and reference agree bit for bit.
#include "verify/host_data.hpp"

#include <cmath>
#include <cstring>

#include "coda/error.hpp"
#include "reference/host_numeric.hpp"

namespace coda::verify {

std::vector<std::uint8_t> encode(const std::vector<double>& values, DType dtype) {
    std::vector<std::uint8_t> bytes(values.size() * size_of(dtype));
    for (std::size_t i = 0; i < values.size(); ++i) {
        std::uint8_t* p = bytes.data() + i * size_of(dtype);
        switch (dtype) {
            case DType::BF16: {
                const std::uint16_t bits = float_to_bf16_bits(static_cast<float>(values[i]));
                std::memcpy(p, &bits, 2);
                break;
            }
            case DType::F16: {
                const std::uint16_t bits = float_to_f16_bits(static_cast<float>(values[i]));
                std::memcpy(p, &bits, 2);
                break;
            }
            case DType::F32: {
                const float f = static_cast<float>(values[i]);
                std::memcpy(p, &f, 4);
                break;
            }
            case DType::I32: {
                const std::int32_t v = static_cast<std::int32_t>(values[i]);
                std::memcpy(p, &v, 4);
                break;
            }
            // Rounded from the double first (exact in f32 afterwards): no double rounding through f32.
            case DType::E4M3: *p = float_to_e4m3_bits(static_cast<float>(round_to_dtype(values[i], dtype))); break;
            case DType::E5M2: *p = float_to_e5m2_bits(static_cast<float>(round_to_dtype(values[i], dtype))); break;
        }
    }
    return bytes;
}

std::vector<double> decode(const std::vector<std::uint8_t>& bytes, DType dtype) {
    const std::size_t n = bytes.size() / size_of(dtype);
    std::vector<double> values(n);
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint8_t* p = bytes.data() + i * size_of(dtype);
        switch (dtype) {
            case DType::BF16: {
                std::uint16_t bits;
                std::memcpy(&bits, p, 2);
                values[i] = bf16_bits_to_float(bits);
                break;
            }
            case DType::F16: {
                std::uint16_t bits;
                std::memcpy(&bits, p, 2);
                values[i] = f16_bits_to_float(bits);
                break;
            }
            case DType::F32: {
                float f;
                std::memcpy(&f, p, 4);
                values[i] = f;
                break;
            }
            case DType::I32: {
                std::int32_t v;
                std::memcpy(&v, p, 4);
                values[i] = v;
                break;
            }
            case DType::E4M3: values[i] = e4m3_bits_to_float(*p); break;
            case DType::E5M2: values[i] = e5m2_bits_to_float(*p); break;
        }
    }
    return values;
}

void round_in_place(std::vector<double>& values, DType dtype) {
    for (double& v : values) v = dtype == DType::I32 ? std::trunc(v) : round_to_dtype(v, dtype);
}

std::vector<double> random_values(std::mt19937_64& rng, std::size_t count, DType dtype, Distribution d, double scale,
                                  std::int64_t limit) {
    std::vector<double> values(count);
    std::normal_distribution<double> normal(0.0, scale);
    std::uniform_real_distribution<double> positive(0.5 * scale, 1.5 * scale);
    std::uniform_int_distribution<std::int64_t> index(0, std::max<std::int64_t>(limit, 1) - 1);
    std::uniform_real_distribution<double> uniform(-scale, scale);
    for (double& v : values) {
        switch (d) {
            case Distribution::Normal: v = normal(rng); break;
            case Distribution::Positive: v = positive(rng); break;
            case Distribution::Index: v = static_cast<double>(index(rng)); break;
            case Distribution::Uniform: v = uniform(rng); break;
        }
    }
    if (dtype == DType::I32 && d != Distribution::Index)
        throw InternalError("i32 test data must be drawn as indices");
    round_in_place(values, dtype);
    return values;
}

}  // namespace coda::verify
