// One kernel template's host side, behind one interface: the config it takes and its rules, its candidates and
// default, the template it instantiates, what its kernel reports about itself, and how it launches. codegen/ and
// runtime/ ask a Mainloop and never name one; mainloops.cpp lists them. GEMM mainloops (portable, Hopper) take a
// KernelConfig; the programs with no GEMM (tile programs, finalizers) have a fixed tile and take none.
#pragma once

#include <cuda.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coda/graph.hpp"
#include "coda/kernel_abi.cuh"
#include "coda/kernel_config.hpp"
#include "coda/runtime.hpp"
#include "runtime/launch_plan.hpp"

namespace coda {

// What the generated source instantiates: the header to include, the __global__ entry point (for NVRTC's name
// expression) and its traits, whose info() becomes the kernel's coda_kernel_info.
struct KernelTemplate {
    std::string header;
    std::string kernel;
    std::string traits;
};

// A config `coda tune` times, by a short name ("hp128x128").
struct NamedConfig {
    std::string name;
    KernelConfig config;
};

// A kernel's module as loaded, and what it said about itself.
struct LoadedModule {
    CUfunction function = nullptr;
    KernelInfo info{};
    std::string name;  // "<graph>-<hash>", for messages
};

// One launch packed into its kernel's parameters once: the grid, the checked plan (problem and slots) and any tensor
// maps, which the parameter pointers point into (so it neither moves nor copies). launch() is one cuLaunchKernel:
// what Kernel::bind hands a training loop.
struct PackedLaunch {
    PackedLaunch() = default;
    PackedLaunch(const PackedLaunch&) = delete;
    PackedLaunch& operator=(const PackedLaunch&) = delete;

    // Launches on `stream`, with the calling thread's current context (the kernel's own).
    void launch(CUstream stream) const;

    CUfunction function = nullptr;
    unsigned grid_x = 1, grid_y = 1, threads = 0, smem_bytes = 0;
    LaunchPlan plan;
    std::vector<CUtensorMap> maps;  // the Hopper mainloop's: A, B, then the tile maps
    std::vector<void*> params;
};

// A loaded kernel's launches: the mainloop's own rules on the arguments, its grid and its parameters.
class Launcher {
public:
    virtual ~Launcher() = default;
    // Why this kernel cannot run with these arguments, beyond the checks every kernel makes (plan_launch), or
    // "" when it can. The runtime may run another mainloop's kernel instead (Mainloop::fallback).
    virtual std::string unsupported(const LaunchPlan& plan) const = 0;
    // Launches on `stream`, with the calling thread's current context (the kernel's own).
    virtual void launch(const LaunchPlan& plan, CUstream stream) const = 0;
    // The same launch packed for launching again and again (`plan` must have passed unsupported()): `out` arrives
    // with the plan copied in and nothing else set.
    virtual void pack(PackedLaunch& out) const = 0;
};

class Mainloop {
public:
    virtual ~Mainloop() = default;

    virtual std::string_view name() const = 0;  // "portable", "hopper", "tile program", "finalizer"
    virtual Domain domain() const = 0;           // the graphs it runs
    virtual KernelKind kind() const = 0;         // what its kernels report in KernelInfo::kernel

    // Configs (GEMM mainloops; the others take none and keep these defaults).
    // The word its config text starts with ("hopper"); empty for mainloops without a config.
    virtual std::string_view config_word() const { return {}; }
    virtual bool owns(const KernelConfig&) const { return false; }
    virtual std::string config_to_text(const KernelConfig& config) const;
    // Reads "field=value" words (and bare flags) into this mainloop's config, starting from its default.
    // `text` is the whole config text, for messages.
    virtual KernelConfig parse_config(const std::vector<std::string>& words, const std::string& text) const;
    // Whether it is the default GEMM mainloop on `arch` (mainloops.cpp asks in list order).
    virtual bool default_on(const std::string& /*arch*/) const { return false; }
    // Its config type's defaults: what parse_config starts from.
    virtual KernelConfig base_config() const;
    // The config a graph gets when the user gives none and no tuned record applies (the default heuristic).
    virtual KernelConfig default_config(const Graph& /*graph*/, const ProblemShape& /*shape*/) const {
        return base_config();
    }
    virtual std::vector<NamedConfig> candidates() const { return {}; }
    // The candidates that `graph` can take on `arch` (validate admits them): all of them for most graphs, the
    // cooperative 128-row tiles for an FP8 GEMM that promotes each k-block (GemmSpec::promotes).
    std::vector<NamedConfig> candidates_for(const Graph& graph, const std::string& arch) const;
    // The config of another mainloop whose kernel runs a launch that this one's kernel of `config` cannot
    // (Launcher::unsupported), when the user gave no config: same tile, so that partials keep their shapes.
    virtual std::optional<KernelConfig> fallback_config(const KernelConfig& /*config*/) const { return std::nullopt; }
    // The config whose kernel runs `plan`, which this one's kernel of `config` cannot: a variant of `config` itself
    // where only its code is at issue (the Hopper mainloop's direct variant, for tile tensors it cannot stage; taken
    // even when the user gave the config), else fallback_config(config).
    virtual std::optional<KernelConfig> fallback_config(const KernelConfig& config, const LaunchPlan& /*plan*/) const {
        return fallback_config(config);
    }

    // What to do about a kernel of this mainloop that spills registers (ptxas), for the warning that says so.
    virtual std::string spill_advice() const { return {}; }

    // Code generation. validate throws a coda::Error naming the graph when the config (or the arch) breaks one of
    // the template's rules, before NVRTC sees anything.
    virtual void validate(const Graph& graph, const std::optional<KernelConfig>& config,
                          const std::string& arch) const = 0;
    virtual KernelTemplate instantiate(const Graph& graph, const std::optional<KernelConfig>& config) const = 0;
    // The config as it enters the cache key, the banner and the cache listing ("hopper bm=...", "tile bm=64 bn=128").
    virtual std::string key_text(const std::optional<KernelConfig>& config) const = 0;

    // Runtime: checks what the kernel reports against what the config asked for (an InternalError when they
    // differ), and makes the launcher.
    virtual std::unique_ptr<Launcher> load(const LoadedModule& module, const CheckedGraph& graph,
                                           const std::optional<KernelConfig>& config) const = 0;
};

// The `Config` alternative of a config given to the mainloop named `mainloop` (its `where` asks); an InternalError
// when it holds another one or none: mainloop_for hands each mainloop only its own configs. (Two overloads, so that
// the reference returned always points into the caller's config, never into a temporary optional.)
[[noreturn]] void throw_wrong_config(std::string_view mainloop, const char* where);

template <class Config>
const Config& config_as(const KernelConfig& config, std::string_view mainloop, const char* where) {
    const Config* c = std::get_if<Config>(&config.alternatives());
    if (c == nullptr) throw_wrong_config(mainloop, where);
    return *c;
}

template <class Config>
const Config& config_as(const std::optional<KernelConfig>& config, std::string_view mainloop, const char* where) {
    if (!config) throw_wrong_config(mainloop, where);
    return config_as<Config>(*config, mainloop, where);
}

// The launcher of kernels that run one CTA per output tile (the portable GEMM, tile programs): grid (M-tiles,
// N-tiles) of the tile the kernel reports; parameters (problem, slots), the problem being the plan's member that
// `problem` names.
enum class TileGridProblem { Gemm, Tile };
std::unique_ptr<Launcher> tile_grid_launcher(const LoadedModule& module, TileGridProblem problem);

// An InternalError when the kernel's report differs from what the host expected of its config.
void expect_reported(const LoadedModule& module, const char* what, int reported, int expected);

}  // namespace coda
