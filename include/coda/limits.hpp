// The most one graph may hold, in one place: coda::check (and so Runtime::compile and coda warm) rejects larger
// graphs before any code is generated, since beyond these NVRTC fails, crashes or runs for minutes.
#pragma once

namespace coda::limits {

// Nodes of a graph, sources and sinks included: 12 times the largest of the LLaMA block's epilogues. NVRTC's
// time grows faster than the graph: a cold `coda warm --arch sm_90a` of a chain of adds took 28 s at 256 nodes,
// 43 s at 384, 75 s at 512 and 350 s at 4096 on a 2-core machine (docs/GUIDE.md, "Limits").
inline constexpr int kMaxNodes = 256;

// Inputs and outputs a kernel binds at launch: tile, row and column inputs, scalars, partials, stores,
// accumulates and reductions (the LLaMA block's epilogues bind at most 7). Each takes one or two parameter slots,
// so the byte limit below may bind first.
inline constexpr int kMaxBindings = 128;

// Bytes of kernel parameters. 4096 is what every CUDA driver accepts; drivers from CUDA 12.1 on accept
// 32764 on Volta and newer, but a kernel built for them would not load on older drivers.
inline constexpr int kMaxKernelParamBytes = 4096;

// Parameter bytes of a kernel besides its epilogue's slots, in the worst case: the Hopper GEMM kernel
// (templates/coda/hopper_gemm.cuh) takes the 64-byte GemmProblem, the epilogue's slots, then, aligned to 64
// bytes (up to 56 bytes of padding after the slots), the 128-byte tensor maps of A and B and of up to 16 tile
// tensors (kHopperMaxTileMaps). Tile and finalize kernels take less; one rule holds every graph to it.
inline constexpr int kKernelFixedParamBytes = 64 + 56 + (2 + 16) * 128;

// Bytes of one epilogue parameter slot: a tile tensor takes two (pointer, leading dimension), a vector,
// partials tensor or scalar one.
inline constexpr int kKernelParamSlotBytes = 8;

}  // namespace coda::limits
