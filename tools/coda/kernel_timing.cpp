// Device-side benchmarking helpers shared by coda bench and coda tune.
#include "coda/kernel_timing.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "coda/cli.hpp"
#include "coda/error.hpp"
#include "ir/check_graph.hpp"
#include "mainloop/stream_k_workspace.hpp"
#include "verify/host_data.hpp"

namespace coda::cli {
namespace {

// Random values are drawn for this many elements and repeated to fill a larger tensor: a GEMM's timing
// depends on the data being non-trivial, not on it never repeating, and drawing gigabytes on the host is slow.
constexpr std::size_t kPatternElements = std::size_t(1) << 20;

const void* ptr(const DeviceBuffer& b) { return reinterpret_cast<const void*>(static_cast<std::uintptr_t>(b.ptr())); }

// Device events, destroyed however the timing ends. A destroy that fails is not reported: the error that ended
// the timing (a faulting kernel breaks the context) is already on its way to the caller.
class Events {
public:
    explicit Events(int count) {
        for (int i = 0; i < count; ++i) events_.push_back(Driver::instance().event_create());
    }
    ~Events() {
        for (CUevent e : events_) try {
                Driver::instance().event_destroy(e);
            } catch (...) {
            }
    }
    Events(const Events&) = delete;
    Events& operator=(const Events&) = delete;
    CUevent operator[](int i) const { return events_[static_cast<std::size_t>(i)]; }

private:
    std::vector<CUevent> events_;
};

double median_of(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

std::vector<ProblemShape> gemm_shape_set() {
    const std::pair<std::int64_t, std::int64_t> nk[] = {{4096, 4096},  {6144, 4096}, {14336, 4096},
                                                        {4096, 14336}, {2048, 2048}, {8192, 8192}};
    std::vector<ProblemShape> shapes;
    for (std::int64_t m : {4096, 16384})
        for (const auto& [n, k] : nk) shapes.push_back({m, n, k});
    return shapes;
}

std::vector<ProblemShape> llama_shape_set() {
    const std::pair<std::int64_t, std::int64_t> nk[] = {
        {11008, 4096}, {4096, 11008}, {5632, 2048}, {2048, 5632}, {128256, 4096}};
    std::vector<ProblemShape> shapes;
    for (const auto& [n, k] : nk) shapes.push_back({8192, n, k});
    return shapes;
}

double median_ms(const Kernel& kernel, const Args& args, int warmup, int iterations) {
    if (warmup < 1 || iterations < 1) throw InternalError("median_ms needs warmup >= 1 and iterations >= 1");
    Driver& d = Driver::instance();
    for (int i = 0; i < warmup; ++i) kernel.launch(args);
    // Back to back, an event between launches, one synchronize at the end: the host queues launches while the GPU
    // runs earlier ones (the warmup launches first), so each interval is the kernel's time on the GPU and not the
    // host's time to launch it. (Recording a start event on an idle GPU and then launching would add the launch's
    // host cost: a few percent of a millisecond-long GEMM, and most of a small one.)
    const Events events(iterations + 1);
    d.event_record(events[0], nullptr);
    for (int i = 0; i < iterations; ++i) {
        kernel.launch(args);
        d.event_record(events[i + 1], nullptr);
    }
    d.synchronize();
    std::vector<double> times;
    for (int i = 0; i < iterations; ++i) times.push_back(d.event_ms(events[i], events[i + 1]));
    return median_of(times);
}

void warm_in_parallel(const std::vector<WarmJob>& jobs, const std::string& arch) {
    std::mutex mutex;
    std::exception_ptr failure;
    run_in_parallel(jobs.size(), std::max(1u, std::thread::hardware_concurrency()), [&](std::size_t i) {
        try {
            CompileOptions options = jobs[i].options;
            options.arch = arch;
            Runtime::instance().warm(*jobs[i].graph, options);
        } catch (...) {  // run_in_parallel's work must not throw
            std::lock_guard<std::mutex> lock(mutex);
            if (!failure) failure = std::current_exception();
        }
    });
    if (failure) std::rethrow_exception(failure);
}

void settle(const std::vector<TimedLaunch>& launches, double ms) {
    Driver& d = Driver::instance();
    const Events events(2);
    double elapsed = 0;
    int rounds = 1;
    while (elapsed < ms) {
        d.event_record(events[0], nullptr);
        for (int r = 0; r < rounds; ++r)
            for (const TimedLaunch& l : launches) {
                set_stream_k_override(l.stream_k);
                l.kernel->launch(*l.args);
            }
        d.event_record(events[1], nullptr);
        set_stream_k_override(std::nullopt);
        d.synchronize();
        const double t = d.event_ms(events[0], events[1]);
        elapsed += t;
        // Next batch: what remains, at most ~100 ms of queued work.
        const double per_round = std::max(t / rounds, 1e-3);
        rounds = static_cast<int>(std::clamp(std::min(ms - elapsed, 100.0) / per_round, 1.0, 100000.0));
    }
}

Interleaved interleaved_ms(const std::vector<TimedLaunch>& launches, int rounds, int per_round) {
    if (launches.empty() || rounds < 1 || per_round < 1)
        throw InternalError("interleaved_ms needs kernels, rounds >= 1 and per_round >= 1");
    const std::size_t n = launches.size();
    std::vector<std::vector<double>> times(n), ratios(n);
    settle(launches, kSettleMs);
    for (int r = 0; r < rounds; ++r) {
        std::vector<double> round(n);
        for (std::size_t i = 0; i < n; ++i) {
            set_stream_k_override(launches[i].stream_k);
            round[i] = median_ms(*launches[i].kernel, *launches[i].args, 1, per_round);
        }
        set_stream_k_override(std::nullopt);
        for (std::size_t i = 0; i < n; ++i) {
            times[i].push_back(round[i]);
            ratios[i].push_back(round[i] / round[0]);
        }
    }
    Interleaved result;
    for (std::size_t i = 0; i < n; ++i) {
        result.ms.push_back(median_of(times[i]));
        result.vs_first.push_back(median_of(ratios[i]));
    }
    return result;
}

std::vector<double> solo_ms(const std::vector<TimedLaunch>& launches, int iterations) {
    if (launches.empty() || iterations < 1) throw InternalError("solo_ms needs kernels and iterations >= 1");
    const std::size_t n = launches.size();
    std::vector<double> sum(n, 0.0);
    for (int pass = 0; pass < 2; ++pass)
        for (std::size_t j = 0; j < n; ++j) {
            const std::size_t i = pass == 0 ? j : n - 1 - j;
            settle({launches[i]}, kSettleMs);
            set_stream_k_override(launches[i].stream_k);
            sum[i] += median_ms(*launches[i].kernel, *launches[i].args, 1, iterations);
            set_stream_k_override(std::nullopt);
        }
    for (double& s : sum) s /= 2;
    return sum;
}

RandomBindings::RandomBindings(std::int64_t m, std::int64_t n, std::int64_t k, std::uint64_t seed)
    : m_(m), n_(n), k_(k), seed_(seed) {}

const DeviceBuffer& RandomBindings::buffer(const std::string& name, DType dtype, std::size_t count, Fill fill,
                                           double scale) {
    const std::size_t bytes = count * size_of(dtype);
    const std::pair<std::string, std::size_t> key{name, bytes};
    if (auto it = buffers_.find(key); it != buffers_.end()) return it->second;
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
    return buffers_.emplace(key, std::move(b)).first->second;
}

Args RandomBindings::bind(const Kernel& kernel, std::int64_t partial_tiles) {
    const CheckedGraph g = check_graph(kernel.graph());
    const Domain domain = g.graph.domain();
    if (domain == Domain::Finalize && partial_tiles < 1)
        throw InternalError(fmt::format("binding finalizer '{}' needs the partials' tile count", g.graph.name()));
    const auto count = [](std::int64_t rows, std::int64_t cols) { return static_cast<std::size_t>(rows * cols); };
    Args args;
    if (domain == Domain::Gemm) {
        // A is M x K (stored K x M when M-major); B is K x N (stored N x K when K-major), scaled by 1/sqrt(K) so
        // that the accumulator stays near unit size whatever K is.
        const GemmSpec spec = g.graph.spec();
        const DeviceBuffer& a = buffer("A", spec.input, count(m_, k_), Fill::Normal);
        const DeviceBuffer& b = buffer("B", spec.b_input(), count(k_, n_), Fill::Normal, 1.0 / std::sqrt(double(k_)));
        args.bind("A", spec.a == Major::MN ? matrix_col_major(ptr(a), spec.input, m_, k_)
                                           : matrix(ptr(a), spec.input, m_, k_));
        args.bind("B", spec.b == Major::K ? matrix_col_major(ptr(b), spec.b_input(), k_, n_)
                                          : matrix(ptr(b), spec.b_input(), k_, n_));
        for (const BlockScaleOperand& scales : block_scale_operands(spec)) {  // positive, in their declared shapes
            const std::string name(scales.name);
            const BlockScaleShape shape = scales.shape(m_, n_, k_);
            const DeviceBuffer& s = buffer(name, scales.dtype, count(shape.rows, shape.cols), Fill::Positive);
            args.bind(name, matrix(ptr(s), scales.dtype, shape.rows, shape.cols));
        }
    }
    for (const Binding& binding : g.bindings) {
        if (binding.role == BindingRole::ScalarArg) {
            args.bind(binding.name, 1.0f);
            continue;
        }
        if (binding.role == BindingRole::Partials) {  // a finalizer's input: positive, as sums of squares are
            const DeviceBuffer& p = buffer(binding.name, DType::F32, count(partial_tiles, m_), Fill::Positive);
            args.bind(binding.name, matrix(ptr(p), DType::F32, partial_tiles, m_));
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
            // A transposed tile (store_transposed's output, tile_input_transposed's input): its columns by M.
            args.bind(binding.name, binding.transposed ? matrix(ptr(t), binding.dtype, cols, m_)
                                                       : matrix(ptr(t), binding.dtype, m_, cols));
        } else {
            const std::int64_t length = binding.kind == Kind::Row ? m_ : columns(binding.width, n_);
            const DeviceBuffer& v = buffer(binding.name, binding.dtype, static_cast<std::size_t>(length), fill);
            args.bind(binding.name, vector(ptr(v), binding.dtype, length));
        }
    }
    return args;
}

}  // namespace coda::cli
