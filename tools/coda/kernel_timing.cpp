// Device-side benchmarking helpers shared by coda bench and coda tune.
#include "coda/kernel_timing.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "coda/error.hpp"
#include "ir/check_graph.hpp"
#include "verify/host_data.hpp"

namespace coda::cli {
namespace {

// Random values are drawn for this many elements and repeated to fill a larger tensor: a GEMM's timing
// depends on the data being non-trivial, not on it never repeating, and drawing gigabytes on the host is slow.
constexpr std::size_t kPatternElements = std::size_t(1) << 20;

const void* ptr(const DeviceBuffer& b) { return reinterpret_cast<const void*>(static_cast<std::uintptr_t>(b.ptr())); }

}  // namespace

std::vector<ProblemShape> gemm_shape_set() {
    const std::pair<std::int64_t, std::int64_t> nk[] = {{4096, 4096},  {6144, 4096}, {14336, 4096},
                                                        {4096, 14336}, {2048, 2048}, {8192, 8192}};
    std::vector<ProblemShape> shapes;
    for (std::int64_t m : {4096, 16384})
        for (const auto& [n, k] : nk) shapes.push_back({m, n, k});
    return shapes;
}

double median_ms(const Kernel& kernel, const Args& args, int warmup, int iterations) {
    Driver& d = Driver::instance();
    for (int i = 0; i < warmup; ++i) kernel.launch(args);
    std::vector<double> times;
    CUevent start = d.event_create(), stop = d.event_create();
    for (int i = 0; i < iterations; ++i) {
        d.event_record(start, nullptr);
        kernel.launch(args);
        d.event_record(stop, nullptr);
        d.synchronize();
        times.push_back(d.event_ms(start, stop));
    }
    d.event_destroy(start);
    d.event_destroy(stop);
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

RandomBindings::RandomBindings(std::int64_t m, std::int64_t n, std::int64_t k, std::uint64_t seed)
    : m_(m), n_(n), k_(k), seed_(seed) {}

const DeviceBuffer& RandomBindings::buffer(const std::string& name, DType dtype, std::size_t count, Fill fill,
                                           double scale) {
    const std::size_t bytes = count * size_of(dtype);
    if (auto it = buffers_.find(name); it != buffers_.end() && it->second.bytes() == bytes) return it->second;
    DeviceBuffer b(bytes);
    if (fill != Fill::None && count > 0) {
        // Seeded by name, so the same binding gets the same data whatever order kernels bind in.
        std::mt19937_64 rng(seed_ ^ std::hash<std::string>{}(name));
        const verify::Distribution d = fill == Fill::Normal     ? verify::Distribution::Normal
                                       : fill == Fill::Positive ? verify::Distribution::Positive
                                                                : verify::Distribution::Index;
        const std::size_t pattern_count = std::min(count, kPatternElements);
        const auto pattern = verify::encode(verify::random_values(rng, pattern_count, dtype, d, scale, n_), dtype);
        Driver& driver = Driver::instance();
        for (std::size_t offset = 0; offset < bytes; offset += pattern.size())
            driver.copy_to_device(b.ptr() + offset, pattern.data(), std::min(pattern.size(), bytes - offset));
    }
    buffers_[name] = std::move(b);
    return buffers_[name];
}

Args RandomBindings::bind(const Kernel& kernel) {
    const CheckedGraph g = check_graph(kernel.graph());
    if (g.graph.domain() != Domain::Gemm)
        throw Error(fmt::format("graph '{}' is a {} graph; only GEMM graphs can be bound with random operands",
                                g.graph.name(), to_string(g.graph.domain())));
    const GemmSpec spec = g.graph.spec();
    const auto count = [](std::int64_t rows, std::int64_t cols) { return static_cast<std::size_t>(rows * cols); };
    Args args;
    // A is M x K (stored K x M when M-major); B is K x N (stored N x K when K-major), scaled by 1/sqrt(K) so
    // that the accumulator stays near unit size whatever K is.
    const DeviceBuffer& a = buffer("A", spec.input, count(m_, k_), Fill::Normal);
    const DeviceBuffer& b = buffer("B", spec.input, count(k_, n_), Fill::Normal, 1.0 / std::sqrt(double(k_)));
    args.bind("A", spec.a == Major::MN ? matrix_col_major(ptr(a), spec.input, m_, k_) : matrix(ptr(a), spec.input, m_, k_));
    args.bind("B", spec.b == Major::K ? matrix_col_major(ptr(b), spec.input, k_, n_) : matrix(ptr(b), spec.input, k_, n_));
    for (const Binding& binding : g.bindings) {
        if (binding.role == BindingRole::ScalarArg) {
            args.bind(binding.name, 1.0f);
            continue;
        }
        if (binding.role == BindingRole::RowPartials || binding.role == BindingRole::ColPartials) {
            const auto shape = kernel.partials_shape(binding.name, m_, n_);
            const DeviceBuffer& p = buffer(binding.name, binding.dtype, count(shape[0], shape[1]), Fill::None);
            args.bind(binding.name, matrix(ptr(p), binding.dtype, shape[0], shape[1]));
            continue;
        }
        const bool written = binding.role == BindingRole::Output;
        const Fill fill = written                          ? Fill::None
                          : binding.dtype == DType::I32    ? Fill::Index
                          : binding.kind == Kind::Tile     ? Fill::Normal
                                                           : Fill::Positive;
        if (binding.kind == Kind::Tile) {
            const std::int64_t cols = columns(binding.width, n_);
            const DeviceBuffer& t = buffer(binding.name, binding.dtype, count(m_, cols), fill);
            args.bind(binding.name, matrix(ptr(t), binding.dtype, m_, cols));
        } else {
            const std::int64_t length = binding.kind == Kind::Row ? m_ : columns(binding.width, n_);
            const DeviceBuffer& v = buffer(binding.name, binding.dtype, static_cast<std::size_t>(length), fill);
            args.bind(binding.name, vector(ptr(v), binding.dtype, length));
        }
    }
    return args;
}

}  // namespace coda::cli
