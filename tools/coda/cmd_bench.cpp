// coda bench: GEMM throughput of coda's kernels, and the JIT's costs (cold compile, disk hit, memory hit).
// Baselines (cuBLAS via torch.matmul, torch eager/compile) come from tools/bench_torch.py in the same run.
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <chrono>
#include <cstdio>
#include <random>

#include <fmt/format.h>

#include "cache/kernel_cache.hpp"
#include "coda/blocks.hpp"
#include "coda/cli.hpp"
#include "coda/error.hpp"
#include "coda/runtime.hpp"
#include "driver/cuda_driver.hpp"
#include "runtime/pipeline.hpp"
#include "verify/host_data.hpp"

namespace coda::cli {
namespace {

Graph identity_graph() {
    Graph g = Graph::gemm("identity");
    g.store(g.accumulator(), "D", DType::BF16);
    return g;
}

// A device buffer of random values (never zeros: zeros run faster than real data).
DeviceBuffer random_buffer(std::mt19937_64& rng, std::size_t count, DType dtype, verify::Distribution d) {
    const auto bytes = verify::encode(verify::random_values(rng, count, dtype, d), dtype);
    DeviceBuffer buffer(bytes.size());
    Driver::instance().copy_to_device(buffer.ptr(), bytes.data(), bytes.size());
    return buffer;
}

const void* ptr(const DeviceBuffer& b) { return reinterpret_cast<const void*>(static_cast<std::uintptr_t>(b.ptr())); }

// Median milliseconds of `iterations` launches, each timed with device events, after `warmup` launches.
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

int bench_gemm(Arguments& args) {
    const long long m = args.number("--m", 4096), n = args.number("--n", 4096), k = args.number("--k", 4096);
    const long long iterations = args.number("--iters", 50);
    if (m < 1 || n < 2 || n % 2 != 0 || k < 1 || iterations < 1 || iterations > 100000)
        throw Error(fmt::format("bench gemm: need M >= 1, an even N >= 2, K >= 1 and 1 <= --iters <= 100000; got "
                                "M={} N={} K={} --iters {}", m, n, k, iterations));
    args.positional();
    Driver& d = Driver::instance();
    if (!d.available()) throw Error("bench gemm needs a GPU: " + d.unavailable_reason());
    d.ensure_context();
    std::mt19937_64 rng(7);
    const auto a = random_buffer(rng, static_cast<std::size_t>(m * k), DType::BF16, verify::Distribution::Normal);
    const auto b = random_buffer(rng, static_cast<std::size_t>(n * k), DType::BF16, verify::Distribution::Normal);
    const auto residual = random_buffer(rng, static_cast<std::size_t>(m * n), DType::BF16, verify::Distribution::Normal);
    const auto gamma = random_buffer(rng, static_cast<std::size_t>(n), DType::BF16, verify::Distribution::Positive);
    DeviceBuffer d_out(static_cast<std::size_t>(m * n) * 2), x1(static_cast<std::size_t>(m * n) * 2),
        h(static_cast<std::size_t>(m * n) * 2);

    const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    std::printf("%-10s %6s %6s %6s %10s %9s %s\n", "epilogue", "M", "N", "K", "ms", "TFLOP/s", "config");

    const Kernel identity = Runtime::instance().compile(identity_graph());
    Args ia;
    ia.bind("A", matrix(ptr(a), DType::BF16, m, k)).bind("B", matrix_col_major(ptr(b), DType::BF16, k, n));
    ia.bind("D", matrix(ptr(d_out), DType::BF16, m, n));
    const double t_id = median_ms(identity, ia, 5, static_cast<int>(iterations));
    std::printf("%-10s %6lld %6lld %6lld %10.4f %9.1f %s\n", "identity", m, n, k, t_id, flops / t_id / 1e9,
                identity.config().to_text().c_str());

    const Kernel out_proj = Runtime::instance().compile(blocks::out_proj());
    const auto pshape = out_proj.partials_shape("x1_sumsq", m, n);
    DeviceBuffer partials(static_cast<std::size_t>(pshape[0] * pshape[1]) * 4);
    Args oa;
    oa.bind("A", matrix(ptr(a), DType::BF16, m, k)).bind("B", matrix_col_major(ptr(b), DType::BF16, k, n));
    oa.bind("residual", matrix(ptr(residual), DType::BF16, m, n)).bind("gamma", vector(ptr(gamma), DType::BF16, n));
    oa.bind("x1", matrix(ptr(x1), DType::BF16, m, n)).bind("h", matrix(ptr(h), DType::BF16, m, n));
    oa.bind("x1_sumsq", matrix(ptr(partials), DType::F32, pshape[0], pshape[1]));
    const double t_op = median_ms(out_proj, oa, 5, static_cast<int>(iterations));
    std::printf("%-10s %6lld %6lld %6lld %10.4f %9.1f %s\n", "out_proj", m, n, k, t_op, flops / t_op / 1e9,
                out_proj.config().to_text().c_str());
    std::printf("out_proj / identity time: %.3f\n", t_op / t_id);
    return 0;
}

// A fresh directory for a cold cache, so the timing includes a real NVRTC compile.
std::filesystem::path make_temp_directory() {
    std::string pattern = (std::filesystem::temp_directory_path() / "coda-bench-jit-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw Error("cannot create a temporary directory for bench jit");
    return pattern;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int bench_jit(Arguments& args) {
    const std::string arch = target_arch(args);
    args.positional();
    Driver& d = Driver::instance();
    const std::filesystem::path dir = make_temp_directory();
    // cold: validate + codegen + NVRTC + publish; disk: the same graph in a fresh process-level cache, read back
    // from disk; warm: the whole pipeline again with the entry in memory (what `coda warm` pays per cached kernel).
    std::printf("%-24s %12s %12s %12s\n", "kernel", "cold (s)", "disk (ms)", "warm (us)");
    const KernelConfig config;
    for (const Graph& g : blocks::llama_block()) {
        KernelCache first(dir, true);
        auto start = std::chrono::steady_clock::now();
        const auto built = build_kernel(g, config, arch, first);
        const double cold_s = seconds_since(start);
        if (built.cached.hit != CacheHit::Built) throw InternalError("cold compile found a cache entry");
        KernelCache second(dir, true);
        start = std::chrono::steady_clock::now();
        const auto from_disk = build_kernel(g, config, arch, second);
        const double disk_s = seconds_since(start);
        if (from_disk.cached.hit != CacheHit::Disk) throw InternalError("expected a disk-cache hit");
        constexpr int kRepeats = 200;
        start = std::chrono::steady_clock::now();
        for (int i = 0; i < kRepeats; ++i) build_kernel(g, config, arch, second);
        const double memory_s = seconds_since(start) / kRepeats;
        std::printf("%-24s %12.3f %12.3f %12.1f\n", g.name().c_str(), cold_s, disk_s * 1e3, memory_s * 1e6);
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
    if (!d.available()) return 0;

    // Host time of the hot path a training step takes: Runtime::compile (memory hit) + Kernel::launch.
    d.ensure_context();
    std::mt19937_64 rng(11);
    const long long m = 256, n = 256, k = 256;
    const auto a = random_buffer(rng, static_cast<std::size_t>(m * k), DType::BF16, verify::Distribution::Normal);
    const auto b = random_buffer(rng, static_cast<std::size_t>(n * k), DType::BF16, verify::Distribution::Normal);
    DeviceBuffer out(static_cast<std::size_t>(m * n) * 2);
    const Graph g = identity_graph();
    Runtime::instance().compile(g);
    Args ia;
    ia.bind("A", matrix(ptr(a), DType::BF16, m, k)).bind("B", matrix_col_major(ptr(b), DType::BF16, k, n));
    ia.bind("D", matrix(ptr(out), DType::BF16, m, n));
    constexpr int kLaunches = 2000;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kLaunches; ++i) Runtime::instance().compile(g).launch(ia);
    const double per_call = seconds_since(start) / kLaunches;
    d.synchronize();
    const Kernel kernel = Runtime::instance().compile(g);
    start = std::chrono::steady_clock::now();
    for (int i = 0; i < kLaunches; ++i) kernel.launch(ia);
    const double per_launch = seconds_since(start) / kLaunches;
    d.synchronize();
    std::printf("host time of Runtime::compile (in-memory hit) + Kernel::launch: %.2f us; "
                "of Kernel::launch alone: %.2f us\n",
                per_call * 1e6, per_launch * 1e6);
    return 0;
}

// Tile programs are memory-bound: report GB/s (bytes read + written) of a pure copy and of RoPE backward.
int bench_tile(Arguments& args) {
    const long long m = args.number("--m", 16384), n = args.number("--n", 4096);
    args.positional();
    if (m < 1 || n < 2 || n % 2 != 0) throw Error(fmt::format("bench tile: need M >= 1 and an even N >= 2, got {} x {}", m, n));
    Driver& d = Driver::instance();
    if (!d.available()) throw Error("bench tile needs a GPU: " + d.unavailable_reason());
    d.ensure_context();
    std::mt19937_64 rng(5);
    const std::size_t elems = static_cast<std::size_t>(m * n);
    const auto x = random_buffer(rng, elems, DType::BF16, verify::Distribution::Normal);
    const auto z = random_buffer(rng, elems, DType::BF16, verify::Distribution::Normal);
    const auto pos = random_buffer(rng, static_cast<std::size_t>(m), DType::I32, verify::Distribution::Index);
    const auto theta = random_buffer(rng, static_cast<std::size_t>(n / 2), DType::F32, verify::Distribution::Positive);
    DeviceBuffer y(elems * 2);
    std::printf("%-16s %6s %6s %10s %9s\n", "tile program", "M", "N", "ms", "GB/s");

    Graph copy = Graph::tile("copy");
    Value input = copy.tile_input("x", DType::BF16);
    copy.store(input, "y", DType::BF16);
    const Kernel copy_kernel = Runtime::instance().compile(copy);
    Args ca;
    ca.bind("x", matrix(ptr(x), DType::BF16, m, n)).bind("y", matrix(ptr(y), DType::BF16, m, n));
    const double t_copy = median_ms(copy_kernel, ca, 5, 50);
    std::printf("%-16s %6lld %6lld %10.4f %9.1f\n", "copy", m, n, t_copy, 2.0 * 2 * elems / t_copy / 1e6);

    const Kernel rope = Runtime::instance().compile(blocks::rope_backward());
    const auto pshape = rope.partials_shape("zdz_partials", m, n);
    DeviceBuffer partials(static_cast<std::size_t>(pshape[0] * pshape[1]) * 4);
    Args ra;
    ra.bind("dqkv", matrix(ptr(x), DType::BF16, m, n)).bind("z", matrix(ptr(z), DType::BF16, m, n));
    ra.bind("pos", vector(ptr(pos), DType::I32, m)).bind("theta", vector(ptr(theta), DType::F32, n / 2));
    ra.bind("dz", matrix(ptr(y), DType::BF16, m, n));
    ra.bind("zdz_partials", matrix(ptr(partials), DType::F32, pshape[0], pshape[1]));
    const double t_rope = median_ms(rope, ra, 5, 50);
    // Bytes that must move: dqkv and z read, dz written (the vectors and partials are negligible).
    std::printf("%-16s %6lld %6lld %10.4f %9.1f\n", "rope_backward", m, n, t_rope, 3.0 * 2 * elems / t_rope / 1e6);
    return 0;
}

}  // namespace

int cmd_bench(Arguments args) {
    const std::string what = args.next_word();
    if (what == "gemm") return bench_gemm(args);
    if (what == "jit") return bench_jit(args);
    if (what == "tile") return bench_tile(args);
    throw Error(fmt::format("bench: expected 'gemm', 'jit' or 'tile', got '{}'", what));
}

}  // namespace coda::cli
