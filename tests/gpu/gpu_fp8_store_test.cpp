// FP8 stores byte for byte (cvt.rn.satfinite to e4m3 and e5m2, sm_89 and newer): an epilogue storing the scaled
// accumulator and a tile program storing an f32 tile input times a scalar, on values from past the largest finite
// values (448, 57344; infinities too) down through the subnormals to zeros of either sign. Every byte must be the
// exact encoder's (tests/support/fp8_exact.hpp) of the f32 value the kernel rounds, computed the same way on the
// host; an exact tie may go to either neighbour. The tolerance-based checks (verify::check_on_device) cannot see a
// value one FP8 step off.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "coda/runtime.hpp"
#include "driver/cuda_driver.hpp"
#include "gpu/gpu_support.hpp"
#include "support/fp8_exact.hpp"

using namespace coda;
using namespace coda::test;

namespace {

// A full 24-bit significand: the products are rounded in f32 before the FP8 conversion, and seldom an FP8 tie.
constexpr float kScale = 1.1f;

// y4 = source * s stored in e4m3, y5 the same in e5m2: source the accumulator in a gemm graph, a tile input x in
// f32 in a tile program.
Graph fp8_store_graph(Domain domain) {
    const bool gemm = domain == Domain::Gemm;
    Graph g = gemm ? Graph::gemm("fp8_store_exact") : Graph::tile("fp8_store_exact_tile");
    const Value source = gemm ? g.accumulator() : g.tile_input("x", DType::F32);
    const Value y = g.mul(source, g.scalar("s"), "scaled");
    g.store(y, "y4", DType::E4M3);
    g.store(y, "y5", DType::E5M2);
    return g;
}

// Random signs, binades 2^-22 .. 2^21 (past 57344 above, below half of e5m2's smallest subnormal 2^-16 beneath),
// and significands of `bits` random bits after the leading one: 7 makes bf16 values, 23 any normal float.
std::vector<float> spread_values(std::size_t count, int bits, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> binade(-22, 21);
    std::uniform_int_distribution<std::uint32_t> fraction(0, (1u << bits) - 1);
    std::bernoulli_distribution negative(0.5);
    std::vector<float> out(count);
    for (float& v : out) {
        const double x = std::ldexp(1.0 + std::ldexp(fraction(rng), -bits), binade(rng));
        v = static_cast<float>(negative(rng) ? -x : x);
    }
    return out;
}

std::uint16_t bf16_bits_of_exact(float x) {  // x holds 8 significant bits: the top half of its f32 bits
    std::uint32_t bits = 0;
    std::memcpy(&bits, &x, sizeof bits);
    return static_cast<std::uint16_t>(bits >> 16);
}

template <class T>
DeviceBuffer upload(const std::vector<T>& values) {
    DeviceBuffer buffer(values.size() * sizeof(T));
    Driver::instance().copy_to_device(buffer.ptr(), values.data(), buffer.bytes());
    return buffer;
}

std::vector<std::uint8_t> download(const DeviceBuffer& buffer) {
    std::vector<std::uint8_t> out(buffer.bytes());
    Driver::instance().copy_to_host(out.data(), buffer.ptr(), buffer.bytes());
    return out;
}

const void* at(const DeviceBuffer& buffer) { return reinterpret_cast<const void*>(buffer.ptr()); }

struct Stored {
    std::vector<std::uint8_t> e4m3, e5m2;  // y4's and y5's bytes
};

std::size_t differing(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
    std::size_t count = 0;
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) count += a[i] != b[i];
    return count + std::max(a.size(), b.size()) - std::min(a.size(), b.size());
}

// Launches twice, y4 and y5 poisoned with 0xff bytes (NaN in both formats) before one launch and 0x00 before the
// other: both must give the same bytes, so none is left unwritten (a NaN input's output included).
Stored launch_poisoned(const Kernel& kernel, const Args& args, const DeviceBuffer& y4, const DeviceBuffer& y5) {
    Driver& driver = Driver::instance();
    Stored runs[2];
    const unsigned char poisons[2] = {0xff, 0x00};
    for (int r = 0; r < 2; ++r) {
        driver.memset8(y4.ptr(), poisons[r], y4.bytes());
        driver.memset8(y5.ptr(), poisons[r], y5.bytes());
        driver.synchronize();
        kernel.launch(args);
        driver.synchronize();
        runs[r] = {download(y4), download(y5)};
    }
    CHECK(differing(runs[0].e4m3, runs[1].e4m3) == 0);
    CHECK(differing(runs[0].e5m2, runs[1].e5m2) == 0);
    return runs[1];
}

// Every byte against the exact encoder of the f32 value the kernel rounds; at an exact tie, either neighbour.
// The run must reach saturation and the subnormals, so that it cannot pass on easy values alone.
void require_exact_bytes(const std::vector<std::uint8_t>& got, const std::vector<float>& rounded, DType d) {
    REQUIRE(got.size() == rounded.size());
    std::int64_t mismatches = 0, ties = 0, saturated = 0, subnormal = 0;
    std::string first_mismatches;
    const int mantissa_bits = d == DType::E4M3 ? 3 : 2;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double v = rounded[i];
        const std::uint8_t want = exact_fp8_byte(v, d);
        bool ok = got[i] == want || (std::isnan(v) && is_fp8_nan(got[i], d));
        if (is_fp8_tie(v, d)) {
            ++ties;
            const double away = std::copysign(std::numeric_limits<double>::infinity(), v);
            ok = got[i] == exact_fp8_byte(std::nextafter(v, 0.0), d) ||
                 got[i] == exact_fp8_byte(std::nextafter(v, away), d);
        }
        saturated += std::fabs(v) > fp8_largest(d);
        const int code = want & 0x7f;
        subnormal += code != 0 && code < (1 << mantissa_bits);
        if (ok) continue;
        if (++mismatches <= 8)
            first_mismatches += fmt::format("\n  element {}: f32 {} ({:a}) wants 0x{:02x}, got 0x{:02x}", i, v, v, want,
                                            got[i]);
    }
    INFO(to_string(d) << ": " << got.size() << " bytes, " << ties << " exact ties (either neighbour), " << saturated
                      << " saturated, " << subnormal << " subnormal" << first_mismatches);
    CHECK(mismatches == 0);
    CHECK(saturated > 100);
    CHECK(subnormal > 100);
}

}  // namespace

TEST_CASE("FP8 epilogue stores are the exact round-to-nearest-even, saturating bytes of the scaled accumulator",
          "[gpu][fp8]") {
    if (skip_unless(device_sm() >= 89, "FP8 stores (cvt.rn.satfinite) need sm_89 or newer")) return;
    // B is the identity, so the accumulator is A exactly (one product by 1, the rest by 0): the host knows the f32
    // value acc * s the epilogue rounds. M and N cut the last tiles; N = K.
    constexpr std::int64_t M = 300, N = 272, K = N;
    const std::vector<float> a = spread_values(static_cast<std::size_t>(M * K), 7, 2101);
    std::vector<std::uint16_t> a_bits(a.size()), identity(static_cast<std::size_t>(N * K), 0);
    for (std::size_t i = 0; i < a.size(); ++i) a_bits[i] = bf16_bits_of_exact(a[i]);
    for (std::int64_t j = 0; j < N; ++j) identity[static_cast<std::size_t>(j * K + j)] = bf16_bits_of_exact(1.0f);
    std::vector<float> rounded(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) rounded[i] = a[i] * kScale;

    const DeviceBuffer a_dev = upload(a_bits), b_dev = upload(identity);
    const DeviceBuffer y4(static_cast<std::size_t>(M * N)), y5(static_cast<std::size_t>(M * N));
    Args args;
    args.bind("A", matrix(at(a_dev), DType::BF16, M, K)).bind("B", matrix_col_major(at(b_dev), DType::BF16, K, N));
    args.bind("y4", matrix(at(y4), DType::E4M3, M, N)).bind("y5", matrix(at(y5), DType::E5M2, M, N));
    args.bind("s", kScale);

    // The portable mainloop and, on an sm_90a device, the two main Hopper schedules (their epilogues store through
    // shared memory).
    std::vector<Build> builds;
    for (const KernelConfig& config : gemm_configs_under_test())
        if (config == PortableConfig{} || config == hopper_cooperative() || config == hopper_pingpong())
            builds.push_back({fp8_store_graph(Domain::Gemm), options_for(config)});
    warm_in_parallel(builds);
    for (const Build& b : builds) {
        INFO("config: " << b.options.config->to_text());
        const Stored out = launch_poisoned(Runtime::instance().compile(b.graph, b.options), args, y4, y5);
        require_exact_bytes(out.e4m3, rounded, DType::E4M3);
        require_exact_bytes(out.e5m2, rounded, DType::E5M2);
    }
}

TEST_CASE("FP8 tile program stores are the exact round-to-nearest-even, saturating bytes of x * s", "[gpu][fp8]") {
    if (skip_unless(device_sm() >= 89, "FP8 stores (cvt.rn.satfinite) need sm_89 or newer")) return;
    const Kernel kernel = Runtime::instance().compile(fp8_store_graph(Domain::Tile));
    const float inf = std::numeric_limits<float>::infinity(), big = std::numeric_limits<float>::max();
    // Rows of 1000 bytes in FP8 (the tiles visit global memory) with a partial last row tile, and of 1024 (staged).
    std::uint64_t seed = 2201;
    for (const auto& [m, n] : {std::pair<std::int64_t, std::int64_t>{257, 1000}, {64, 1024}}) {
        INFO(fmt::format("M={} N={}", m, n));
        std::vector<float> x = spread_values(static_cast<std::size_t>(m * n), 23, seed++);
        // Infinities and products that overflow f32 saturate too; NaN stays NaN; zeros keep their sign; the largest
        // values, and 464 and 61440 (half a step past them) divided by s.
        const std::vector<float> special = {inf,   -inf,  std::nanf(""), 0.0f,   -0.0f,  big, -big, 1e30f, -1e30f,
                                            448.0f / kScale, -57344.0f / kScale, 464.0f / kScale, 61440.0f / kScale};
        std::copy(special.begin(), special.end(), x.begin());
        std::vector<float> rounded(x.size());
        for (std::size_t i = 0; i < x.size(); ++i) rounded[i] = x[i] * kScale;

        const DeviceBuffer x_dev = upload(x);
        const DeviceBuffer y4(static_cast<std::size_t>(m * n)), y5(static_cast<std::size_t>(m * n));
        Args args;
        args.bind("x", matrix(at(x_dev), DType::F32, m, n)).bind("s", kScale);
        args.bind("y4", matrix(at(y4), DType::E4M3, m, n)).bind("y5", matrix(at(y5), DType::E5M2, m, n));
        const Stored out = launch_poisoned(kernel, args, y4, y5);
        require_exact_bytes(out.e4m3, rounded, DType::E4M3);
        require_exact_bytes(out.e5m2, rounded, DType::E5M2);
    }
}
