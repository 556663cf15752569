// Assembles the translation unit around generate_epilogue: the kernel template and its traits are chosen
// by the graph's domain, and GEMM template arguments come from the GemmSpec and the KernelConfig.
#include "codegen/kernel_source.hpp"

#include <sstream>

#include <fmt/format.h>

#include "codegen/epilogue_codegen.hpp"
#include "coda/error.hpp"
#include "ir/hash.hpp"
#include "ir/text.hpp"

namespace coda {
namespace {

struct KernelChoice {
    std::string header;  // "coda/portable_gemm.cuh"
    std::string kernel;  // the __global__ template instantiation
    std::string traits;  // the matching traits instantiation
};

void check_config(const Graph& g, const KernelConfig& cfg) {
    const std::pair<const char*, int> fields[] = {{"bm", cfg.bm},           {"bn", cfg.bn},
                                                  {"bk", cfg.bk},           {"wm", cfg.warps_m},
                                                  {"wn", cfg.warps_n},      {"stages", cfg.stages}};
    for (const auto& [name, value] : fields)
        if (value <= 0)
            throw Error(fmt::format("graph '{}': kernel config '{}' has {}={}; every tile parameter must be positive "
                                    "(the default is '{}')",
                                    g.name(), cfg.to_text(), name, value, KernelConfig{}.to_text()));
}

KernelChoice choose_kernel(const Graph& g, const KernelConfig& cfg) {
    switch (g.domain()) {
        case Domain::Gemm: {
            check_config(g, cfg);
            const GemmSpec& spec = g.spec();
            if (spec.input != DType::BF16 && spec.input != DType::F16)
                throw InternalError(fmt::format("gemm graph '{}' has input dtype {}; validation should reject it",
                                                g.name(), to_string(spec.input)));
            const std::string args = fmt::format(
                "{}, {}, {}, {}, {}, {}, {}, {}, {}, coda_gen::Epilogue",
                spec.input == DType::BF16 ? "coda::bf16" : "coda::f16", spec.a == Major::K ? "true" : "false",
                spec.b == Major::K ? "true" : "false", cfg.bm, cfg.bn, cfg.bk, cfg.warps_m, cfg.warps_n, cfg.stages);
            return {"coda/portable_gemm.cuh", fmt::format("coda::portable_gemm<{}>", args),
                    fmt::format("coda::PortableGemmTraits<{}>", args)};
        }
        case Domain::Tile:
            return {"coda/tile_program.cuh", "coda::tile_program<coda_gen::Epilogue>",
                    "coda::TileProgramTraits<coda_gen::Epilogue>"};
        case Domain::Finalize:
            return {"coda/finalize_program.cuh", "coda::finalize_program<coda_gen::Program>",
                    "coda::FinalizeTraits<coda_gen::Program>"};
    }
    throw InternalError("unknown domain");
}

std::string banner(const Graph& g, const KernelConfig& cfg, const std::string& arch, const KernelChoice& k) {
    std::string out = "// coda generated kernel\n";
    std::istringstream text(to_text(g));
    for (std::string line; std::getline(text, line);) out += "//   " + line + "\n";
    out += fmt::format("// hash: {}\n", graph_hash(g));
    out += fmt::format("// arch: {}\n", arch);
    if (g.domain() == Domain::Gemm) out += fmt::format("// config: {}\n", cfg.to_text());
    out += fmt::format("// kernel: {}\n", k.kernel);
    return out;
}

}  // namespace

KernelSource generate_kernel_source(const CheckedGraph& g, const KernelConfig& cfg, const std::string& arch) {
    const KernelChoice k = choose_kernel(g.graph, cfg);
    std::string src = banner(g.graph, cfg, arch, k);
    src += fmt::format("#include \"{}\"\n", k.header);
    // The functor names coda::load/store, the math helpers and coda::Reducer itself, so it includes their
    // headers rather than relying on what the kernel template happens to include.
    src += "#include \"coda/numeric.cuh\"\n#include \"coda/reduce.cuh\"\n\n";
    src += "namespace coda_gen {\n\n";
    src += generate_epilogue(g);
    src += fmt::format("\nusing Traits = {};\n\n}}  // namespace coda_gen\n\n", k.traits);
    src += "// Read by the host after loading the module: block size and dynamic shared memory of the kernel.\n";
    src += "extern \"C\" __constant__ int coda_kernel_info[2] = {coda_gen::Traits::kThreads, "
           "coda_gen::Traits::kSmemBytes};\n";
    return {src, k.kernel};
}

}  // namespace coda
