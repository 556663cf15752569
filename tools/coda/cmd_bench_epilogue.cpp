// coda bench epilogue: where a fused epilogue's time goes. Times the GEMM with the identity epilogue and with
// one ingredient of the out-proj epilogue added at a time (a second store, a residual tile read, a column
// vector, a row reduction), then out-proj itself, all with the same tile config, as ratios to the identity,
// timed in interleaved rounds.
#include <cstdio>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "coda/blocks.hpp"
#include "coda/cli.hpp"
#include "coda/error.hpp"
#include "coda/runtime.hpp"
#include "driver/cuda_driver.hpp"
#include "coda/kernel_timing.hpp"

namespace coda::cli {
namespace {

std::vector<Graph> ingredient_graphs() {
    std::vector<Graph> graphs;
    {
        Graph g = Graph::gemm("identity");
        g.store(g.accumulator(), "x1", DType::BF16);
        graphs.push_back(g);
    }
    {
        Graph g = Graph::gemm("plus_second_store");
        Value acc = g.accumulator();
        g.store(acc, "x1", DType::BF16);
        g.store(acc * 2.0f, "h", DType::BF16);
        graphs.push_back(g);
    }
    {
        Graph g = Graph::gemm("plus_residual_read");
        g.store(g.accumulator() + g.tile_input("residual", DType::BF16), "x1", DType::BF16);
        graphs.push_back(g);
    }
    {
        Graph g = Graph::gemm("plus_column_vector");
        g.store(g.accumulator() * g.col_input("gamma", DType::BF16), "x1", DType::BF16);
        graphs.push_back(g);
    }
    {
        Graph g = Graph::gemm("plus_row_reduction");
        Value acc = g.accumulator();
        g.store(acc, "x1", DType::BF16);
        g.reduce_row(acc, ReduceOp::SumSq, "x1_sumsq");
        graphs.push_back(g);
    }
    graphs.push_back(blocks::out_proj());
    return graphs;
}

struct EpilogueOptions {
    long long m = 16384, n = 4096, k = 4096;
    long long rounds = 15, per_round = 5;
    std::string config_text;
};

int bench_epilogue(const EpilogueOptions& given) {
    const long long m = given.m, n = given.n, k = given.k;
    const long long rounds = given.rounds, per_round = given.per_round;
    const std::string& config_text = given.config_text;
    if (m < 1 || n < 2 || n % 2 != 0 || k < 1 || rounds < 1 || rounds > 10000 || per_round < 1 || per_round > 10000)
        throw Error(fmt::format("bench epilogue: need M >= 1, an even N >= 2, K >= 1, 1 <= --rounds <= 10000 and "
                                "1 <= --per-round <= 10000; got M={} N={} K={} --rounds {} --per-round {}",
                                m, n, k, rounds, per_round));
    CompileOptions options;
    options.shape = {m, n, k};
    if (!config_text.empty()) {
        options.config = KernelConfig::parse(config_text);
    }
    // The graphs are built (and so validated) before the GPU is needed: a CPU-only run catches their mistakes.
    const std::vector<Graph> graphs = ingredient_graphs();
    Driver& d = Driver::instance();
    if (!d.available()) throw Error("bench epilogue needs a GPU: " + d.unavailable_reason());
    d.ensure_context();
    RandomBindings bindings(m, n, k, 3);
    std::vector<WarmJob> jobs;
    for (const Graph& g : graphs) jobs.push_back({&g, options});
    warm_in_parallel(jobs, d.current_device().arch);
    std::vector<Kernel> kernels;
    std::vector<Args> bound;
    for (const Graph& g : graphs) {
        kernels.push_back(Runtime::instance().compile(g, options));
        bound.push_back(bindings.bind(kernels.back()));
    }
    std::vector<TimedLaunch> launches;
    for (std::size_t i = 0; i < kernels.size(); ++i) launches.push_back({&kernels[i], &bound[i]});
    // Interleaved rounds (kernel_timing.hpp): an ingredient costs a few percent, less than the drift of the GPU's
    // clocks between one kernel's timing and the next's.
    const Interleaved t = interleaved_ms(launches, static_cast<int>(rounds), static_cast<int>(per_round));
    std::printf("%-20s %6s %6s %6s %10s %11s  %s\n", "epilogue", "M", "N", "K", "ms", "/identity", "config");
    for (std::size_t i = 0; i < kernels.size(); ++i)
        std::printf("%-20s %6lld %6lld %6lld %10.4f %11.3f  %s\n", graphs[i].name().c_str(), m, n, k, t.ms[i],
                    t.vs_first[i], kernels[i].config()->to_text().c_str());
    std::printf("(medians over %s of %s each; /identity is the median of the rounds' ratios)\n",
                counted(static_cast<std::size_t>(rounds), "interleaved round").c_str(),
                counted(static_cast<std::size_t>(per_round), "launch", "launches").c_str());
    return 0;
}

}  // namespace

void add_bench_epilogue(Commands& commands, CLI::App& bench) {
    auto options = std::make_shared<EpilogueOptions>();
    CLI::App& epilogue = commands.add(bench, "epilogue", "what each ingredient of the out-proj epilogue adds to the "
                                                         "GEMM's time, as ratios to the identity epilogue (GPU)",
                                      [options] { return bench_epilogue(*options); });
    epilogue.add_option("--m", options->m, "M (default 16384)")->type_name("M");
    epilogue.add_option("--n", options->n, "N (default 4096)")->type_name("N");
    epilogue.add_option("--k", options->k, "K (default 4096)")->type_name("K");
    epilogue.add_option("--rounds", options->rounds, "interleaved rounds (default 15)")->type_name("R");
    epilogue.add_option("--per-round", options->per_round, "launches of each kernel per round (default 5)")
        ->type_name("P");
    epilogue.add_option("--config", options->config_text, "the tile config of every kernel")->type_name("TEXT");
}

}  // namespace coda::cli
