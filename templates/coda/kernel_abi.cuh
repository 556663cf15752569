// What crosses the boundary between the host and a kernel: the problem structs passed as kernel parameter 0, and
// KernelInfo, the __constant__ a kernel describes itself with. Declared once, here, and seen by both sides: NVRTC
// compiles it into every kernel and the host's C++ compiler includes it (src/mainloop/, src/runtime/), so a field
// added on one side is added on the other. Plain C++ (no host headers, no CUDA built-ins).
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define CODA_HOST_DEVICE __host__ __device__
#else
#define CODA_HOST_DEVICE
#endif

namespace coda {

// Parameter 0 of a GEMM kernel (portable or Hopper mainloop).
struct GemmProblem {
    const void* a;  // A as stored: M x K row-major (K-major) or K x M row-major (M-major)
    const void* b;  // B as stored: N x K row-major (K-major) or K x N row-major (N-major)
    long long lda;  // elements between consecutive rows of A as stored
    long long ldb;  // elements between consecutive rows of B as stored
    int m;
    int n;
    int k;
    int flags;      // kGemmVectorA | kGemmVectorB: 16-byte loads are legal for that operand
    // The Hopper mainloop's stream-K workspace (hopper_gemm.cuh, TileOrder), or null for none: a tile's partial
    // sum per CTA (BM x BN floats each), and a flag per CTA and consumer warpgroup, zero between launches.
    float* partials;
    unsigned* partial_flags;
};
// The workspace's flags: two per CTA (one per consumer warpgroup) for grids of up to kStreamKFlags / 2 CTAs.
constexpr int kStreamKFlags = 4096;
// GemmSpec::block_scales' k-block (coda::kScaleBlock on the host): one FP8 k-tile of the Hopper mainloop. A
// block-scaled GEMM's scales travel in its epilogue's parameter slots (Epilogue::kBlockScaleSlot: A_scale's pointer
// and leading dimension, then B_scale's), so that the GemmProblem of every other kernel stays as it was.
constexpr int kScaleBlockK = 128;
constexpr int kGemmVectorA = 1;
constexpr int kGemmVectorB = 2;

// Parameter 0 of a tile program.
struct TileProblem {
    int m;
    int n;
};

// Parameter 0 of a finalizer.
struct FinalizeProblem {
    int l;        // elements of the finalized vector
    int t;        // partials per element (rows of each partials tensor)
    int strands;  // threads that share one element's partials (G): a power of two, 1..kFinalizeWarpLanes; the
                  // launcher picks it with its grid (src/mainloop/finalize_program.cpp)
};

// The fixed tile and block of tile programs (tile_program.cuh) and the block of finalizers (finalize_program.cuh).
constexpr int kTileProgramBM = 64;
constexpr int kTileProgramBN = 128;
constexpr int kTileProgramThreads = 256;
constexpr int kFinalizeThreads = 256;
// A finalizer's warp covers kFinalizeWarpLanes / strands consecutive elements with `strands` threads each, which
// combine their folds by shuffles: strands never exceed a warp.
constexpr int kFinalizeWarpLanes = 32;

// The largest dynamic shared memory one CTA may opt in to on sm_90 (227 KiB): what the Hopper mainloop fills
// with pipeline stages.
constexpr int kSm90MaxDynamicSmemBytes = 227 * 1024;

// Which kernel template a module holds (KernelInfo::kernel). The host's mainloop modules each check their own.
enum class KernelKind : int { Finalize = 1, TileProgram = 2, PortableGemm = 3, HopperGemm = 4 };

// How a Hopper kernel moves its tile tensors by TMA; all zero in other kernels.
struct TmaTileInfo {
    int maps;           // tensor maps in the kernel's TileMaps parameter (at least 1: an unused one without any)
    int inputs_by_tma;  // 1: tile inputs are loaded by TMA, one map each, first in TileMaps
    int chunk_columns;  // columns of one staged chunk: a box is that many columns (as bytes) by the rows below
    int input_rows;     // rows of an input box (the CTA tile's)
    int outputs;        // staged tile outputs stored by TMA, one map each, after the inputs'
    int output_rows;    // rows of an output box (one consumer warpgroup's)
    int transposed;     // staged transposed outputs (store_transposed sinks), one map each, after the outputs'
};

constexpr int kKernelInfoVersion = 4;

// What a kernel says about itself: `extern "C" __constant__ KernelInfo coda_kernel_info`, read by the host after
// loading the module and checked against what the host expected of the config. Each template's Traits::info()
// builds it with the constructor below, which takes every field: a field added here fails to compile in every
// template until it says what that field is (and kKernelInfoVersion goes up).
struct KernelInfo {
    KernelInfo() = default;  // (value-initialized by the host: all zero)
    CODA_HOST_DEVICE constexpr KernelInfo(KernelKind kernel_, int threads_, int smem_bytes_, int tile_m_, int tile_n_,
                                          int cluster_m_, int cluster_n_, int stages_, TmaTileInfo tma_)
        : version(kKernelInfoVersion), kernel(kernel_), threads(threads_), smem_bytes(smem_bytes_), tile_m(tile_m_),
          tile_n(tile_n_), cluster_m(cluster_m_), cluster_n(cluster_n_), stages(stages_), tma(tma_) {}

    int version;     // kKernelInfoVersion of the template the kernel was built from
    KernelKind kernel;
    int threads;     // block size
    int smem_bytes;  // dynamic shared memory per CTA
    int tile_m;      // CTA tile (tile programs and GEMMs; 0 x 0 for finalizers): it cuts reduction partials
    int tile_n;
    int cluster_m;   // CTAs of a cluster along M (1 without clusters)
    int cluster_n;   // CTAs of a cluster along N (1 without clusters)
    int stages;      // pipeline stages after fitting the epilogue's shared memory (0 without a pipeline)
    TmaTileInfo tma;
};

static_assert(kFinalizeThreads % kFinalizeWarpLanes == 0, "coda: a finalizer's block is whole warps");
static_assert(sizeof(GemmProblem) == 64 && sizeof(TileProblem) == 8 && sizeof(FinalizeProblem) == 12,
              "coda: the problem structs' layouts are part of every kernel's parameters");
static_assert(sizeof(KernelKind) == 4 && sizeof(TmaTileInfo) == 28 && sizeof(KernelInfo) == 64,
              "coda: KernelInfo's layout is read back from the module byte for byte");
#if !defined(__CUDACC_RTC__)  // NVRTC has no offsetof; the host's C++ compiler checks the offsets for both sides
static_assert(__builtin_offsetof(GemmProblem, m) == 32 && __builtin_offsetof(GemmProblem, flags) == 44,
              "coda: GemmProblem's layout is part of every GEMM kernel's parameters");
static_assert(__builtin_offsetof(KernelInfo, threads) == 8 && __builtin_offsetof(KernelInfo, tma) == 36,
              "coda: KernelInfo's layout is read back from the module byte for byte");
#endif

}  // namespace coda
