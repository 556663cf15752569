// The cache key covers the code generator: the same graph, config, templates and NVRTC with a different generated
// source (what an upgraded lowering produces) must never find the kernel the old source built.
#include <catch2/catch.hpp>

#include "cache/cache_key.hpp"
#include "coda/blocks.hpp"
#include "ir/check_graph.hpp"
#include "mainloop/mainloops.hpp"
#include "runtime/pipeline.hpp"

namespace coda {
namespace {

TEST_CASE("a change to one lowering gives a new cache key", "[runtime]") {
    const Graph g = blocks::gate_up_swiglu();  // its epilogue calls coda::silu, as ops.def spells silu
    const std::optional<KernelConfig> config = HopperConfig{};
    const BuildTarget target{"sm_90a", &mainloop_for(g, config, "sm_90a"), config};
    const KernelSource source = generate_kernel_source(check_graph(g), *target.mainloop, config, "sm_90a");
    const CacheKeyParts parts = key_parts(target, source);

    // The same kernel as a code generator that spelled silu differently would emit it: one line of the functor.
    KernelSource relowered = source;
    const std::size_t at = relowered.source.find("coda::silu(");
    REQUIRE(at != std::string::npos);
    relowered.source.replace(at, 11, "coda::silu_fast(");
    const CacheKeyParts other = key_parts(target, relowered);

    CHECK(other.template_digest == parts.template_digest);  // nothing but the generated source differs...
    CHECK(other.arch == parts.arch);
    CHECK(cache_key(other) != cache_key(parts));  // ...and that is enough for a new key
    CHECK(cache_key(key_parts(target, source)) == cache_key(parts));
}

}  // namespace
}  // namespace coda
