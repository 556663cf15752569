// The portable mainloop's tile rules, in one place for both sides: portable_gemm.cuh static_asserts them, and the
// host (src/mainloop/portable.cpp) checks a config against them first and words the error, quoting the constants
// below. Plain C++ (no host headers, no CUDA built-ins).
#pragma once

#include "coda/kernel_abi.cuh"

namespace coda::portable_rules {

constexpr int kMmaM = 16;           // mma.sync m16n8k16: a warp tile is whole m16 fragments ...
constexpr int kMmaNPair = 16;       // ... and pairs of n8 fragments (ldmatrix.x4 loads two)
constexpr int kMmaK = 16;           // BK is whole k16 steps
constexpr int kChunkElements = 8;   // the shared-memory swizzle moves 16-byte chunks of 8 elements
constexpr int kMinTile = 16;        // bm, bn and bk are powers of two of at least this
constexpr int kMinStages = 2;       // cp.async double buffering at least
constexpr int kMaxThreads = 1024;   // a CTA's threads: 32 * wm * wn
constexpr int kElementBytes = 2;    // 16-bit operands

enum class Rule { Ok, Positive, WarpTileM, WarpTileN, BK, Stages, PowerOfTwo, Chunks, Threads };

CODA_HOST_DEVICE constexpr bool power_of_two(int v) { return v > 0 && (v & (v - 1)) == 0; }
CODA_HOST_DEVICE constexpr int threads(int warps_m, int warps_n) { return 32 * warps_m * warps_n; }
// Shared memory of the cp.async pipeline: every stage holds a bm x bk tile of A and a bn x bk tile of B.
CODA_HOST_DEVICE constexpr long long pipeline_bytes(int bm, int bn, int bk, int stages) {
    return static_cast<long long>(stages) * (bm + bn) * bk * kElementBytes;
}

// The first rule a config breaks, or Ok (the shared-memory budget depends on the arch: the host checks it).
CODA_HOST_DEVICE constexpr Rule check(int bm, int bn, int bk, int warps_m, int warps_n, int stages) {
    return bm <= 0 || bn <= 0 || bk <= 0 || warps_m <= 0 || warps_n <= 0 || stages <= 0 ? Rule::Positive
           : bm % (kMmaM * warps_m) != 0                                              ? Rule::WarpTileM
           : bn % (kMmaNPair * warps_n) != 0                                          ? Rule::WarpTileN
           : bk % kMmaK != 0                                                          ? Rule::BK
           : stages < kMinStages                                                      ? Rule::Stages
           : !power_of_two(bm / kChunkElements) || !power_of_two(bn / kChunkElements) ||
                   !power_of_two(bk / kChunkElements) || bm < kMinTile || bn < kMinTile || bk < kMinTile
               ? Rule::PowerOfTwo
           : (bm * bk / kChunkElements) % threads(warps_m, warps_n) != 0 ||
                   (bn * bk / kChunkElements) % threads(warps_m, warps_n) != 0
               ? Rule::Chunks
           : threads(warps_m, warps_n) > kMaxThreads ? Rule::Threads
                                                     : Rule::Ok;
}

}  // namespace coda::portable_rules
