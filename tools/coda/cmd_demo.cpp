// coda demo: the README's main job. Builds every epilogue of the LLaMA-style block, shows the generated
// code, compiles it, and with a GPU runs each kernel on random inputs checked against the CPU reference.
#include <cstdio>
#include <memory>
#include <string>
#include <tuple>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "codegen/epilogue_codegen.hpp"
#include "coda/blocks.hpp"
#include "coda/cli.hpp"
#include "coda/error.hpp"
#include "coda/runtime.hpp"
#include "driver/cuda_driver.hpp"
#include "ir/check_graph.hpp"
#include "ir/text.hpp"
#include "verify/device_check.hpp"

namespace coda::cli {
namespace {

const char* origin(BuildReport::From from) {
    switch (from) {
        case BuildReport::From::Memory: return "memory cache";
        case BuildReport::From::Disk: return "disk cache";
        case BuildReport::From::Compiled: return "compiled";
    }
    return "?";
}

// Odd sizes on purpose: partial tiles at the M edge; N and K multiples of 2 as the GEMM needs.
verify::CheckProblem demo_problem(Domain domain, std::uint64_t seed) {
    verify::CheckProblem p;
    p.m = 1000;
    p.n = domain == Domain::Finalize ? 1 : 1024;
    p.k = 776;
    p.t = 8;
    p.seed = seed;
    return p;
}

// coda demo --layouts: the plain GEMM (identity epilogue) in all four operand layouts and both 16-bit types,
// then the out-proj epilogue (a tile input, which the Hopper mainloop stages in shared memory), each checked
// at a shape with partial tiles and at one with several tiles per CTA (the persistent Hopper mainloop's
// steady state). Small enough to run under compute-sanitizer (tools/device_check.sh).
int demo_layouts(const std::string& arch, const std::string& config_text) {
    Driver& driver = Driver::instance();
    if (!driver.available()) throw Error("coda demo --layouts runs kernels and needs a GPU: " + driver.unavailable_reason());
    CompileOptions options;
    options.arch = arch;
    if (!config_text.empty()) {
        options.config = KernelConfig::parse(config_text);
    }
    bool ok = true;
    std::uint64_t seed = 77;
    const auto check = [&](const Graph& g) {
        const Kernel kernel = Runtime::instance().compile(g, options);
        for (const auto& [m, n, k] : {std::tuple<int, int, int>{520, 776, 200}, {4096, 2048, 64}}) {
            verify::CheckProblem p;
            p.m = m;
            p.n = n;
            p.k = k;
            p.seed = seed++;
            const verify::CheckReport report = verify::check_on_device(kernel, p);
            std::printf("%s [%s] %s: %s\n", report.kernel.c_str(), kernel.config()->to_text().c_str(),
                        report.problem.c_str(), report.pass ? "PASS" : "FAIL");
            if (!report.pass) std::printf("%s", report.summary().c_str());
            ok = ok && report.pass;
        }
    };
    for (DType input : {DType::BF16, DType::F16})
        for (Major a : {Major::K, Major::MN})
            for (Major b : {Major::K, Major::MN}) {
                Graph g = Graph::gemm(fmt::format("layout_{}_a{}_b{}", to_string(input), to_string(a), to_string(b)),
                                      GemmSpec{input, a, b});
                g.store(g.accumulator(), "D", DType::BF16);
                check(g);
            }
    for (const Graph& g : blocks::llama_block())
        if (g.name() == "out_proj") check(g);
    std::printf("\n%s: the four operand layouts in bf16 and f16, and out-proj, on %s\n", ok ? "OK" : "FAILED",
                driver.current_device().name.c_str());
    return ok ? 0 : 1;
}

struct DemoOptions {
    std::string arch;
    bool no_run = false;
    bool layouts = false;
    std::string config_text;
};

int demo(const DemoOptions& given) {
    const bool no_run = given.no_run;
    const std::string& config_text = given.config_text;
    const std::string arch = target_arch(given.arch);
    if (given.layouts) return demo_layouts(arch, config_text);
    if (!config_text.empty()) throw Error("coda demo: --config applies to --layouts only");
    Driver& driver = Driver::instance();
    const bool gpu = !no_run && driver.available();

    const std::vector<Graph> graphs = blocks::llama_block();
    std::string gpu_text = "not used (--no-run)";
    if (gpu) {
        const Driver::DeviceInfo device = driver.current_device();
        gpu_text = fmt::format("{} ({} SMs, {})", device.name, device.sm_count, device.arch);
    } else if (!no_run) {
        gpu_text = "none (" + driver.unavailable_reason() + "): compile only";
    }
    std::printf("coda demo: %s of a LLaMA-style block, compiled for %s; GPU: %s\n\n",
                counted(graphs.size(), "epilogue").c_str(), arch.c_str(), gpu_text.c_str());

    for (const Graph& g : graphs) {
        std::printf("==== %s ====\n%s\n", g.name().c_str(), to_text(g).c_str());
        std::printf("%s\n", generate_epilogue(check_graph(g)).c_str());
    }
    std::printf("(`coda dump tools/graphs/<name>.coda` prints the whole translation unit of any of them)\n\n");

    std::printf("%-33s %-13s %9s %6s %7s\n", "kernel", "from", "seconds", "regs", "spills");
    bool ok = true;
    for (const Graph& g : graphs) {
        CompileOptions options;
        options.arch = arch;
        const BuildReport r = Runtime::instance().warm(g, options);
        const auto known = [](int v) { return v < 0 ? std::string("n/a") : std::to_string(v); };
        std::printf("%-33s %-13s %9.3f %6s %7s\n", g.name().c_str(), origin(r.from), r.seconds,
                    known(r.registers).c_str(), known(r.spill_bytes).c_str());
        ok = ok && r.spill_bytes <= 0;
    }
    if (!ok) std::printf("some kernels spill registers (see the table)\n");

    if (!gpu) {
        std::printf("\n%s: all %s compiled; no GPU run\n", ok ? "OK" : "FAILED", counted(graphs.size(), "kernel").c_str());
        return ok ? 0 : 1;
    }
    std::printf("\nrunning each kernel on random inputs, checked against the CPU reference (fp64):\n");
    std::uint64_t seed = 2026;
    for (const Graph& g : graphs) {
        CompileOptions options;
        options.arch = arch;
        const Kernel kernel = Runtime::instance().compile(g, options);
        const verify::CheckReport report = verify::check_on_device(kernel, demo_problem(g.domain(), seed++));
        std::printf("%s %s: %s\n%s", report.kernel.c_str(), report.problem.c_str(), report.pass ? "PASS" : "FAIL",
                    report.summary().c_str());
        ok = ok && report.pass;
    }
    std::printf("\n%s: %s compiled and checked on %s\n", ok ? "OK" : "FAILED", counted(graphs.size(), "kernel").c_str(),
                driver.current_device().name.c_str());
    return ok ? 0 : 1;
}

}  // namespace

void add_demo(Commands& commands, CLI::App& coda) {
    auto options = std::make_shared<DemoOptions>();
    CLI::App& demo_command = commands.add(coda, "demo", "build the LLaMA block's epilogues, show their code, compile them, "
                                                        "and (with a GPU) run and check each against the CPU reference",
                                          [options] { return demo(*options); });
    add_arch_option(demo_command, options->arch);
    demo_command.add_flag("--no-run", options->no_run, "compile only, even with a GPU");
    demo_command.add_flag("--layouts", options->layouts,
                          "instead, check the plain GEMM in all four operand layouts (bf16, f16) and out-proj (GPU)");
    demo_command.add_option("--config", options->config_text, "the tile config for --layouts, e.g. 'hopper bm=128 bn=128'")
        ->type_name("TEXT");
}

}  // namespace coda::cli
