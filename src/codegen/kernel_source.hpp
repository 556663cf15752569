// The whole CUDA translation unit of one kernel: banner, one kernel-template include, the generated functor
// and the launch-info constant, plus the name expression that NVRTC must instantiate and lower.
#pragma once

#include <string>

#include "coda/kernel_config.hpp"
#include "ir/checked_graph.hpp"

namespace coda {

struct KernelSource {
    std::string source;             // the whole CUDA translation unit
    std::string kernel_expression;  // for nvrtcAddNameExpression, e.g. "coda::tile_program<coda_gen::Epilogue>"
};

// `cfg` is used by gemm graphs only (tile programs and finalizers have fixed shapes); `arch` appears in the
// banner. The source defines extern "C" __constant__ int coda_kernel_info[12] = {threads, dynamic smem bytes,
// tile rows, tile columns (0, 0 for finalizers), mainloop (1: Hopper), pipeline stages, tile-tensor maps, whether
// tile inputs are TMA-loaded, chunk columns (these four 0 off the Hopper path), CTAs of a cluster, tile outputs
// stored by TMA, rows of their box (these two 0 off the Hopper path)}, which the runtime reads and checks after
// loading.
KernelSource generate_kernel_source(const CheckedGraph& g, const KernelConfig& cfg, const std::string& arch);

}  // namespace coda
