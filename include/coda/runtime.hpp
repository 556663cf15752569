// The runtime: turns a graph into a loaded kernel (validate -> codegen -> cache/NVRTC -> load) and
// launches it. Runtime::instance() is coda's one global object; it is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
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

struct CompileOptions {
    std::string arch;                  // empty: the current device's (or CODA_ARCH)
    bool use_default_config = true;    // false: use `config`
    KernelConfig config;
    ProblemShape shape;                // helps choose the default config
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

// A compiled kernel loaded on the current device. Cheap to copy; launch() is the hot path.
class Kernel {
public:
    // Checks every binding (names, dtypes, shapes, strides, alignment) and launches on `stream`.
    void launch(const Args& args, CUstream_st* stream = nullptr) const;
    const Graph& graph() const;
    const KernelConfig& config() const;
    const BuildReport& report() const;
    const std::string& source() const;
    // Shape of a reduction's partials tensor for a problem of m rows and n (full) columns.
    std::vector<std::int64_t> partials_shape(const std::string& name, std::int64_t m, std::int64_t n) const;

private:
    friend class Runtime;
    const LoadedKernel& loaded() const;  // throws coda::Error for an empty Kernel
    std::shared_ptr<const LoadedKernel> impl_;
};

class Runtime {
public:
    static Runtime& instance();

    // Builds (or finds in the cache) and loads the kernel for the current device. Needs a GPU.
    Kernel compile(const Graph& graph, const CompileOptions& options = {});
    // Builds (or finds in the cache) without loading: works with no GPU (coda warm). arch names the target,
    // e.g. "sm_90a"; anything that is not sm_80 or newer is a coda::Error.
    BuildReport warm(const Graph& graph, const std::string& arch, const CompileOptions& options = {});
    // The CUDA source coda generates for the graph (no compile).
    std::string source(const Graph& graph, const std::string& arch, const CompileOptions& options = {});
    // The configuration coda would use for the graph on arch (for a problem of `shape` when known): a tuned
    // config from `coda tune` when one is recorded for this GPU, graph and shape class, else the default (on
    // sm_90a the Hopper mainloop's ping-pong 128 x 128, elsewhere the portable mainloop's tile).
    KernelConfig default_config(const Graph& graph, const std::string& arch, const ProblemShape& shape = {}) const;

    Runtime(const Runtime&) = delete;
    Runtime& operator=(const Runtime&) = delete;

private:
    Runtime();
    ~Runtime();
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace coda
