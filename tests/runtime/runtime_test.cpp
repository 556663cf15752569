// Runtime behaviour that needs no GPU: graph errors come before driver errors, empty kernels refuse to be
// used, a checked graph does not change when the user keeps building, and unusable targets are rejected.
#include <catch2/catch.hpp>

#include "codegen/kernel_source.hpp"
#include "coda/blocks.hpp"
#include "coda/error.hpp"
#include "coda/runtime.hpp"
#include "driver/cuda_driver.hpp"
#include "ir/check_graph.hpp"

using namespace coda;

TEST_CASE("Runtime::compile reports graph mistakes before asking for a GPU", "[runtime]") {
    if (Driver::instance().available()) return;  // with a GPU the driver is fine and the graph error shows anyway
    Graph g = Graph::gemm("broken");
    g.exp(g.accumulator(), "unused");
    CHECK_THROWS_WITH(Runtime::instance().compile(g),
                      Catch::Contains("'%unused'") && Catch::Contains("never used") && Catch::Contains("nothing would be written"));
}

TEST_CASE("an empty Kernel throws coda::Error from every accessor", "[runtime]") {
    const Kernel k;
    CHECK_THROWS_AS(k.graph(), Error);
    CHECK_THROWS_AS(k.config(), Error);
    CHECK_THROWS_AS(k.report(), Error);
    CHECK_THROWS_AS(k.source(), Error);
    CHECK_THROWS_AS(k.partials_shape("x", 1, 2), Error);
    CHECK_THROWS_WITH(k.launch(Args()), Catch::Contains("empty") && Catch::Contains("Runtime::compile"));
}

TEST_CASE("a checked graph keeps its nodes when the user's graph grows", "[runtime]") {
    Graph g = blocks::out_proj();
    const CheckedGraph checked = check_graph(g);
    const std::size_t before = checked.graph.nodes().size();
    g.store(g.accumulator("again"), "extra", DType::F32);
    CHECK(checked.graph.nodes().size() == before);
    CHECK(g.nodes().size() == before + 2);
    CHECK(Graph::of(g.accumulator("third")).nodes().size() == before + 3);
}

TEST_CASE("targets older than sm_80 and malformed arch names are user errors", "[runtime]") {
    const CheckedGraph g = check_graph(blocks::out_proj());
    CHECK_THROWS_WITH(generate_kernel_source(g, {}, "sm_75"), Catch::Contains("sm_80 or newer"));
    CHECK_THROWS_WITH(generate_kernel_source(g, {}, "compute_90"), Catch::Contains("is not a GPU architecture"));
    CHECK_THROWS_WITH(Runtime::instance().warm(blocks::out_proj(), ""), Catch::Contains("is not a GPU architecture"));
    CHECK_NOTHROW(generate_kernel_source(g, {}, "sm_86"));
    CHECK_NOTHROW(generate_kernel_source(g, {}, "sm_100a"));
}
