// Timing kernels on the device for coda bench and coda tune: device tensors with random contents for every
// binding of a GEMM graph, and the median time of launches measured with device events.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "coda/runtime.hpp"
#include "config/settings.hpp"
#include "driver/cuda_driver.hpp"

namespace coda::cli {

// The benchmark shapes of `coda bench gemm` and `coda tune` without --m/--n/--k: M (tokens per step) in
// {4096, 16384} against the (N, K) of a LLaMA-3-8B-sized block's projections (attention out / q 4096x4096,
// fused QKV with 8 KV heads 6144x4096, gate/up 14336x4096, down 4096x14336) and two square sizes.
// tools/bench_torch.py times the same set, from tools/gemm_shapes.py (SET_M, SET_NK): keep the two lists equal.
std::vector<ProblemShape> gemm_shape_set();

// The shapes of `coda bench gemm --shapes llama`: M = 8192 tokens against the (N, K) of LLaMA-family projections
// that the set above lacks: a LLaMA-2-7B MLP (gate/up 11008x4096, down 4096x11008), a TinyLlama-1.1B MLP
// (5632x2048, 2048x5632) and the LLaMA-3 LM head (vocabulary 128256 x 4096; its D alone is 2 GiB of bf16).
// tools/bench_torch.py times the same shapes, from tools/gemm_shapes.py (LLAMA_M, LLAMA_NK): keep them equal.
std::vector<ProblemShape> llama_shape_set();

// Median milliseconds of `iterations` launches after `warmup` launches: launched back to back, each timed on the
// GPU by the events recorded between them (so the host's cost of a launch is not in its time).
double median_ms(const Kernel& kernel, const Args& args, int warmup, int iterations);

// Builds every (graph, options) for arch into the kernel cache, on all cores, before anything is launched: a
// compile takes seconds and a benchmark needs dozens of kernels. Rethrows the first failure.
struct WarmJob {
    const Graph* graph;
    CompileOptions options;
};
void warm_in_parallel(const std::vector<WarmJob>& jobs, const std::string& arch);

// One kernel with its arguments, for the timing functions below.
struct TimedLaunch {
    const Kernel* kernel;
    const Args* args;
    std::optional<StreamK> stream_k;  // stream-K for this kernel's launches (Never, Always); none: CODA_STREAM_K
};

// Runs the kernels in turn, back to back, for `ms` of GPU time. Under sustained load a GPU's clock settles where
// its power limit holds it (an H200 at 700 W: from 1.98 GHz to about 1.2-1.5 GHz, depending on the kernel) within
// a fraction of a second. A kernel timed from idle, or right after lighter or heavier work, runs at a clock that
// sustained work (a training step) does not see, and comparisons between benchmarks that ran after different work
// would measure that history. tools/bench_torch.py settles its baselines the same way.
void settle(const std::vector<TimedLaunch>& launches, double ms);
constexpr double kSettleMs = 500;

// Kernels timed side by side, after settling (kSettleMs): `rounds` rounds, each timing every kernel in turn (the median of `per_round`
// launches). The GPU's clocks drift over a run (power, temperature), and one kernel timed after another sees a
// different GPU; interleaving exposes all of them to the same drift. For each kernel: the median over rounds of
// its time, and of its time over kernel 0's in the same round (the ratio that comparisons should quote).
struct Interleaved {
    std::vector<double> ms;
    std::vector<double> vs_first;
};
Interleaved interleaved_ms(const std::vector<TimedLaunch>& launches, int rounds, int per_round);

// Kernels timed each alone: settled by itself (kSettleMs of its own launches), then the median of `iterations`
// launches; twice, the second pass in reverse order, and per kernel the mean of its two medians, so that a drift
// over the run hits every kernel alike. At the power limit, kernels interleaved share one clock, set by the power of
// their mix: a kernel that spends less energy per launch shows its clock gain only when timed alone.
std::vector<double> solo_ms(const std::vector<TimedLaunch>& launches, int iterations);

// Random device tensors for every binding of a kernel at M x N x K: for a GEMM graph A and B in the graph's
// layouts; inputs random (never zeros: zeros run faster than real data), outputs and partials allocated. A tile
// program binds its M x N tensors (K unused); a finalizer binds vectors of length M and partials of
// `partial_tiles` x M (the T of the kernel that wrote them).
// Buffers are kept by name and size for as long as the object lives: kernels of one graph with other tile
// configs share the inputs, each gets partials of its own size, and every Args returned stays valid (kernels
// bound one after another are timed together). Needs a GPU.
class RandomBindings {
public:
    RandomBindings(std::int64_t m, std::int64_t n, std::int64_t k, std::uint64_t seed = 1);
    Args bind(const Kernel& kernel, std::int64_t partial_tiles = 0);

private:
    enum class Fill { None, Normal, Positive, Index };
    const DeviceBuffer& buffer(const std::string& name, DType dtype, std::size_t count, Fill fill, double scale = 1.0);

    std::int64_t m_, n_, k_;
    std::uint64_t seed_;
    std::map<std::pair<std::string, std::size_t>, DeviceBuffer> buffers_;
};

}  // namespace coda::cli
