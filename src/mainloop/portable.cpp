// The portable mainloop's host side: PortableConfig's text and rules (templates/coda/portable_rules.cuh, shared
// with the template), its template arguments, and a launch of one CTA per tile (tile_grid_launcher).
#include "mainloop/portable.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "coda/error.hpp"
#include "coda/portable_rules.cuh"
#include "mainloop/config_words.hpp"
#include "util/arch.hpp"

namespace coda {
namespace {

namespace rules = portable_rules;

std::string rule_text(rules::Rule r) {
    switch (r) {
        case rules::Rule::Ok: return "";
        case rules::Rule::Positive: return "every tile parameter must be positive";
        case rules::Rule::WarpTileM: return fmt::format("bm must be a multiple of {} * wm", rules::kMmaM);
        case rules::Rule::WarpTileN: return fmt::format("bn must be a multiple of {} * wn", rules::kMmaNPair);
        case rules::Rule::BK: return fmt::format("bk must be a multiple of {} (the mma depth)", rules::kMmaK);
        case rules::Rule::Stages: return fmt::format("stages must be at least {}", rules::kMinStages);
        case rules::Rule::PowerOfTwo:
            return fmt::format("bm, bn and bk must be powers of two of at least {} (the shared-memory swizzle works on "
                               "16-byte chunks)",
                               rules::kMinTile);
        case rules::Rule::Chunks:
            return "each operand tile (bm x bk, bn x bk) must split evenly into 16-byte chunks over 32 * wm * wn "
                   "threads";
        case rules::Rule::Threads: return fmt::format("32 * wm * wn threads must not exceed {}", rules::kMaxThreads);
    }
    return "unknown rule";
}

const PortableConfig& portable_of(const KernelConfig& config, const char* where) {
    return config_as<PortableConfig>(config, "portable", where);
}
const PortableConfig& portable_of(const std::optional<KernelConfig>& config, const char* where) {
    return config_as<PortableConfig>(config, "portable", where);
}

class PortableMainloop final : public Mainloop {
public:
    std::string_view name() const override { return "portable"; }
    Domain domain() const override { return Domain::Gemm; }
    KernelKind kind() const override { return KernelKind::PortableGemm; }
    std::string_view config_word() const override { return "portable"; }
    bool owns(const KernelConfig& config) const override { return config.portable() != nullptr; }

    std::string config_to_text(const KernelConfig& config) const override {
        const PortableConfig& c = portable_of(config, "config_to_text");
        return fmt::format("portable bm={} bn={} bk={} wm={} wn={} stages={}", c.bm, c.bn, c.bk, c.warps_m,
                           c.warps_n, c.stages);
    }

    KernelConfig parse_config(const std::vector<std::string>& words, const std::string& text) const override {
        PortableConfig c;
        ConfigWords known;
        known.fields = {{"bm", &c.bm}, {"bn", &c.bn},      {"bk", &c.bk},
                        {"wm", &c.warps_m}, {"wn", &c.warps_n}, {"stages", &c.stages}};
        read_config_words(words, known, text, config_to_text(PortableConfig{}));
        return c;
    }

    bool default_on(const std::string&) const override { return true; }
    KernelConfig base_config() const override { return PortableConfig{}; }
    std::vector<NamedConfig> candidates() const override { return {{"portable", PortableConfig{}}}; }

    void validate(const Graph& graph, const std::optional<KernelConfig>& config,
                  const std::string& arch) const override {
        const DType input = graph.spec().input;
        if (input != DType::BF16 && input != DType::F16)
            throw Error(fmt::format("graph '{}': {} operands need the Hopper mainloop (sm_90a, a 'hopper ...' "
                                    "config); the portable mainloop multiplies bf16 and f16 only",
                                    graph.name(), to_string(input)));
        for (const Node& n : graph.nodes())
            if (n.op == Op::ReduceGroup)
                throw Error(fmt::format("graph '{}': reduce_group needs the Hopper mainloop (sm_90a, a 'hopper ...' "
                                        "config): its pass over the accumulator before the visits is the Hopper "
                                        "epilogue's",
                                        graph.name()));
        const PortableConfig& c = portable_of(config, "validate");
        const auto fail = [&](const std::string& rule) {
            return Error(fmt::format("graph '{}': kernel config '{}' is not valid for the portable mainloop: {} (its "
                                     "default is '{}')",
                                     graph.name(), config->to_text(), rule, config_to_text(PortableConfig{})));
        };
        if (const rules::Rule r = rules::check(c.bm, c.bn, c.bk, c.warps_m, c.warps_n, c.stages); r != rules::Rule::Ok)
            throw fail(rule_text(r));
        const int budget = max_dynamic_smem_bytes(sm_number(arch).value_or(0));
        const long long bytes = rules::pipeline_bytes(c.bm, c.bn, c.bk, c.stages);
        if (bytes > budget)
            throw fail(fmt::format("stages * (bm + bn) * bk * 2 = {} bytes of pipeline exceed the {} bytes of shared "
                                   "memory a CTA may have on {}",
                                   bytes, budget, arch));
    }

    KernelTemplate instantiate(const Graph& graph, const std::optional<KernelConfig>& config) const override {
        const PortableConfig& c = portable_of(config, "instantiate");
        const GemmSpec& spec = graph.spec();
        const std::string args = fmt::format(
            "{}, {}, {}, {}, {}, {}, {}, {}, {}, coda_gen::Epilogue", spec.input == DType::BF16 ? "coda::bf16" : "coda::f16",
            spec.a == Major::K ? "true" : "false", spec.b == Major::K ? "true" : "false", c.bm, c.bn, c.bk, c.warps_m,
            c.warps_n, c.stages);
        return {"coda/portable_gemm.cuh", fmt::format("coda::portable_gemm<{}>", args),
                fmt::format("coda::PortableGemmTraits<{}>", args)};
    }

    std::string key_text(const std::optional<KernelConfig>& config) const override {
        return config_to_text(portable_of(config, "key_text"));
    }

    std::unique_ptr<Launcher> load(const LoadedModule& module, const CheckedGraph&,
                                   const std::optional<KernelConfig>& config) const override {
        const PortableConfig& c = portable_of(config, "load");
        expect_reported(module, "tile rows", module.info.tile_m, c.bm);
        expect_reported(module, "tile columns", module.info.tile_n, c.bn);
        expect_reported(module, "threads", module.info.threads, rules::threads(c.warps_m, c.warps_n));
        expect_reported(module, "cluster rows", module.info.cluster_m, 1);
        expect_reported(module, "cluster columns", module.info.cluster_n, 1);
        return tile_grid_launcher(module, TileGridProblem::Gemm);
    }
};

}  // namespace

const Mainloop& portable_mainloop() {
    static const PortableMainloop mainloop;
    return mainloop;
}

}  // namespace coda
