// Finalizers (templates/coda/finalize_program.cuh): combine reduction partials into per-row values, each element's
// partials split among G threads of a warp. They take no config; G and the grid follow from the shape.
#pragma once

#include <optional>

#include "mainloop/mainloop.hpp"

namespace coda {

const Mainloop& finalize_program_mainloop();

// G, the threads that share one element's `t` partials in a vector of `l` elements (FinalizeProblem::strands): the
// power of two that brings L * G nearest a full GPU, but no more than kMaxFinalizeStrands, nor than the next power
// of two >= t.
int finalize_strands(long long l, long long t);
// A launch's G: CODA_FINALIZE_STRANDS, or finalize_strands, unless a tool overrides it process-wide (a test that
// runs every G; std::nullopt returns to the setting). `strands` is 1, 2, 4, ..., 32.
void set_finalize_strands_override(std::optional<int> strands);
// Blocks of kFinalizeThreads that give every group of kFinalizeWarpLanes / strands elements a warp, capped
// (the kernel's grid-stride loop takes the rest).
unsigned finalize_blocks(long long l, int strands);

}  // namespace coda
