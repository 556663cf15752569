// Graphs the CPU compile tests and the GPU tests share for block-scaled FP8 and reduce_group.
#pragma once

#include <optional>
#include <string>

#include "coda/graph.hpp"

namespace coda::test {

// The epilogue that hands the next GEMM its FP8 operand under a per-tensor (delayed) scale: the bf16 output D, its
// `fp8` copy D8 at inv_scale, and the row partials of |acc| for the next step's amax.
Graph quantizing_epilogue(DType fp8, GemmSpec spec = {DType::BF16, Major::K, Major::K});

// The weight-gradient operands an epilogue or a tile program hands on: y = source * inv_scale stored in bf16 and
// transposed (store_transposed) in `fp8`, and a half-width value (the even columns) transposed in bf16. The source
// is the accumulator in a gemm graph, a bf16 tile input x in a tile program.
Graph transposing_graph(Domain domain, DType fp8);

// A tile program reading xt [N x M] transposed (tile_input_transposed) in `dtype` beside a bf16 tile input x as
// stored: out = xt * scale + x in f32, xt copied through in its own type, and xt's row sums.
Graph transposed_reading_graph(DType dtype);

// FP8 tiles read back, of both widths (e5m2 double, e4m3 full), and one copied through.
Graph fp8_reading_program();

// A block-scaled FP8 GEMM (GemmSpec::scales) with the out-projection's kind of epilogue: the promoted accumulator
// plus a residual, stored in bf16, and its row partials. Block1x128: B's scales per row of B.
Graph block_scaled_graph(DType input, std::optional<DType> input_b = std::nullopt,
                         ScaleMode scales = ScaleMode::Block128x128);

// A per-tensor FP8 GEMM, D = acc * s stored in `out`, summing its products as `accumulation` says
// (GemmSpec::accumulation): the graph the promoted loop is tested on, with unit scales in the mainloop.
Graph tensorwise_graph(DType input, Accumulation accumulation, DType out = DType::BF16,
                       std::optional<DType> input_b = std::nullopt);

// Block-wise FP8 quantization from each row group's own amax (reduce_group): y = acc * rstd, stored in bf16 and as
// q = y / scale in e4m3, scale = max(amax / 448, 1e-12), the scales as row partials (per 128-column tile: the next
// block-scaled GEMM's A_scale). With `residual`, y = acc * rstd + residual (a bf16 tile input, which the group pass
// reads from global memory and the visits from their staged chunks).
Graph group_quantizing_graph(const std::string& name, GemmSpec spec = {}, bool residual = false);

// y minus its group's mean (a reduce_group sum): the same pass with no FP8 at all. y = acc * rstd in a gemm graph,
// a bf16 tile input x times rstd in a tile program.
Graph group_centering_graph(Domain domain = Domain::Gemm);

}  // namespace coda::test
