// Assembles the translation unit around generate_epilogue: the mainloop names the template it instantiates; this
// file adds the banner, the includes and the kernel's self-description.
#include "codegen/kernel_source.hpp"

#include <sstream>

#include <fmt/format.h>

#include "codegen/epilogue_codegen.hpp"
#include "coda/error.hpp"
#include "ir/hash.hpp"
#include "ir/text.hpp"
#include "mainloop/mainloop.hpp"
#include "util/arch.hpp"

namespace coda {
namespace {

// The templates need mma.sync with bf16 and cp.async: sm_80 or newer, named as real SASS (sm_, not compute_)
// so that NVRTC produces a cubin.
void check_arch(const Graph& g, const std::string& arch) {
    const std::optional<int> number = sm_number(arch);
    if (!number)
        throw Error(fmt::format("graph '{}': '{}' is not a GPU architecture; expected sm_<major><minor> with an "
                                "optional 'a' or 'f' suffix, e.g. sm_80 or sm_90a",
                                g.name(), arch));
    if (*number < 80)
        throw Error(fmt::format("graph '{}': {} is not supported: coda's kernels need sm_80 or newer (mma.sync "
                                "with bf16, cp.async)",
                                g.name(), arch));
    // Converting to and from e4m3 and e5m2 (PTX cvt ...x2) takes sm_89 or newer.
    for (const Node& n : g.nodes())
        if ((n.dtype == DType::E4M3 || n.dtype == DType::E5M2) && *number < 89)
            throw Error(fmt::format("graph '{}': its {} tensor '{}' needs sm_89 or newer (FP8 conversions), not {}",
                                    g.name(), to_string(n.dtype), n.name, arch));
}

std::string banner(const std::string& graph_text, const std::string& hash, const std::string& config_text,
                   const std::string& arch, const KernelTemplate& k) {
    std::string out = "// coda generated kernel\n";
    std::istringstream text(graph_text);
    for (std::string line; std::getline(text, line);) out += "//   " + line + "\n";
    out += fmt::format("// hash: {}\n", hash);
    out += fmt::format("// arch: {}\n", arch);
    out += fmt::format("// config: {}\n", config_text);
    out += fmt::format("// kernel: {}\n", k.kernel);
    return out;
}

KernelSource generate(const CheckedGraph& g, const std::string& graph_text, const std::string& hash,
                      const Mainloop& mainloop, const std::optional<KernelConfig>& config, const std::string& arch) {
    check_arch(g.graph, arch);
    if (g.graph.domain() == Domain::Gemm && (g.graph.spec().input == DType::F32 || g.graph.spec().input == DType::I32))
        throw InternalError(fmt::format("gemm graph '{}' has input dtype {}; validation should reject it",
                                        g.graph.name(), to_string(g.graph.spec().input)));
    mainloop.validate(g.graph, config, arch);
    const KernelTemplate k = mainloop.instantiate(g.graph, config);
    std::string src = banner(graph_text, hash, mainloop.key_text(config), arch, k);
    src += fmt::format("#include \"{}\"\n", k.header);
    // The functor names coda::load/store, the math helpers and coda::Reducer itself, so it includes their
    // headers rather than relying on what the kernel template happens to include.
    src += "#include \"coda/numeric.cuh\"\n#include \"coda/reduce.cuh\"\n\n";
    src += "namespace coda_gen {\n\n";
    src += generate_epilogue(g);
    src += fmt::format("\nusing Traits = {};\n\n}}  // namespace coda_gen\n\n", k.traits);
    src += "// Read by the host after loading the module (templates/coda/kernel_abi.cuh).\n"
           "extern \"C\" __constant__ coda::KernelInfo coda_kernel_info = coda_gen::Traits::info();\n";
    return {src, k.kernel};
}

}  // namespace

KernelSource generate_kernel_source(const PreparedGraph& g, const Mainloop& mainloop,
                                    const std::optional<KernelConfig>& config, const std::string& arch) {
    return generate(g.checked, g.text, g.hash, mainloop, config, arch);
}

KernelSource generate_kernel_source(const CheckedGraph& g, const Mainloop& mainloop,
                                    const std::optional<KernelConfig>& config, const std::string& arch) {
    const std::string text = to_text(g.graph);
    return generate(g, text, text_hash(text), mainloop, config, arch);
}

}  // namespace coda
