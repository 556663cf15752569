// The runtime: turns a graph into a loaded kernel (validate -> codegen -> cache/NVRTC -> load) and
// launches it. Runtime::instance() is coda's one global object; it is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "coda/args.hpp"
#include "coda/graph.hpp"
#include "coda/kernel_config.hpp"

struct CUstream_st;

namespace coda {

// The problem a kernel is meant for. Any field 0: unknown. The default config and the tuning database
// (coda tune) use it to pick a tile; the kernel still runs on any shape.
struct ProblemShape {
    std::int64_t m = 0, n = 0, k = 0;
};

// The CTA tile of a kernel: bm x bn output elements per tile. It cuts reduction partials.
struct TileShape {
    int bm = 0;
    int bn = 0;
};

struct CompileOptions {
    // The target, e.g. "sm_90a". Empty: CODA_ARCH, else the current device's.
    std::string arch;
    // The tile config, which also picks the mainloop (a HopperConfig needs sm_90a). Empty: the default, i.e. a
    // `coda tune` record for this GPU, graph and shape when one exists, else the default of the arch's mainloop
    // (sm_90a: HopperConfig{}, other archs: PortableConfig{}). Tile programs and finalizers have a fixed tile:
    // giving them a config is a coda::Error.
    std::optional<KernelConfig> config;
    ProblemShape shape;  // helps choose the default config; the kernel still runs on any shape
};

// What building a kernel did: where it came from and what it cost.
struct BuildReport {
    std::string kernel_name;   // graph name and hash, e.g. "out_proj-3f2a9c01d4e5b6a7"
    std::string arch;
    std::string cache_key;
    enum class From { Memory, Disk, Compiled } from = From::Compiled;
    double seconds = 0;        // wall time of this request (compile, disk read or memory lookup)
    // From the ptxas report. -1: no report, which happens when the CUDA driver's compute cache served NVRTC's
    // ptxas step (set CUDA_CACHE_DISABLE=1 to always get one).
    int registers = -1;
    int spill_bytes = -1;      // spill stores + loads
    int stack_frame_bytes = -1;
};

struct LoadedKernel;
struct LaunchPlan;
class BoundLaunch;

// A compiled kernel loaded on the current device. Cheap to copy; launch() is the hot path. Launches must come from the
// CUDA context it was loaded in (a coda::Error otherwise); a thread with no current context gets device 0's primary
// context made current first, as compile() does (PyTorch's autograd worker has none until its first CUDA call).
class Kernel {
public:
    // Checks every binding (names, dtypes, shapes, strides, alignment) and launches on `stream`. A launch the
    // kernel's mainloop cannot run (the Hopper mainloop's TMA needs 16-byte aligned A and B with leading dimensions
    // that are multiples of 8) runs on the portable mainloop with the same tile instead, compiled on first need and
    // reported once through the log; unless the kernel was compiled with a config the user gave, where it is a
    // coda::Error. A launch whose tile tensors a Hopper kernel cannot stage (not 16-byte aligned) runs on the same
    // config's direct variant (HopperConfig::direct), compiled on first need, config given or not.
    void launch(const Args& args, CUstream_st* stream = nullptr) const;
    // The same checks (and the same choice of mainloop) once, for launching these arguments again and again: the
    // launch's parameters are packed (the Hopper mainloop's tensor maps encoded) and BoundLaunch::launch is one
    // cuLaunchKernel. A coda::Error for any argument launch() would reject.
    BoundLaunch bind(const Args& args) const;
    const Graph& graph() const;
    // The tile config it was built with; empty for tile programs and finalizers (their tile is fixed).
    const std::optional<KernelConfig>& config() const;
    const BuildReport& report() const;
    // The CTA tile, as the kernel reports it (0 x 0 for finalizers).
    TileShape tile() const;
    const std::string& source() const;
    // Shape of a reduction's partials tensor for a problem of m rows and n (full) columns.
    std::vector<std::int64_t> partials_shape(const std::string& name, std::int64_t m, std::int64_t n) const;

private:
    friend class Runtime;
    const LoadedKernel& loaded() const;  // throws coda::Error for an empty Kernel
    static const LoadedKernel* fallback_of(const LoadedKernel& k, const LaunchPlan& plan, const std::string& why,
                                           bool pinned);
    friend class BoundLaunch;
    // The kernel that runs a checked launch: this one, or its fallback when its mainloop cannot (see launch()).
    const LoadedKernel& runner(const LaunchPlan& plan) const;
    std::shared_ptr<const LoadedKernel> impl_;
    bool pinned_ = false;  // compiled with a config the user gave: a launch its mainloop cannot run is an error
};

// A kernel's launch with its arguments checked and packed once (Kernel::bind): what a training loop that launches
// the same kernel on the same buffers step after step holds. It keeps its kernel loaded. Launching it from several
// threads at once is fine; rebinding it while another thread launches it is not.
class BoundLaunch {
public:
    BoundLaunch();
    BoundLaunch(BoundLaunch&&) noexcept;
    BoundLaunch& operator=(BoundLaunch&&) noexcept;
    ~BoundLaunch();

    // Launches on `stream`. A coda::Error when the calling thread's CUDA context is not the kernel's (a thread with
    // none gets device 0's primary context first, as Kernel::launch), or when empty.
    void launch(CUstream_st* stream = nullptr) const;
    // Points tensor binding `name` (or GEMM operand "A" / "B") at `data`, memory of the dtype, shape and strides
    // bound before. Checks the pointer as a new binding would (not null; aligned as the kernel's accesses need;
    // which mainloop runs it, as launch() decides) and packs the launch again (tensor maps included). On a
    // coda::Error the launch stays as it was.
    BoundLaunch& rebind(const std::string& name, const void* data);
    // Gives f32 scalar binding `name` a new value, or points it at one f32 in device memory (checked as at launch).
    BoundLaunch& rebind(const std::string& name, float value);
    BoundLaunch& rebind(const std::string& name, const DeviceScalar& value);
    const Kernel& kernel() const;

private:
    friend class Kernel;
    struct State;
    std::unique_ptr<State> state_;
};

class Runtime {
public:
    static Runtime& instance();

    // Builds (or finds in the cache) and loads the kernel for the current device (the current context's; with none,
    // device 0's primary context, made current). Needs a GPU.
    Kernel compile(const Graph& graph, const CompileOptions& options = {});
    // Builds (or finds in the cache) without loading: works with no GPU (coda warm). The arch is options.arch, else
    // CODA_ARCH, else the current device's; with none of them (no GPU) a coda::Error asks for options.arch.
    // Anything that is not sm_80 or newer is a coda::Error.
    BuildReport warm(const Graph& graph, const CompileOptions& options = {});
    // The CUDA source coda generates for the graph (no compile), for the arch and config warm() would use.
    std::string source(const Graph& graph, const CompileOptions& options = {});
    // The configuration coda uses for the graph on arch when CompileOptions::config is empty (for a problem of
    // `shape` when known): a tuned config from `coda tune` when one is recorded for this GPU, graph and shape
    // class, else the default of the arch's mainloop. Empty for tile programs and finalizers.
    std::optional<KernelConfig> default_config(const Graph& graph, const std::string& arch,
                                               const ProblemShape& shape = {}) const;

    Runtime(const Runtime&) = delete;
    Runtime& operator=(const Runtime&) = delete;

private:
    Runtime();
    ~Runtime();
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace coda
