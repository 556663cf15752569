// Assembles the translation unit around generate_epilogue: the kernel template and its traits are chosen
// by the graph's domain, and GEMM template arguments come from the GemmSpec and the KernelConfig.
#include "codegen/kernel_source.hpp"

#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "codegen/epilogue_codegen.hpp"
#include "coda/error.hpp"
#include "ir/hash.hpp"
#include "ir/text.hpp"
#include "util/arch.hpp"

namespace coda {
namespace {

struct KernelChoice {
    std::string header;  // "coda/portable_gemm.cuh"
    std::string kernel;  // the __global__ template instantiation
    std::string traits;  // the matching traits instantiation
};

// The Hopper mainloop's compile-time rules (templates/coda/hopper_gemm.cuh).
void check_hopper_config(const Graph& g, const KernelConfig& cfg, const std::string& arch) {
    const auto fail = [&](const std::string& rule) {
        return Error(fmt::format("graph '{}': kernel config '{}' is not valid for the Hopper mainloop: {} (the "
                                 "default is '{}')",
                                 g.name(), cfg.to_text(), rule, hopper_config(128, 256, 4, Schedule::Cooperative).to_text()));
    };
    if (arch != kHopperArch)
        throw fail(fmt::format("it needs sm_90a (wgmma, setmaxnreg), not {}; use a portable config (KernelConfig{{}}) "
                               "for other targets", arch));
    const bool pingpong = cfg.schedule == Schedule::PingPong;
    const int wg_rows = pingpong ? cfg.bm : cfg.bm / 2;
    const std::pair<bool, const char*> rules[] = {
        {cfg.bk == 64, "bk must be 64 (one 128-byte swizzle row of 16-bit elements)"},
        {cfg.bn == 128 || cfg.bn == 256, "bn must be 128 or 256 (one wgmma instruction covers the tile's columns)"},
        {cfg.bm % 64 == 0 && cfg.bm >= 64 && cfg.bm <= 256, "bm must be 64, 128, 192 or 256"},
        {wg_rows == 64 || wg_rows == 128,
         "each consumer warpgroup must hold 64 or 128 rows (bm for ping-pong, bm / 2 for cooperative)"},
        {wg_rows * cfg.bn <= 128 * 128,
         "a consumer warpgroup's accumulator (rows x bn) must not exceed 128 x 128 (128 registers a thread)"},
        {cfg.stages >= 2 && cfg.stages <= 16, "stages must be between 2 and 16"},
        {cfg.cluster_m == 1 || cfg.cluster_m == 2, "cluster must be 1 or 2 (CTAs along M that share B by TMA multicast)"},
    };
    for (const auto& [ok, rule] : rules)
        if (!ok) throw fail(rule);
}

void check_config(const Graph& g, const KernelConfig& cfg) {
    const std::pair<const char*, int> fields[] = {{"bm", cfg.bm},           {"bn", cfg.bn},
                                                  {"bk", cfg.bk},           {"wm", cfg.warps_m},
                                                  {"wn", cfg.warps_n},      {"stages", cfg.stages}};
    for (const auto& [name, value] : fields)
        if (value <= 0)
            throw Error(fmt::format("graph '{}': kernel config '{}' has {}={}; every tile parameter must be positive "
                                    "(the default is '{}')",
                                    g.name(), cfg.to_text(), name, value, KernelConfig{}.to_text()));
    // The portable mainloop's compile-time rules (templates/coda/portable_gemm.cuh, smem_tile.cuh), checked
    // here so that a bad config is the user's error, not a failed NVRTC compile.
    const auto power_of_two = [](int v) { return v > 0 && (v & (v - 1)) == 0; };
    const int threads = 32 * cfg.warps_m * cfg.warps_n;
    const int pipeline_bytes = cfg.stages * (cfg.bm + cfg.bn) * cfg.bk * 2;
    constexpr int kMaxSharedBytes = 227 * 1024;  // the largest dynamic shared memory of a CTA (sm_90)
    const std::pair<bool, const char*> rules[] = {
        {cfg.bm % (16 * cfg.warps_m) == 0, "bm must be a multiple of 16 * wm"},
        {cfg.bn % (16 * cfg.warps_n) == 0, "bn must be a multiple of 16 * wn"},
        {cfg.bk % 16 == 0, "bk must be a multiple of 16 (the mma depth)"},
        {cfg.stages >= 2, "stages must be at least 2"},
        {power_of_two(cfg.bk / 8) && power_of_two(cfg.bm / 8) && power_of_two(cfg.bn / 8) && cfg.bk >= 16 &&
             cfg.bm >= 16 && cfg.bn >= 16,
         "bm, bn and bk must be powers of two of at least 16 (the shared-memory swizzle works on 16-byte chunks)"},
        {(cfg.bm * cfg.bk / 8) % threads == 0 && (cfg.bn * cfg.bk / 8) % threads == 0,
         "each operand tile (bm x bk, bn x bk) must split evenly into 16-byte chunks over 32 * wm * wn threads"},
        {threads <= 1024, "32 * wm * wn threads must not exceed 1024"},
        {pipeline_bytes <= kMaxSharedBytes, "stages * (bm + bn) * bk * 2 bytes of pipeline exceed 227 KiB"},
    };
    for (const auto& [ok, rule] : rules)
        if (!ok)
            throw Error(fmt::format("graph '{}': kernel config '{}' is not valid for the portable mainloop: {} "
                                    "(the default is '{}')",
                                    g.name(), cfg.to_text(), rule, KernelConfig{}.to_text()));
}

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
}

KernelChoice choose_kernel(const Graph& g, const KernelConfig& cfg, const std::string& arch) {
    switch (g.domain()) {
        case Domain::Gemm: {
            const GemmSpec& spec = g.spec();
            if (spec.input != DType::BF16 && spec.input != DType::F16)
                throw InternalError(fmt::format("gemm graph '{}' has input dtype {}; validation should reject it",
                                                g.name(), to_string(spec.input)));
            if (cfg.mainloop == Mainloop::Hopper) {
                check_hopper_config(g, cfg, arch);
                const std::string args = fmt::format(
                    "{}, {}, {}, {}, {}, {}, {}", spec.input == DType::BF16 ? "coda::bf16" : "coda::f16",
                    spec.a == Major::K ? "true" : "false", spec.b == Major::K ? "true" : "false", cfg.bm, cfg.bn,
                    cfg.stages, cfg.schedule == Schedule::PingPong ? "true" : "false");
                // The cluster shape is the entry point's (__cluster_dims__), so it is not a kernel argument.
                return {"coda/hopper_gemm.cuh",
                        fmt::format("coda::{}<{}, coda_gen::Epilogue>",
                                    cfg.cluster_m == 2 ? "hopper_gemm_pair" : "hopper_gemm", args),
                        fmt::format("coda::HopperGemmTraits<{}, {}, coda_gen::Epilogue>", args, cfg.cluster_m)};
            }
            check_config(g, cfg);
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
    check_arch(g.graph, arch);
    const KernelChoice k = choose_kernel(g.graph, cfg, arch);
    std::string src = banner(g.graph, cfg, arch, k);
    src += fmt::format("#include \"{}\"\n", k.header);
    // The functor names coda::load/store, the math helpers and coda::Reducer itself, so it includes their
    // headers rather than relying on what the kernel template happens to include.
    src += "#include \"coda/numeric.cuh\"\n#include \"coda/reduce.cuh\"\n\n";
    src += "namespace coda_gen {\n\n";
    src += generate_epilogue(g);
    src += fmt::format("\nusing Traits = {};\n\n}}  // namespace coda_gen\n\n", k.traits);
    src += "// Read by the host after loading the module: block size, dynamic shared memory, CTA tile, mainloop\n"
           "// (1: Hopper, persistent with TMA operands), pipeline stages (Hopper: after fitting the epilogue), and\n"
           "// the Hopper tile-tensor maps: how many the kernel takes, whether it loads tile inputs by TMA, and the\n"
           "// columns of one chunk (the box is that many columns by the CTA tile's rows); then the CTAs of a cluster;\n"
           "// then the staged tile outputs stored by TMA (their maps follow the inputs') and the rows of their box.\n";
    const bool hopper = g.graph.domain() == Domain::Gemm && cfg.mainloop == Mainloop::Hopper;
    if (g.graph.domain() == Domain::Finalize)
        src += "extern \"C\" __constant__ int coda_kernel_info[12] = {coda_gen::Traits::kThreads, "
               "coda_gen::Traits::kSmemBytes, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0};\n";
    else if (!hopper)
        src += "extern \"C\" __constant__ int coda_kernel_info[12] = {coda_gen::Traits::kThreads, "
               "coda_gen::Traits::kSmemBytes, coda_gen::Traits::Layout::kBM, coda_gen::Traits::Layout::kBN, 0, 0, 0, 0, "
               "0, 1, 0, 0};\n";
    else
        src += "extern \"C\" __constant__ int coda_kernel_info[12] = {coda_gen::Traits::kThreads, "
               "coda_gen::Traits::kSmemBytes, coda_gen::Traits::Layout::kBM, coda_gen::Traits::Layout::kBN, 1, "
               "coda_gen::Traits::kStages, coda_gen::Traits::kTileMaps, coda_gen::Traits::kStageInputs ? 1 : 0, "
               "coda_gen::Traits::kChunkColumns, coda_gen::Traits::kCluster, coda_gen::Traits::kOutputMaps, "
               "coda_gen::Traits::kWgM};\n";
    return {src, k.kernel};
}

}  // namespace coda
