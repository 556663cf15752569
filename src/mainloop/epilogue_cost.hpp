// What a GEMM epilogue costs its mainloop, as far as the default config heuristic needs to know, read off the
// graph's bindings (memoized per graph: Runtime::compile asks on every call).
#pragma once

#include "coda/graph.hpp"

namespace coda {

struct EpilogueTraffic {
    // Bytes of staged tile tensors per accumulator element, split by how the Hopper epilogue moves them between
    // registers and shared memory (templates/coda/hopper_staging.cuh): full-width 16-bit tensors as mma fragments
    // (one ldmatrix / stmatrix per four visits), every other tile tensor (f32, half or double width) by a shared
    // memory access per visit. An accumulate counts twice: it reads and writes.
    double fragment_bytes = 0;
    double per_visit_bytes = 0;
};

// For a GEMM graph; zero traffic for graphs that do not check (the compile that follows reports them).
EpilogueTraffic epilogue_traffic(const Graph& graph);

// Whether a GEMM graph's epilogue only stores the accumulator (a plain GEMM: every node is the accumulator or a
// store of it): the epilogue that costs a cooperative tile least, since its consumers stop for it together.
bool stores_accumulator_only(const Graph& graph);

// Whether a GEMM graph's epilogue only adds the accumulator into its output (D += acc: a weight gradient summed
// into an f32 gradient buffer).
bool accumulates_accumulator_only(const Graph& graph);

// Whether a GEMM graph's epilogue only scales the accumulator by scalars and stores it (a per-tensor FP8 GEMM:
// D = acc * scale_a * scale_b): one product a visit beyond a plain GEMM's, no tile or vector loads.
bool stores_scaled_accumulator_only(const Graph& graph);

}  // namespace coda
