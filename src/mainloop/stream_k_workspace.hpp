// Stream-K's scratch for the Hopper mainloop (hopper_gemm.cuh, TileOrder): where a CTA that multiplied the last
// k-tiles of a tile publishes its partial sum, and the flags that say it is there. One buffer per CUDA context and
// stream, shared by every kernel launched on that stream: launches on one stream run one after the other, and each
// launch leaves every flag at zero (the CTA that reads a partial lowers its flag). Launches on different streams
// get different buffers, so they may overlap.
#pragma once

#include <cstddef>
#include <optional>

#include <cuda.h>

#include "coda/kernel_abi.cuh"
#include "config/settings.hpp"

namespace coda {

struct StreamKWorkspace {
    float* partials = nullptr;        // `partial_bytes` bytes, as asked
    unsigned* partial_flags = nullptr;  // kStreamKFlags flags (templates/coda/kernel_abi.cuh), zero between launches
};

// The workspace of the current context's `stream`, with room for `partial_bytes` of partial sums: grown (and its
// flags zeroed, in stream order) when smaller. A buffer it outgrows stays allocated until the process ends, since
// earlier launches on the stream (or CUDA graphs captured from it) may still be reading it. Works while `stream` is
// being captured into a CUDA graph: the buffer is then allocated in relaxed capture mode and its flags' memset is
// captured with the launch. Graphs captured from one stream share its buffer, so their replays must not overlap.
StreamKWorkspace stream_k_workspace(CUstream stream, std::size_t partial_bytes);

// Whether a launch of `tiles` tiles of `k_tiles` k-tiles each on a persistent grid of `ctas` CTAs shares its last
// rounds by k-tiles: CODA_STREAM_K, unless a tool overrides it process-wide (set_stream_k_override; std::nullopt
// returns to the setting). Auto shares only where it measured faster (docs/PERFORMANCE.md, 2026-12-04, `coda bench
// gemm --stream-k-ab`, identity on an H200): with many rounds (31 to 64) and a last round at most half full it was
// 0.9-2.1% faster; with 3 to 15 rounds it was 1-24% slower (the shared rounds' CTAs multiply at different k, so
// neighbours no longer read the same A and B slices from L2 at once).
bool stream_k_shares(long long tiles, long long ctas, long long k_tiles);
void set_stream_k_override(std::optional<StreamK> mode);

}  // namespace coda
