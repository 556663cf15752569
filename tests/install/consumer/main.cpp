// Uses the installed public headers only, with the README's API example: builds the out-proj graph,
// validates it and generates its CUDA source; with a GPU and an argument it also compiles and launches it.
#include <coda/blocks.hpp>
#include <coda/coda.hpp>

#include <cstdint>
#include <cstdio>

int main(int argc, char**) {
    coda::Graph g = coda::Graph::gemm("out_proj", {coda::DType::BF16, coda::Major::K, coda::Major::K});
    coda::Value acc = g.accumulator();
    coda::Value residual = g.tile_input("residual", coda::DType::BF16);
    coda::Value gamma = g.col_input("gamma", coda::DType::BF16);
    coda::Value x1 = acc + residual;
    g.store(x1, "x1", coda::DType::BF16);
    g.store(x1 * gamma, "h", coda::DType::BF16);
    g.reduce_row(x1, coda::ReduceOp::SumSq, "x1_sumsq");
    coda::check(g);

    // The public text form round-trips.
    if (!(coda::parse_graph(coda::to_text(g)) == g)) {
        std::printf("the text form did not round-trip\n");
        return 1;
    }

    coda::CompileOptions options;
    options.arch = "sm_90a";
    const std::string source = coda::Runtime::instance().source(g, options);
    std::printf("%s\n%zu block epilogues\n", source.find("struct Epilogue") != std::string::npos ? "generated" : "missing",
                coda::blocks::llama_block().size());
    if (argc < 2) return 0;

    // The README's launch, against fake pointers: coda checks the arguments before anything reaches the GPU.
    const std::int64_t M = 256, N = 256, K = 256;
    const void* d_a = reinterpret_cast<const void*>(std::uintptr_t{0x1000});
    const void *d_w = d_a, *d_x0 = d_a, *d_gamma = d_a, *d_x1 = d_a, *d_h = d_a, *d_partials = d_a;
    coda::Kernel k = coda::Runtime::instance().compile(g);
    auto partials = k.partials_shape("x1_sumsq", M, N);
    coda::Args args;
    args.bind("A", coda::matrix(d_a, coda::DType::BF16, M, K))
        .bind("B", coda::matrix_col_major(d_w, coda::DType::BF16, K, N))
        .bind("residual", coda::matrix(d_x0, coda::DType::BF16, M, N))
        .bind("gamma", coda::vector(d_gamma, coda::DType::BF16, N))
        .bind("x1", coda::matrix(d_x1, coda::DType::BF16, M, N))
        .bind("h", coda::matrix(d_h, coda::DType::BF16, M, N))
        .bind("x1_sumsq", coda::matrix(d_partials, coda::DType::F32, partials[0], partials[1] + 1));
    try {
        k.launch(args);
    } catch (const coda::Error& e) {
        std::printf("%s\n", e.what());  // the partials shape above is off by one on purpose
    }
    return 0;
}
