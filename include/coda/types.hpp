// Small vocabulary types shared by every stage: storage dtypes, graph domains, value widths,
// reduction operators, GEMM operand layouts, FP8 accumulation and block scales, with their canonical text names.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace coda {

// Storage dtype of a tensor in memory. Arithmetic inside a kernel is always fp32 (i32 for indices). E4M3 and E5M2
// are the 8-bit floats of FP8 training (OCP FP8: e4m3 saturates at 448 and has no infinity; e5m2 is IEEE-like up to
// 57344); so far only GEMM operands (GemmSpec::input) may have them.
enum class DType { BF16, F16, F32, I32, E4M3, E5M2 };

// What a graph runs over.
enum class Domain {
    Gemm,      // the epilogue of a GEMM: the accumulator tile is a source
    Tile,      // an elementwise/reducing program over M x N input tiles, no GEMM
    Finalize,  // combines reduction partials into per-row values, then maps them elementwise
};

// Width of a tile or column-vector value relative to the kernel's N (the GEMM's output columns).
enum class Width {
    Half,    // N/2 columns: one of the (even, odd) halves of a full tile
    Full,    // N columns
    Double,  // 2N columns: an interleaved pair of full tiles (SwiGLU backward reads one)
};

enum class ReduceOp { Sum, Max, Min, SumSq, Lse };

// Which index is contiguous in memory. A (M x K) is K- or M-major; B (K x N) is K- or N-major.
enum class Major { K, MN };

// How a GEMM on FP8 operands sums its products (GemmSpec::accumulation, which says more).
enum class Accumulation {
    Fast,      // in the wgmma accumulator alone, which keeps fewer bits than f32 (cuBLAS's use_fast_accum=True)
    Promoted,  // each 128-k block's sum added into an f32 accumulator (use_fast_accum=False)
};

// Which block scales a GEMM's mainloop applies (GemmSpec::scales, which says more); text names none, block and
// block_1x128. Off is every GEMM without them: 16-bit operands, and FP8 ones whose per-tensor or row-wise scales are
// epilogue inputs.
enum class ScaleMode {
    Off,           // no mainloop scales
    Block128x128,  // FP8: A's scales per row of A and 128 k, B's per 128 x 128 block of B (DeepSeek-V3's recipe)
    Block1x128,    // FP8: B's scales per row of B and 128 k, as A's (a weight gradient's operands, both activations)
};

std::string_view to_string(DType d);
std::string_view to_string(Domain d);
std::string_view to_string(Width w);
std::string_view to_string(ReduceOp r);
std::string_view to_string(Major m);
std::string_view to_string(Accumulation a);
std::string_view to_string(ScaleMode s);

std::optional<DType> parse_dtype(std::string_view s);
std::optional<Domain> parse_domain(std::string_view s);
std::optional<Width> parse_width(std::string_view s);
std::optional<ReduceOp> parse_reduce_op(std::string_view s);
std::optional<Major> parse_major(std::string_view s);
std::optional<Accumulation> parse_accumulation(std::string_view s);
std::optional<ScaleMode> parse_scale_mode(std::string_view s);

std::size_t size_of(DType d);

// Columns of a value of width w when the kernel has n full columns.
long long columns(Width w, long long n);
// Values a value of width w holds per column pair (2j, 2j+1) of the kernel: 1 (half), 2 (full) or 4 (double).
// One epilogue visit loads and stores that many consecutive elements with one access.
int values_per_pair(Width w);

}  // namespace coda
