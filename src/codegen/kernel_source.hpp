// The whole CUDA translation unit of one kernel: banner, the mainloop's template include, the generated functor and
// the kernel's self-description, plus the name expression that NVRTC must instantiate and lower.
#pragma once

#include <optional>
#include <string>

#include "coda/kernel_config.hpp"
#include "ir/checked_graph.hpp"
#include "ir/prepared_graph.hpp"

namespace coda {

class Mainloop;

struct KernelSource {
    std::string source;             // the whole CUDA translation unit
    std::string kernel_expression;  // for nvrtcAddNameExpression, e.g. "coda::tile_program<coda_gen::Epilogue>"
};

// The source of `g` on `mainloop` with `config` (empty for mainloops that take none) for `arch`, which appears in
// the banner. Checks the arch (sm_80 or newer) and asks the mainloop to check the config first: a coda::Error names
// what is wrong. The source defines `extern "C" __constant__ coda::KernelInfo coda_kernel_info` from the template's
// traits (templates/coda/kernel_abi.cuh), which the runtime reads and checks after loading.
// The banner shows the graph's canonical text and hash as `g` carries them (the pipeline renders them once per build).
KernelSource generate_kernel_source(const PreparedGraph& g, const Mainloop& mainloop,
                                    const std::optional<KernelConfig>& config, const std::string& arch);

// The same for a graph checked on its own: renders its text and hash here.
KernelSource generate_kernel_source(const CheckedGraph& g, const Mainloop& mainloop,
                                    const std::optional<KernelConfig>& config, const std::string& arch);

}  // namespace coda
