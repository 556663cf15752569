// FP8 kernels launch only where CODA_EXPERIMENTAL_FP8 (or the tests' override) allows it, until a GPU has run them.
#include <catch2/catch.hpp>

#include "coda/blocks.hpp"
#include "coda/error.hpp"
#include "runtime/fp8_gate.hpp"

using namespace coda;

TEST_CASE("which graphs the FP8 gate holds back: FP8 operands or FP8 tile tensors", "[runtime]") {
    for (const Graph& g : blocks::llama_block()) CHECK_FALSE(uses_fp8(g));
    for (const Graph& g : blocks::llama_block_fp8()) CHECK(uses_fp8(g));
    for (const Graph& g : blocks::llama_block_fp8_blockwise()) CHECK(uses_fp8(g));
    // The row-wise block's statistics programs (row amax partials beside bf16) have no FP8 to read or write.
    for (const Graph& g : blocks::llama_block_fp8_rowwise())
        CHECK(uses_fp8(g) == (g.name() != "rms_entry_fp8_rowwise" && g.name() != "rope_backward_from_output_fp8_rowwise"));
    Graph mixed = Graph::gemm("mixed", GemmSpec{DType::E5M2, Major::K, Major::K, DType::E4M3});
    mixed.store(mixed.accumulator(), "D", DType::BF16);
    CHECK(uses_fp8(mixed));
}

TEST_CASE("a forbidden FP8 launch names the kernel and the variable, and bf16 ones pass", "[runtime]") {
    struct Restore {
        ~Restore() { set_experimental_fp8_override(std::nullopt); }
    } restore;
    set_experimental_fp8_override(false);
    CHECK_THROWS_WITH(expect_fp8_allowed(blocks::quantize_e4m3(), "coda_quantize_e4m3"),
                      Catch::Contains("coda_quantize_e4m3") && Catch::Contains("CODA_EXPERIMENTAL_FP8=1"));
    CHECK_NOTHROW(expect_fp8_allowed(blocks::out_proj(), "coda_out_proj"));
    set_experimental_fp8_override(true);
    CHECK_NOTHROW(expect_fp8_allowed(blocks::quantize_e4m3(), "coda_quantize_e4m3"));
}
