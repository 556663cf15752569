// The Hopper mainloop's tile rules and limits, in one place for both sides: hopper_gemm.cuh static_asserts them,
// and the host (src/mainloop/hopper.cpp) checks a config against them first and words the error, quoting the
// constants below. Plain C++ (no host headers, no CUDA built-ins).
#pragma once

#include "coda/kernel_abi.cuh"

namespace coda::hopper_rules {

constexpr int kBK = 64;                  // K depth of a stage: one 128-byte swizzle row of 16-bit elements
constexpr int kNarrowBN = 128;           // BN is one wgmma's N: n128 ...
constexpr int kWideBN = 256;             // ... or n256
constexpr int kRowsPerM64 = 64;          // BM comes in m64 wgmma blocks ...
constexpr int kMaxBM = 256;              // ... at most 256 rows (a TMA box has at most 256 rows)
constexpr int kMinConsumerRows = 64;     // each consumer warpgroup holds one or two m64 blocks
constexpr int kMaxConsumerRows = 128;
constexpr int kMaxAccumulators = 128 * 128;  // of a consumer warpgroup: 128 fp32 registers a thread
constexpr int kMinStages = 2;
constexpr int kMaxStages = 16;
constexpr int kMaxClusterCtas = 2;       // CTAs of a cluster: along M they share B, along N they share A (multicast)
constexpr int kMaxTileMaps = 16;         // tensor maps of staged tile tensors a kernel takes as one parameter
constexpr int kSmemBudgetBytes = kSm90MaxDynamicSmemBytes;

// Which kernels can share the last rounds' work by k-tiles (stream-K, hopper_gemm.cuh's TileOrder): those without a
// cluster, except cooperative ones whose consumers hold 128 rows (bm = 256): beside 128 accumulators and a heavy
// epilogue's registers, stream-K's bookkeeping spilled (ptxas, swiglu_backward). The host gives the others a
// workspace (src/mainloop/stream_k_workspace.hpp).
CODA_HOST_DEVICE constexpr bool stream_k(int cluster_m, int cluster_n, int bm, bool pingpong) {
    return cluster_m * cluster_n == 1 && (pingpong || bm / 2 <= kMinConsumerRows);
}

// Promoted FP8, block-scaled or not (hopper_mma_tile.cuh, hopper_mma_tile_promoted): each consumer thread keeps a 128-k
// block's sum of 128 columns (64 registers) beside its accumulators, so the tile is cooperative with 128 rows (64 a
// consumer: 64 or 128 accumulators a thread at either BN).
CODA_HOST_DEVICE constexpr bool block_scaled_tile(int bm, bool pingpong) { return !pingpong && bm == 2 * kMinConsumerRows; }

// The first rule a config breaks, or Ok. The host turns each into a message; the template asserts Ok.
enum class Rule { Ok, BN, BM, ConsumerRows, Accumulators, Stages, Cluster, ClusterSplit };

CODA_HOST_DEVICE constexpr int consumer_rows(int bm, bool pingpong) { return pingpong ? bm : bm / 2; }

// A cluster's CTAs each load a share of the operand they multicast: K-major, BM / C (or BN / C) rows of it;
// M- or N-major, every C-th 64-element box, so the tile must hold a multiple of C such boxes.
CODA_HOST_DEVICE constexpr bool splits(int tile, bool k_major, int ctas) {
    return ctas == 1 || (k_major ? tile % (8 * ctas) == 0 : tile / 64 % ctas == 0);
}

CODA_HOST_DEVICE constexpr Rule check(int bm, int bn, int stages, bool pingpong, int cluster_m, int cluster_n,
                                      bool a_k_major, bool b_k_major) {
    const int rows = consumer_rows(bm, pingpong);
    return bn != kNarrowBN && bn != kWideBN                               ? Rule::BN
           : bm % kRowsPerM64 != 0 || bm < kRowsPerM64 || bm > kMaxBM     ? Rule::BM
           : rows != kMinConsumerRows && rows != kMaxConsumerRows         ? Rule::ConsumerRows
           : rows * bn > kMaxAccumulators                                 ? Rule::Accumulators
           : stages < kMinStages || stages > kMaxStages                   ? Rule::Stages
           : cluster_m < 1 || cluster_n < 1 || cluster_m * cluster_n > kMaxClusterCtas ? Rule::Cluster
           : !splits(bm, a_k_major, cluster_n) || !splits(bn, b_k_major, cluster_m) ? Rule::ClusterSplit
                                                                          : Rule::Ok;
}

}  // namespace coda::hopper_rules
