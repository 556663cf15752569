#include "support/fp8_graphs.hpp"

#include <fmt/format.h>

namespace coda::test {

Graph quantizing_epilogue(DType fp8, GemmSpec spec) {
    Graph g = Graph::gemm(fmt::format("quantize_{}", to_string(fp8)), spec);
    Value acc = g.accumulator();
    g.store(acc, "D", DType::BF16);
    g.store(g.mul(acc, g.scalar("inv_scale"), "scaled"), "D8", fp8);
    g.reduce_row(g.abs(acc, "magnitude"), ReduceOp::Max, "amax_partials");
    return g;
}

Graph transposing_graph(Domain domain, DType fp8) {
    const bool gemm = domain == Domain::Gemm;
    const std::string name = fmt::format("transpose_{}{}", to_string(fp8), gemm ? "" : "_tile");
    Graph g = gemm ? Graph::gemm(name) : Graph::tile(name);
    Value source = gemm ? g.accumulator() : g.tile_input("x", DType::BF16);
    Value y = g.mul(source, g.scalar("inv_scale"), "scaled");
    g.store(y, "y", DType::BF16);
    g.store_transposed(y, "y_t", fp8);
    g.store_transposed(g.even(y, "even_columns"), "even_t", DType::BF16);
    return g;
}

Graph transposed_reading_graph(DType dtype) {
    Graph g = Graph::tile(fmt::format("read_transposed_{}", to_string(dtype)));
    Value xt = g.tile_input_transposed("xt", dtype);
    Value x = g.tile_input("x", DType::BF16);
    g.store(g.add(g.mul(xt, g.scalar("scale"), "scaled"), x, "sum"), "out", DType::F32);
    g.store(xt, "xt_copy", dtype);
    g.reduce_row(xt, ReduceOp::Sum, "row_sums");
    return g;
}

Graph fp8_reading_program() {
    Graph g = Graph::tile("fp8_read");
    Value x = g.tile_input("x", DType::E5M2, Width::Double);
    Value y = g.tile_input("y", DType::E4M3);
    g.store(g.mul(g.add(g.even(x), g.odd(x)), y, "sum"), "out", DType::BF16);
    g.store(x, "x_copy", DType::E5M2);
    return g;
}

Graph block_scaled_graph(DType input, std::optional<DType> input_b, ScaleMode scales) {
    Graph g = Graph::gemm(fmt::format("fp8_block_scaled_{}{}{}", to_string(input), input_b ? "_mixed" : "",
                                      scales == ScaleMode::Block1x128 ? "_1x128" : ""),
                          GemmSpec{input, Major::K, Major::K, input_b, scales});
    Value x1 = g.add(g.accumulator(), g.tile_input("residual", DType::BF16), "x1_value");
    g.store(x1, "x1", DType::BF16);
    g.reduce_row(x1, ReduceOp::SumSq, "x1_sumsq");
    return g;
}

Graph tensorwise_graph(DType input, Accumulation accumulation, DType out, std::optional<DType> input_b) {
    GemmSpec spec{input, Major::K, Major::K, input_b};
    spec.accumulation = accumulation;
    Graph g = Graph::gemm(fmt::format("fp8_tensorwise_{}{}_{}_{}", to_string(input), input_b ? "_mixed" : "",
                                      to_string(accumulation), to_string(out)),
                          spec);
    g.store(g.mul(g.accumulator(), g.scalar("s"), "d"), "D", out);
    return g;
}

Graph group_quantizing_graph(const std::string& name, GemmSpec spec, bool residual) {
    Graph g = Graph::gemm(name, spec);
    Value y = g.mul(g.accumulator(), g.row_input("rstd", DType::F32), residual ? "y_scaled" : "y");
    if (residual) y = g.add(y, g.tile_input("residual", DType::BF16), "y");
    Value amax = g.reduce_group(g.abs(y, "magnitude"), ReduceOp::Max, "amax");
    Value scale = g.max(g.mul(amax, g.constant(1.0f / 448.0f, "inv_e4m3_max"), "amax_scaled"),
                        g.constant(1e-12f, "tiny"), "scale");
    g.store(y, "y_bf16", DType::BF16);
    g.store(g.div(y, scale, "quantized"), "q", DType::E4M3);
    g.reduce_row(scale, ReduceOp::Max, "q_scale");
    return g;
}

Graph group_centering_graph(Domain domain) {
    const bool gemm = domain == Domain::Gemm;
    Graph g = gemm ? Graph::gemm("group_center") : Graph::tile("group_center_tile");
    Value source = gemm ? g.accumulator() : g.tile_input("x", DType::BF16);
    Value y = g.mul(source, g.row_input("rstd", DType::F32), "y");
    Value sum = g.reduce_group(y, ReduceOp::Sum, "group_sum");
    g.store(g.sub(y, g.mul(sum, g.constant(1.0f / 128.0f, "inv_group")), "centered"), "out", DType::BF16);
    return g;
}

}  // namespace coda::test
