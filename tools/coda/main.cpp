// The coda command line: dump, warm, cache, demo, bench, tune. Each subcommand lives in its own file.
#include <cstdio>
#include <cstring>
#include <exception>

#include "coda/cli.hpp"
#include "coda/error.hpp"

namespace {

constexpr const char* kUsage = R"(usage: coda <command> [options]

commands:
  demo [--arch ARCH] [--no-run]        build the LLaMA block's epilogues, show their code, compile them,
                                       and (with a GPU) run and check each against the CPU reference
  demo --layouts [--config TEXT]       check the plain GEMM in all four layouts (bf16, f16) and out-proj
  dump [--arch ARCH] FILE...           print the generated CUDA for every graph in the .coda files
  warm [--arch ARCH] [-j N] FILE...    compile every graph into the kernel cache (no GPU needed)
  cache list | cache clear             show or empty the on-disk kernel cache
  bench gemm [--m M --n N --k K] [--iters N] [--config TEXT] [--csv FILE]
                                       time the GEMM (identity and out-proj epilogues) on the GPU; with
                                       no shape, the 12-shape set of docs/PERFORMANCE.md
  bench jit                            time a cold compile, a disk-cache hit and a memory hit + launch
  bench tile [--m M --n N]             GB/s of tile programs (a copy, RoPE backward) on the GPU
  bench epilogue [--m M --n N --k K] [--rounds R] [--per-round P] [--config TEXT]
                                       what each ingredient of the out-proj epilogue adds to the GEMM
                                       (all kernels timed in R interleaved rounds of P launches)
  tune [--m M --n N --k K] [--iters N] BLOCK|FILE...
                                       time each tile config of GEMM graphs on the GPU; record the fastest
  help                                 this text

ARCH defaults to the current GPU's (sm_90a on Hopper), or sm_90a without a GPU.
)";

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || !std::strcmp(argv[1], "help") || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
        std::fputs(kUsage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const std::string command = argv[1];
    try {
        coda::cli::Arguments args(argc, argv, 2);
        if (command == "dump") return coda::cli::cmd_dump(args);
        if (command == "warm") return coda::cli::cmd_warm(args);
        if (command == "cache") return coda::cli::cmd_cache(args);
        if (command == "demo") return coda::cli::cmd_demo(args);
        if (command == "bench") return coda::cli::cmd_bench(args);
        if (command == "tune") return coda::cli::cmd_tune(args);
        std::fprintf(stderr, "coda: unknown command '%s'\n\n%s", command.c_str(), kUsage);
        return 2;
    } catch (const coda::Error& e) {
        std::fprintf(stderr, "coda %s: error: %s\n", command.c_str(), e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "coda %s: %s\n", command.c_str(), e.what());
        return 3;
    }
}
