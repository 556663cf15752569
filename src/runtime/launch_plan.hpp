// Checks launch arguments against a kernel's bindings and turns them into kernel parameters. Runs on the
// host only (no GPU), so every mistake becomes a coda::Error before anything reaches the device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coda/args.hpp"
#include "coda/runtime.hpp"
#include "ir/checked_graph.hpp"
#include "coda/kernel_abi.cuh"

namespace coda {

// A launch's checked arguments: the problem (parameter 0 of the kernel's kind) and the epilogue's slots. Which
// grid runs it is the mainloop's business (mainloop/).
struct LaunchPlan {
    GemmProblem gemm{};
    TileProblem tile{};
    FinalizeProblem finalize{};
    std::vector<std::uint64_t> slots;  // the EpilogueArgs words; at least one
    long long m = 0;  // rows (finalize: elements)
    long long n = 0;  // full columns (finalize: 0)
    int operand_bytes = 2;  // GEMMs: bytes of an A or B element (GemmSpec::input)
};

// Checks the arguments of a launch of a kernel of graph `g` and tile `tile` (every binding bound and nothing else;
// dtypes, shapes, strides, alignment) and fills the plan. `kernel_name` is used in error messages only.
LaunchPlan plan_launch(const CheckedGraph& g, TileShape tile, const Args& args, const std::string& kernel_name);

// Points binding `name` of a checked plan at `data`, a tensor of the dtype, shape and strides it was planned with:
// checks what depends on the pointer (not null, the binding's alignment) as plan_launch does and rewrites the
// pointer's slot (for A and B, the problem's pointer and vector flags). A coda::Error for a name the kernel lacks
// or a scalar binding.
void rebind_pointer(const CheckedGraph& g, LaunchPlan& plan, const std::string& name, const void* data,
                    const std::string& kernel_name);
// The same for an f32 scalar binding: a new value, or a device scalar (checked as plan_launch checks one).
void rebind_scalar(const CheckedGraph& g, LaunchPlan& plan, const std::string& name, float value,
                   const std::string& kernel_name);
void rebind_scalar(const CheckedGraph& g, LaunchPlan& plan, const std::string& name, const DeviceScalar& value,
                   const std::string& kernel_name);

// Shape of the partials tensor a reduce_row / reduce_col binding writes for an m x n problem.
std::vector<std::int64_t> partials_shape(const Binding& b, TileShape tile, std::int64_t m, std::int64_t n);

}  // namespace coda
