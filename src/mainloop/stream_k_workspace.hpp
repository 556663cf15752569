// Stream-K's scratch for the Hopper mainloop (hopper_gemm.cuh, TileOrder): where a CTA that multiplied the last
// k-tiles of a tile publishes its partial sum, and the flags that say it is there. One buffer per CUDA context and
// stream, shared by every kernel launched on that stream: launches on one stream run one after the other, and each
// launch leaves every flag at zero (the CTA that reads a partial lowers its flag). Launches on different streams
// get different buffers, so they may overlap.
#pragma once

#include <cstddef>

#include <cuda.h>

namespace coda {

struct StreamKWorkspace {
    float* partials = nullptr;        // `partial_bytes` bytes, as asked
    unsigned* partial_flags = nullptr;  // kStreamKFlags flags, zero between launches
};

// Flags in a workspace: two per CTA (one per consumer warpgroup) for grids of up to this many CTAs / 2.
constexpr int kStreamKFlags = 4096;

// The workspace of the current context's `stream`, with room for `partial_bytes` of partial sums: grown (and its
// flags zeroed, in stream order) when smaller. A buffer it outgrows stays allocated until the process ends, since
// earlier launches on the stream may still be reading it.
StreamKWorkspace stream_k_workspace(CUstream stream, std::size_t partial_bytes);

}  // namespace coda
