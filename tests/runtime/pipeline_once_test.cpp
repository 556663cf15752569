// One build of a graph prints its canonical text once and types it once: the default-config choice (tuning lookup
// by hash, the epilogue's traffic from its bindings), the kernel's name, the source's banner and CODA_RECORD share
// them. And the cache key needs neither beside the source, which holds both the graph and the config.
#include <catch2/catch.hpp>

#include "cache/cache_key.hpp"
#include "cache/kernel_cache.hpp"
#include "coda/blocks.hpp"
#include "coda/runtime.hpp"
#include "ir/hash.hpp"
#include "ir/pass_counts.hpp"
#include "coda/text.hpp"
#include "ir/text.hpp"
#include "mainloop/mainloops.hpp"
#include "runtime/pipeline.hpp"
#include "support/temp_dir.hpp"

namespace coda {
namespace {

// The text renderings and typings that `run` did.
template <class Run>
detail::PassCounts passes_of(Run&& run) {
    const detail::PassCounts before = detail::pass_counts();
    run();
    const detail::PassCounts after = detail::pass_counts();
    return {after.text_renderings - before.text_renderings, after.typings - before.typings};
}

TEST_CASE("a cold build renders the graph's canonical text once and checks the graph once", "[runtime]") {
    // A graph no memo has seen, on sm_90a, where its default config reads the epilogue's traffic off its bindings.
    const Graph g = blocks::gate_up_swiglu();
    test::TempDir dir("coda-once");
    KernelCache cache(dir.path(), true);
    std::optional<BuiltKernel> built;
    const detail::PassCounts cold = passes_of([&] {
        // As Runtime::warm strings the stages: the default config, its mainloop, then the build.
        const std::optional<KernelConfig> config = Runtime::instance().default_config(g, "sm_90a");
        built = build_kernel(g, BuildTarget{"sm_90a", &mainloop_for(g, config, "sm_90a"), config}, cache);
    });
    REQUIRE(built->cached.hit == CacheHit::Built);  // generated and compiled by NVRTC
    CHECK(cold.text_renderings == 1);
    CHECK(cold.typings == 1);
    // What the one rendering fed: the kernel's name and the banner.
    const std::string text = to_text(g);
    CHECK(built->name == "gate_up_swiglu-" + graph_hash(g));
    CHECK(built->source.source.find("// hash: " + text_hash(text) + "\n") != std::string::npos);

    // The same graph again, for another config: nothing printed or typed again.
    const std::optional<KernelConfig> other = HopperConfig{128, 256, 4, Schedule::Cooperative, 1};
    const detail::PassCounts again = passes_of([&] {
        const BuildTarget target{"sm_90a", &mainloop_for(g, other, "sm_90a"), other};
        CHECK(build_kernel(g, target, cache).cached.hit == CacheHit::Built);
    });
    CHECK(again.text_renderings == 0);
    CHECK(again.typings == 0);
}

TEST_CASE("the cache key follows the graph and the config through the generated source alone", "[runtime]") {
    const auto key_of = [](const Graph& g, const std::optional<KernelConfig>& config) {
        const BuildTarget target{"sm_90a", &mainloop_for(g, config, "sm_90a"), config};
        return cache_key(key_parts(target, generate_kernel_source(prepare_graph(g), *target.mainloop, config,
                                                                  target.arch)));
    };
    const std::optional<KernelConfig> config = HopperConfig{};
    const std::string key = key_of(blocks::out_proj(), config);
    CHECK(key_of(blocks::out_proj(), config) == key);
    CHECK(key_of(blocks::qkv_rope(), config) != key);
    CHECK(key_of(blocks::out_proj(), HopperConfig{128, 256, 4, Schedule::Cooperative, 1}) != key);
    // A graph that differs from out_proj in its name alone: the same code under another banner, so another key.
    std::string text = to_text(blocks::out_proj());
    REQUIRE(text.rfind("graph out_proj ", 0) == 0);
    text.insert(std::string("graph out_proj").size(), "_renamed");
    CHECK(key_of(parse_graph(text), config) != key);
}

}  // namespace
}  // namespace coda
