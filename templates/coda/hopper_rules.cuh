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
constexpr int kMaxClusterM = 2;          // CTAs of a cluster along M, which share B by TMA multicast
constexpr int kMaxTileMaps = 16;         // tensor maps of staged tile tensors a kernel takes as one parameter
constexpr int kSmemBudgetBytes = kSm90MaxDynamicSmemBytes;

// The first rule a config breaks, or Ok. The host turns each into a message; the template asserts Ok.
enum class Rule { Ok, BN, BM, ConsumerRows, Accumulators, Stages, Cluster };

CODA_HOST_DEVICE constexpr int consumer_rows(int bm, bool pingpong) { return pingpong ? bm : bm / 2; }

CODA_HOST_DEVICE constexpr Rule check(int bm, int bn, int stages, bool pingpong, int cluster_m) {
    const int rows = consumer_rows(bm, pingpong);
    return bn != kNarrowBN && bn != kWideBN                               ? Rule::BN
           : bm % kRowsPerM64 != 0 || bm < kRowsPerM64 || bm > kMaxBM     ? Rule::BM
           : rows != kMinConsumerRows && rows != kMaxConsumerRows         ? Rule::ConsumerRows
           : rows * bn > kMaxAccumulators                                 ? Rule::Accumulators
           : stages < kMinStages || stages > kMaxStages                   ? Rule::Stages
           : cluster_m < 1 || cluster_m > kMaxClusterM                    ? Rule::Cluster
                                                                          : Rule::Ok;
}

}  // namespace coda::hopper_rules
