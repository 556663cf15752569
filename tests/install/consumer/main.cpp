// Uses the installed public headers only: builds a graph, validates it, and generates its CUDA source.
#include <coda/blocks.hpp>
#include <coda/coda.hpp>

#include <cstdio>

int main() {
    coda::Graph g = coda::Graph::gemm("consumer_epilogue");
    coda::Value x = g.accumulator() * g.row_input("scale", coda::DType::F32);
    g.store(x, "out", coda::DType::BF16);
    coda::check(g);
    const std::string source = coda::Runtime::instance().source(g, "sm_90a");
    std::printf("%s\n%zu block epilogues\n", source.find("struct Epilogue") != std::string::npos ? "generated" : "missing",
                coda::blocks::llama_block().size());
    return 0;
}
