// coda bench: GEMM throughput of coda's kernels, and the JIT's costs (cold compile, disk hit, memory hit).
// Baselines (cuBLAS via torch.matmul, torch eager/compile) come from tools/bench_torch.py in the same run.
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <random>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cache/kernel_cache.hpp"
#include "mainloop/mainloops.hpp"
#include "coda/blocks.hpp"
#include "coda/cli.hpp"
#include "coda/error.hpp"
#include "coda/kernel_timing.hpp"
#include "coda/runtime.hpp"
#include "driver/cuda_driver.hpp"
#include "ir/check_graph.hpp"
#include "runtime/config_choice.hpp"
#include "runtime/launch_plan.hpp"
#include "runtime/pipeline.hpp"
#include "verify/host_data.hpp"

namespace coda::cli {
namespace {

// The identity epilogue: D = acc in bf16. With FP8 operands (both K-major), D = acc * scale: a per-tensor
// recipe's one scale (scale_a * scale_b), what torch._scaled_mm is timed with in tools/bench_torch.py --fp8.
Graph identity_graph(DType input = DType::BF16) {
    if (input == DType::BF16) {
        Graph g = Graph::gemm("identity");
        g.store(g.accumulator(), "D", DType::BF16);
        return g;
    }
    Graph g = Graph::gemm("identity", GemmSpec{input, Major::K, Major::K});
    g.store(g.mul(g.accumulator(), g.scalar("scale"), "scaled"), "D", DType::BF16);
    return g;
}

// The block-scaled identity (--block-scales): D = acc in bf16, the mainloop applying one scale per row of A and 128 k
// and one per 128 x 128 block of B (ScaleMode::Block128x128), as DeepGEMM and torch._scaled_mm's block-wise recipe.
Graph block_scaled_identity_graph(DType input) {
    Graph g = Graph::gemm("identity_blockwise",
                          GemmSpec{input, Major::K, Major::K, std::nullopt, ScaleMode::Block128x128});
    g.store(g.accumulator(), "D", DType::BF16);
    return g;
}

// The per-tensor FP8 identity with promoted accumulation (--promoted): each 128-k block's wgmma sum added into f32,
// as torch._scaled_mm accumulates without use_fast_accum.
Graph promoted_identity_graph(DType input) {
    GemmSpec spec{input, Major::K, Major::K};
    spec.accumulation = Accumulation::Promoted;
    Graph g = Graph::gemm("identity_promoted", spec);
    g.store(g.mul(g.accumulator(), g.scalar("scale"), "scaled"), "D", DType::BF16);
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

// Like random_buffer, for operands of hundreds of MB: one block of random values repeated over the buffer.
// Every tile still sees random, non-zero bits (what the tensor cores' speed and power depend on), and the
// host does not generate and encode a fresh value per element. The block's odd length keeps the repeats
// out of step with rows.
DeviceBuffer large_random_buffer(std::mt19937_64& rng, std::size_t count, DType dtype, verify::Distribution d) {
    constexpr std::size_t kBlock = 3000017;
    const auto block = verify::encode(verify::random_values(rng, std::min(count, kBlock), dtype, d), dtype);
    const std::size_t bytes = count * size_of(dtype);
    DeviceBuffer buffer(bytes);
    for (std::size_t at = 0; at < bytes; at += block.size())
        Driver::instance().copy_to_device(buffer.ptr() + at, block.data(), std::min(block.size(), bytes - at));
    return buffer;
}

constexpr long long kAbsent = std::numeric_limits<long long>::min();

struct GemmOptions {
    long long m = kAbsent, n = kAbsent, k = kAbsent;
    std::string shape_set = "set";
    long long iterations = 50;
    double hold_ms = 0;
    bool identity_only = false;
    bool stream_k_ab = false;
    std::string fp8;  // e4m3 or e5m2: FP8 operands; empty: bf16
    bool block_scales = false;  // with fp8: the block-scaled identity too, interleaved with the per-tensor one
    bool promoted = false;      // with fp8: the per-tensor identity with promoted accumulation too, interleaved
    std::string config_text;
    std::string csv_path;
};

// The shapes to time: the one --m/--n/--k give (a dimension left out is 4096), else the --shapes set.
std::vector<ProblemShape> gemm_shapes(const GemmOptions& given) {
    if (given.m != kAbsent || given.n != kAbsent || given.k != kAbsent) {
        const ProblemShape s{given.m == kAbsent ? 4096 : given.m, given.n == kAbsent ? 4096 : given.n,
                             given.k == kAbsent ? 4096 : given.k};
        if (s.m < 1 || s.n < 2 || s.n % 2 != 0 || s.k < 1)
            throw Error(fmt::format("bench gemm: need M >= 1, an even N >= 2 and K >= 1; got M={} N={} K={}", s.m,
                                    s.n, s.k));
        return {s};
    }
    if (given.shape_set == "llama") return llama_shape_set();
    std::vector<ProblemShape> shapes = gemm_shape_set();
    if (given.shape_set == "all") {
        const std::vector<ProblemShape> llama = llama_shape_set();
        shapes.insert(shapes.end(), llama.begin(), llama.end());
    }
    return shapes;
}

// Elements of a rows x cols matrix, multiplied in size_t: the LM head's D (8192 x 128256) has over 2^30 of them,
// and its bytes pass 2^31.
std::size_t elements(std::int64_t rows, std::int64_t cols) {
    return static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
}

// Seconds since the Unix epoch, to the millisecond: the clock that nvidia-smi's sample timestamps can be matched to.
double unix_seconds() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// --hold-ms: one kernel alone, back to back, for `ms` of GPU time (settle, kernel_timing.hpp), between two HOLD
// lines (`who`: coda for the identity, coda_blockwise for the block-scaled one) that tools/identity_table.py matches
// against nvidia-smi's samples of clock and power. Both times are taken with the stream drained, so the interval
// holds this kernel's work and nothing else.
void hold(const TimedLaunch& kernel, const char* who, const ProblemShape& s, double ms) {
    Driver& d = Driver::instance();
    d.synchronize();
    fmt::print("HOLD {} {} {} {} start {:.3f}\n", who, s.m, s.n, s.k, unix_seconds());
    std::fflush(stdout);
    settle({kernel}, ms);
    d.synchronize();
    fmt::print("HOLD {} {} {} {} stop {:.3f}\n", who, s.m, s.n, s.k, unix_seconds());
    std::fflush(stdout);
}

int bench_gemm(const GemmOptions& given) {
    const long long iterations = given.iterations;
    const std::string& config_text = given.config_text;
    const std::string& csv_path = given.csv_path;
    const bool with_out_proj = !given.identity_only;
    if (iterations < 1 || iterations > 100000)
        throw Error(fmt::format("bench gemm: need 1 <= --iters <= 100000, got {}", iterations));
    // At most 10 minutes of one kernel per shape: longer is a typo, not a measurement.
    if (!(given.hold_ms >= 0 && given.hold_ms <= 600000))
        throw Error(fmt::format("bench gemm: need 0 <= --hold-ms <= 600000, got {}", given.hold_ms));
    // --iters launches of each kernel, in rounds of up to 5 (interleaved_ms).
    const int per_round = static_cast<int>(std::min<long long>(iterations, 5));
    const int rounds = static_cast<int>((iterations + per_round - 1) / per_round);
    const std::vector<ProblemShape> shapes = gemm_shapes(given);
    CompileOptions base;
    if (!config_text.empty()) {
        base.config = KernelConfig::parse(config_text);
    }
    std::unique_ptr<std::ofstream> csv;
    if (!csv_path.empty()) {
        csv = std::make_unique<std::ofstream>(csv_path);
        if (!*csv) throw Error(fmt::format("bench gemm: cannot write the --csv file '{}'", csv_path));
        *csv << "epilogue,m,n,k,ms,tflops,config\n";
    }
    Driver& d = Driver::instance();
    if (!d.available()) throw Error("bench gemm needs a GPU: " + d.unavailable_reason());
    d.ensure_context();

    // Every kernel first (the default config may differ per shape: CompileOptions::shape lets the tuning
    // database choose), so that no compile runs between timed launches.
    const DType input = given.fp8.empty() ? DType::BF16 : *parse_dtype(given.fp8);
    const Graph identity_g = identity_graph(input), out_proj_g = blocks::out_proj(GemmSpec{input, Major::K, Major::K});
    const Graph blockwise_g = block_scaled_identity_graph(input);
    const std::optional<Graph> promoted_g =
        given.promoted ? std::optional<Graph>(promoted_identity_graph(input)) : std::nullopt;
    std::vector<const Graph*> graphs{&identity_g};
    if (with_out_proj) graphs.push_back(&out_proj_g);
    if (given.block_scales) graphs.push_back(&blockwise_g);
    if (promoted_g) graphs.push_back(&*promoted_g);
    struct Kernels {
        Kernel identity;
        std::optional<Kernel> out_proj;      // none with --identity-only
        std::vector<std::int64_t> partials;  // shape of out_proj's x1_sumsq
        std::optional<Kernel> blockwise;     // with --block-scales
        std::optional<Kernel> promoted;      // with --promoted
    };
    std::vector<WarmJob> jobs;
    for (const ProblemShape& s : shapes)
        for (const Graph* g : graphs) {
            CompileOptions options = base;
            options.shape = s;
            jobs.push_back({g, options});
        }
    warm_in_parallel(jobs, d.current_device().arch);
    std::vector<Kernels> kernels;
    std::size_t max_mk = 0, max_nk = 0, max_mn = 0, max_n = 0, max_partials = 0;
    for (const ProblemShape& s : shapes) {
        CompileOptions options = base;
        options.shape = s;
        Kernels kk{Runtime::instance().compile(identity_g, options), std::nullopt, {}, std::nullopt, std::nullopt};
        if (given.block_scales) kk.blockwise = Runtime::instance().compile(blockwise_g, options);
        if (promoted_g) kk.promoted = Runtime::instance().compile(*promoted_g, options);
        if (with_out_proj) {
            kk.out_proj = Runtime::instance().compile(out_proj_g, options);
            kk.partials = kk.out_proj->partials_shape("x1_sumsq", s.m, s.n);
            max_partials = std::max(max_partials, elements(kk.partials[0], kk.partials[1]));
        }
        max_mk = std::max(max_mk, elements(s.m, s.k));
        max_nk = std::max(max_nk, elements(s.n, s.k));
        max_mn = std::max(max_mn, elements(s.m, s.n));
        max_n = std::max(max_n, static_cast<std::size_t>(s.n));
        kernels.push_back(std::move(kk));
    }

    // One set of buffers, sized for the largest shape, serves every shape. The operands are not rotated
    // between launches (torch.matmul's baseline does not rotate either): the smallest shapes' operands fit in
    // the 50 MB L2, but a GEMM is compute-bound and re-reads its operand tiles from L2 many times within one
    // launch anyway, so starting with them in L2 changes little. Rotation matters for memory-bound kernels.
    std::mt19937_64 rng(7);
    const auto a = large_random_buffer(rng, max_mk, input, verify::Distribution::Normal);
    const auto b = large_random_buffer(rng, max_nk, input, verify::Distribution::Normal);
    const DeviceBuffer d_out(max_mn * 2);
    // The block scales (--block-scales), one buffer each sized for the largest shape: positive values around 1.
    const std::vector<BlockScaleOperand>& scale_operands = block_scale_operands(blockwise_g.spec());
    std::vector<DeviceBuffer> scales;
    for (const BlockScaleOperand& operand : scale_operands) {
        if (!given.block_scales) break;
        std::size_t largest = 0;
        for (const ProblemShape& s : shapes) {
            const BlockScaleShape shape = operand.shape(s.m, s.n, s.k);
            largest = std::max(largest, elements(shape.rows, shape.cols));
        }
        scales.push_back(random_buffer(rng, largest, operand.dtype, verify::Distribution::Positive));
    }
    DeviceBuffer residual, gamma, x1, h, partials;  // out_proj's; left empty with --identity-only
    if (with_out_proj) {
        residual = large_random_buffer(rng, max_mn, DType::BF16, verify::Distribution::Normal);
        gamma = random_buffer(rng, max_n, DType::BF16, verify::Distribution::Positive);
        x1 = DeviceBuffer(max_mn * 2);
        h = DeviceBuffer(max_mn * 2);
        partials = DeviceBuffer(max_partials * 4);
    }

    std::printf("%-10s %6s %6s %6s %10s %9s %9s  %s\n", "epilogue", "M", "N", "K", "ms", "TFLOP/s", "/identity",
                "config");
    double log_ratio_sum = 0, log_blockwise_sum = 0, log_promoted_sum = 0;
    const auto report = [&](const char* epilogue, const ProblemShape& s, double ms, double vs_identity,
                            const Kernel& kernel) {
        const double tflops = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k) /
                              ms / 1e9;
        const std::string config = kernel.config() ? kernel.config()->to_text() : "fixed tile";
        const std::string ratio = vs_identity > 0 ? fmt::format("{:.3f}", vs_identity) : "-";
        fmt::print("{:<10} {:>6} {:>6} {:>6} {:>10.4f} {:>9.1f} {:>9}  {}\n", epilogue, s.m, s.n, s.k, ms, tflops,
                   ratio, config);
        std::fflush(stdout);
        if (csv) *csv << fmt::format("{},{},{},{},{:.5f},{:.2f},{}\n", epilogue, s.m, s.n, s.k, ms, tflops, config)
                      << std::flush;
    };
    for (std::size_t i = 0; i < shapes.size(); ++i) {
        const ProblemShape& s = shapes[i];
        Args ia;
        ia.bind("A", matrix(ptr(a), input, s.m, s.k)).bind("B", matrix_col_major(ptr(b), input, s.k, s.n));
        ia.bind("D", matrix(ptr(d_out), DType::BF16, s.m, s.n));
        if (input != DType::BF16) ia.bind("scale", 1.0f);
        std::vector<TimedLaunch> launches{{&kernels[i].identity, &ia}};
        // --stream-k-ab: the same identity kernel without stream-K first (the reference), then with it.
        if (given.stream_k_ab)
            launches = {{&kernels[i].identity, &ia, StreamK::Never}, {&kernels[i].identity, &ia, StreamK::Always}};
        Args ba;
        std::size_t blockwise_at = 0;
        if (given.block_scales) {
            ba.bind("A", matrix(ptr(a), input, s.m, s.k)).bind("B", matrix_col_major(ptr(b), input, s.k, s.n));
            ba.bind("D", matrix(ptr(d_out), DType::BF16, s.m, s.n));
            for (std::size_t j = 0; j < scales.size(); ++j) {
                const BlockScaleShape shape = scale_operands[j].shape(s.m, s.n, s.k);
                ba.bind(std::string(scale_operands[j].name),
                        matrix(ptr(scales[j]), scale_operands[j].dtype, shape.rows, shape.cols));
            }
            blockwise_at = launches.size();
            launches.push_back({&*kernels[i].blockwise, &ba});
        }
        // The promoted identity reads the same operands and scale as the fast one.
        std::size_t promoted_at = 0;
        if (promoted_g) {
            promoted_at = launches.size();
            launches.push_back({&*kernels[i].promoted, &ia});
        }
        Args oa;
        if (with_out_proj) {
            const auto& pshape = kernels[i].partials;
            oa.bind("A", matrix(ptr(a), input, s.m, s.k)).bind("B", matrix_col_major(ptr(b), input, s.k, s.n));
            oa.bind("residual", matrix(ptr(residual), DType::BF16, s.m, s.n))
                .bind("gamma", vector(ptr(gamma), DType::BF16, s.n));
            oa.bind("x1", matrix(ptr(x1), DType::BF16, s.m, s.n)).bind("h", matrix(ptr(h), DType::BF16, s.m, s.n));
            oa.bind("x1_sumsq", matrix(ptr(partials), DType::F32, pshape[0], pshape[1]));
            launches.push_back({&*kernels[i].out_proj, &oa});
        }
        // Identity and out-proj in interleaved rounds (kernel_timing.hpp), so that their ratio sees one GPU.
        const Interleaved t = interleaved_ms(launches, rounds, per_round);
        report("identity", s, t.ms[0], 0, kernels[i].identity);
        if (given.stream_k_ab) report("identity+sk", s, t.ms[1], t.vs_first[1], kernels[i].identity);
        if (given.block_scales) {
            report("blockwise", s, t.ms[blockwise_at], t.vs_first[blockwise_at], *kernels[i].blockwise);
            log_blockwise_sum += std::log(t.vs_first[blockwise_at]);
        }
        if (promoted_g) {
            report("promoted", s, t.ms[promoted_at], t.vs_first[promoted_at], *kernels[i].promoted);
            log_promoted_sum += std::log(t.vs_first[promoted_at]);
        }
        if (with_out_proj) {
            report("out_proj", s, t.ms.back(), t.vs_first.back(), *kernels[i].out_proj);
            log_ratio_sum += std::log(t.vs_first.back());
        }
        if (given.hold_ms > 0) {
            hold(launches[0], "coda", s, given.hold_ms);
            // Block-scaled too: whether its time over the per-tensor one's is clock (power) or cycles.
            if (given.block_scales) hold(launches[blockwise_at], "coda_blockwise", s, given.hold_ms);
        }
    }
    if (with_out_proj && shapes.size() > 1)
        std::printf("out_proj / identity time, geometric mean over %s: %.3f\n", counted(shapes.size(), "shape").c_str(),
                    std::exp(log_ratio_sum / static_cast<double>(shapes.size())));
    if (given.block_scales && shapes.size() > 1)
        std::printf("blockwise / per-tensor identity time, geometric mean over %s: %.3f\n",
                    counted(shapes.size(), "shape").c_str(),
                    std::exp(log_blockwise_sum / static_cast<double>(shapes.size())));
    if (promoted_g && shapes.size() > 1)
        std::printf("promoted / fast identity time, geometric mean over %s: %.3f\n",
                    counted(shapes.size(), "shape").c_str(),
                    std::exp(log_promoted_sum / static_cast<double>(shapes.size())));
    if (csv && !*csv) throw Error(fmt::format("bench gemm: writing the --csv file '{}' failed", csv_path));
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

// Mean seconds of one call of `body`, over `calls` calls in batches of `batch`, with `between` (untimed) after
// each batch: launches pile up in the stream's queue, and once it is full cuLaunchKernel waits for the GPU, which
// would time the kernel instead of the host.
template <class Body, class Between>
double mean_seconds(int calls, int batch, Body&& body, Between&& between) {
    double total = 0;
    for (int done = 0; done < calls; done += batch) {
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < batch; ++i) body();
        total += seconds_since(start);
        between();
    }
    return total / calls;
}

// Arguments of the shapes a kernel of `g` takes at M x N x K, at made-up (aligned, never dereferenced) addresses:
// what the host-side checks see, without a GPU.
Args shape_only_args(const CheckedGraph& g, long long m, long long n, long long k, TileShape tile) {
    std::uintptr_t next = 0x100000000;
    const auto address = [&next] { return reinterpret_cast<const void*>(next += 1 << 20); };
    Args args;
    if (g.graph.domain() == Domain::Gemm) {
        const GemmSpec spec = g.graph.spec();
        args.bind("A", spec.a == Major::MN ? matrix_col_major(address(), spec.input, m, k)
                                           : matrix(address(), spec.input, m, k));
        args.bind("B", spec.b == Major::K ? matrix_col_major(address(), spec.input, k, n)
                                          : matrix(address(), spec.input, k, n));
    }
    for (const Binding& b : g.bindings) {
        if (b.role == BindingRole::ScalarArg) args.bind(b.name, 1.0f);
        else if (b.role == BindingRole::Partials) args.bind(b.name, matrix(address(), DType::F32, 2, m));
        else if (b.role == BindingRole::RowPartials || b.role == BindingRole::ColPartials) {
            const auto shape = partials_shape(b, tile, m, n);
            args.bind(b.name, matrix(address(), DType::F32, shape[0], shape[1]));
        } else if (b.kind == Kind::Tile) args.bind(b.name, matrix(address(), b.dtype, m, columns(b.width, n)));
        else if (b.kind == Kind::Row) args.bind(b.name, vector(address(), b.dtype, m));
        else args.bind(b.name, vector(address(), b.dtype, columns(b.width, n)));
    }
    return args;
}

// The host-side work of the hot path that needs no GPU, per block kernel: the default config Runtime::compile
// computes on every call (part of its fast-path key), Kernel::launch's binding checks, and a BoundLaunch's
// pointer check on rebind (before it packs again).
void bench_host_path(const std::string& arch) {
    const long long m = 256, n = 256, k = 256;
    const TargetDevice device{"NVIDIA H200", 132};  // so that the tuning database is consulted, as on a GPU
    constexpr int kCalls = 100000;
    std::printf("%-33s %14s %14s %14s\n", "kernel", "config (ns)", "checks (ns)", "rebind (ns)");
    for (const Graph& g : blocks::llama_block()) {
        const CheckedGraph checked = check_graph(g);
        const TileShape tile{128, 128};
        const Args args = shape_only_args(checked, m, n, k, tile);
        const ProblemShape shape{m, n, k};
        const auto none = [] {};
        const double config_s = mean_seconds(kCalls, kCalls, [&] {
            const auto c = default_config_on(g, arch, shape, device);
            asm volatile("" : : "r"(&c) : "memory");
        }, none);
        const double checks_s = mean_seconds(kCalls, kCalls, [&] {
            const LaunchPlan plan = plan_launch(checked, tile, args, g.name());
            asm volatile("" : : "r"(&plan) : "memory");
        }, none);
        // The first tensor binding of the graph (A for GEMMs), pointed at the address it already has.
        LaunchPlan plan = plan_launch(checked, tile, args, g.name());
        std::string name = g.domain() == Domain::Gemm ? "A" : "";
        for (const Binding& b : checked.bindings)
            if (name.empty() && b.role != BindingRole::ScalarArg) name = b.name;
        const void* data = args.tensors().at(name).data;
        const double rebind_s = mean_seconds(kCalls, kCalls, [&] { rebind_pointer(checked, plan, name, data, g.name()); },
                                             none);
        std::printf("%-33s %14.0f %14.0f %14.0f\n", g.name().c_str(), config_s * 1e9, checks_s * 1e9, rebind_s * 1e9);
    }
}

int bench_jit(const std::string& requested_arch, bool host_only) {
    if (host_only) {
        bench_host_path(requested_arch.empty() ? std::string("sm_90a") : target_arch(requested_arch));
        return 0;
    }
    const std::string arch = target_arch(requested_arch);
    Driver& d = Driver::instance();
    const std::filesystem::path dir = make_temp_directory();
    // cold: validate + codegen + NVRTC + publish; disk: the same graph in a fresh process-level cache, read back
    // from disk; warm: the whole pipeline again with the entry in memory (what `coda warm` pays per cached kernel).
    std::printf("%-33s %12s %12s %12s\n", "kernel", "cold (s)", "disk (ms)", "warm (us)");
    for (const Graph& g : blocks::llama_block()) {
        // Each kernel as Runtime::compile builds it by default on this arch (Hopper mainloop on sm_90a).
        const std::optional<KernelConfig> config = Runtime::instance().default_config(g, arch);
        const BuildTarget target{arch, &mainloop_for(g, config, arch), config};
        KernelCache first(dir, true);
        auto start = std::chrono::steady_clock::now();
        const auto built = build_kernel(g, target, first);
        const double cold_s = seconds_since(start);
        if (built.cached.hit != CacheHit::Built) throw InternalError("cold compile found a cache entry");
        KernelCache second(dir, true);
        start = std::chrono::steady_clock::now();
        const auto from_disk = build_kernel(g, target, second);
        const double disk_s = seconds_since(start);
        if (from_disk.cached.hit != CacheHit::Disk) throw InternalError("expected a disk-cache hit");
        constexpr int kRepeats = 200;
        start = std::chrono::steady_clock::now();
        for (int i = 0; i < kRepeats; ++i) build_kernel(g, target, second);
        const double memory_s = seconds_since(start) / kRepeats;
        std::printf("%-33s %12.3f %12.3f %12.1f\n", g.name().c_str(), cold_s, disk_s * 1e3, memory_s * 1e6);
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
    if (!d.available()) return 0;

    // Host time of the hot path a training step takes, on a 256^3 GEMM: Runtime::compile (memory hit) +
    // Kernel::launch; Kernel::launch alone; a BoundLaunch's launch; and cuLaunchKernel's own share (the bound
    // launch without coda's context check). Batches of 100 launches, the stream drained between them.
    d.ensure_context();
    std::mt19937_64 rng(11);
    const long long m = 256, n = 256, k = 256;
    const auto a = random_buffer(rng, static_cast<std::size_t>(m * k), DType::BF16, verify::Distribution::Normal);
    const auto b = random_buffer(rng, static_cast<std::size_t>(n * k), DType::BF16, verify::Distribution::Normal);
    DeviceBuffer out(static_cast<std::size_t>(m * n) * 2);
    const Graph g = identity_graph();
    const Kernel kernel = Runtime::instance().compile(g);
    Args ia;
    ia.bind("A", matrix(ptr(a), DType::BF16, m, k)).bind("B", matrix_col_major(ptr(b), DType::BF16, k, n));
    ia.bind("D", matrix(ptr(out), DType::BF16, m, n));
    const BoundLaunch bound = kernel.bind(ia);
    kernel.launch(ia);
    d.synchronize();
    constexpr int kLaunches = 5000, kBatch = 100;
    const auto drain = [&d] { d.synchronize(); };
    const double per_call =
        mean_seconds(kLaunches, kBatch, [&] { Runtime::instance().compile(g).launch(ia); }, drain);
    const double per_launch = mean_seconds(kLaunches, kBatch, [&] { kernel.launch(ia); }, drain);
    const double per_bound = mean_seconds(kLaunches, kBatch, [&] { bound.launch(); }, drain);
    const double per_bound_hit =
        mean_seconds(kLaunches, kBatch, [&] { Runtime::instance().compile(g); bound.launch(); }, drain);
    std::printf("host time, mean of %d calls in batches of %d (us):\n", kLaunches, kBatch);
    std::printf("  Runtime::compile (in-memory hit) + Kernel::launch: %.2f\n", per_call * 1e6);
    std::printf("  Kernel::launch alone:                              %.2f\n", per_launch * 1e6);
    std::printf("  Runtime::compile (in-memory hit) + BoundLaunch::launch: %.2f\n", per_bound_hit * 1e6);
    std::printf("  BoundLaunch::launch alone:                         %.2f\n", per_bound * 1e6);
    return 0;
}

struct TileOptions {
    long long m = 16384, n = 4096;
};

// Tile programs are memory-bound: report GB/s (bytes read + written) of a pure copy and of RoPE backward.
int bench_tile(const TileOptions& given) {
    const long long m = given.m, n = given.n;
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

void add_bench(Commands& commands, CLI::App& coda) {
    CLI::App& bench = *coda.add_subcommand("bench", "time coda's kernels (GPU) and its JIT");
    bench.require_subcommand(1);

    auto gemm = std::make_shared<GemmOptions>();
    CLI::App& gemm_command =
        commands.add(bench, "gemm", "GEMM TFLOP/s of the identity and out-proj epilogues (GPU); with no shape, the "
                                    "--shapes set",
                     [gemm] { return bench_gemm(*gemm); });
    CLI::Option* m = gemm_command.add_option("--m", gemm->m, "one shape: M (a dimension left out is 4096)")
                         ->type_name("M");
    CLI::Option* n = gemm_command.add_option("--n", gemm->n, "one shape: N")->type_name("N");
    CLI::Option* k = gemm_command.add_option("--k", gemm->k, "one shape: K")->type_name("K");
    gemm_command
        .add_option("--shapes", gemm->shape_set,
                    "set: the 12 shapes of docs/PERFORMANCE.md (default); llama: M=8192 against LLaMA MLP and "
                    "LM-head (N, K); all: both")
        ->type_name("SET")
        ->check(CLI::IsMember({"set", "llama", "all"}))
        ->excludes(m)
        ->excludes(n)
        ->excludes(k);
    gemm_command.add_option("--iters", gemm->iterations, "launches of each kernel, in rounds of 5 (default 50)")
        ->type_name("N");
    gemm_command.add_option("--hold-ms", gemm->hold_ms,
                            "after each shape's timing, run its identity kernel alone for MS of GPU time between "
                            "'HOLD coda M N K start|stop UNIX_SECONDS' lines, for clock and power sampling "
                            "(tools/bench_identity.sh), and with --block-scales then the block-scaled one between "
                            "'HOLD coda_blockwise ...' lines; default 0, off")
        ->type_name("MS");
    gemm_command.add_flag("--identity-only", gemm->identity_only,
                          "time the identity epilogue alone, without out-proj (what cuBLAS is compared with; also "
                          "what a profiler filtering on hopper_gemm should see)");
    gemm_command.add_flag("--stream-k-ab", gemm->stream_k_ab,
                          "time the identity kernel without stream-K (reported as identity) and with it "
                          "(identity+sk, its time over identity's), interleaved; needs --identity-only")
        ->needs("--identity-only");
    gemm_command
        .add_option("--fp8", gemm->fp8,
                    "FP8 operands (e4m3 or e5m2), both K-major, the identity scaled by a per-tensor scale "
                    "(tools/bench_torch.py --fp8 times torch._scaled_mm the same way); default bf16")
        ->type_name("TYPE")
        ->check(CLI::IsMember({"e4m3", "e5m2"}));
    gemm_command
        .add_flag("--block-scales", gemm->block_scales,
                  "also time the block-scaled identity (one scale per row of A and 128 k, one per 128 x 128 block of "
                  "B, applied in the mainloop), interleaved with the per-tensor one: its time over theirs")
        ->needs("--fp8");
    gemm_command
        .add_flag("--promoted", gemm->promoted,
                  "also time the per-tensor identity with promoted accumulation (each 128-k block's sum added into "
                  "f32, as torch._scaled_mm without use_fast_accum), interleaved with the fast one: its time over "
                  "the fast one's")
        ->needs("--fp8");
    gemm_command.add_option("--config", gemm->config_text, "the tile config instead of the default")->type_name("TEXT");
    gemm_command.add_option("--csv", gemm->csv_path, "also write the results to this CSV file")->type_name("FILE");

    auto arch = std::make_shared<std::string>();
    auto host_only = std::make_shared<bool>(false);
    CLI::App& jit_command = commands.add(bench, "jit", "cold NVRTC compile, disk-hit and memory-hit times; host time "
                                                       "of a launch, plain and bound (GPU)",
                                         [arch, host_only] { return bench_jit(*arch, *host_only); });
    add_arch_option(jit_command, *arch);
    jit_command.add_flag("--host-only", *host_only,
                         "only the hot path's host work that needs no GPU, per block kernel: default config, "
                         "binding checks, rebind (ns)");

    auto tile = std::make_shared<TileOptions>();
    CLI::App& tile_command = commands.add(bench, "tile", "GB/s of tile programs: a copy and RoPE backward (GPU)",
                                          [tile] { return bench_tile(*tile); });
    tile_command.add_option("--m", tile->m, "M (default 16384)")->type_name("M");
    tile_command.add_option("--n", tile->n, "N (default 4096)")->type_name("N");

    add_bench_epilogue(commands, bench);
    add_bench_block(commands, bench);
}

}  // namespace coda::cli
