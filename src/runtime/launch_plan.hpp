// Checks launch arguments against a kernel's bindings and turns them into kernel parameters. Runs on the
// host only (no GPU), so every mistake becomes a coda::Error before anything reaches the device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coda/args.hpp"
#include "ir/checked_graph.hpp"
#include "runtime/problem_abi.hpp"

namespace coda {

struct LaunchPlan {
    abi::GemmProblem gemm{};
    abi::TileProblem tile{};
    abi::FinalizeProblem finalize{};
    std::vector<std::uint64_t> slots;  // the EpilogueArgs words; at least one
    unsigned grid_x = 1;
    unsigned grid_y = 1;
};

// The CTA tile that cuts a kernel's reduction partials: the GEMM config's, or the tile program's fixed one.
struct TileShape {
    int bm = 0;
    int bn = 0;
};

// `kernel_name` is used in error messages only. `tma_operands`: the kernel reads A and B through TMA (the
// Hopper mainloop), which needs 16-byte aligned bases and leading dimensions that are multiples of 8 elements.
LaunchPlan plan_launch(const CheckedGraph& g, TileShape tile, const Args& args, const std::string& kernel_name,
                       bool tma_operands = false);

// Shape of the partials tensor a reduce_row / reduce_col binding writes for an m x n problem.
std::vector<std::int64_t> partials_shape(const Binding& b, TileShape tile, std::int64_t m, std::int64_t n);

}  // namespace coda
