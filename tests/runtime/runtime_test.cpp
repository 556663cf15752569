// Runtime behaviour that needs no GPU: graph errors come before driver errors, empty kernels refuse to be
// used, a checked graph does not change when the user keeps building, and unusable targets are rejected.
#include <catch2/catch.hpp>

#include "coda/blocks.hpp"
#include "coda/error.hpp"
#include "coda/runtime.hpp"
#include "driver/cuda_driver.hpp"
#include "config/settings.hpp"
#include "ir/check_graph.hpp"
#include "ir/graph_access.hpp"

using namespace coda;

TEST_CASE("Runtime::compile reports graph mistakes before asking for a GPU", "[runtime]") {
    if (Driver::instance().available()) return;  // with a GPU the driver is fine and the graph error shows anyway
    Graph g = Graph::gemm("broken");
    g.exp(g.accumulator(), "unused");
    CHECK_THROWS_WITH(Runtime::instance().compile(g),
                      Catch::Contains("'%unused'") && Catch::Contains("never used") && Catch::Contains("nothing would be written"));
}

TEST_CASE("an empty Kernel throws coda::Error from every accessor", "[runtime]") {
    const Kernel k;
    CHECK_THROWS_AS(k.graph(), Error);
    CHECK_THROWS_AS(k.config(), Error);
    CHECK_THROWS_AS(k.report(), Error);
    CHECK_THROWS_AS(k.source(), Error);
    CHECK_THROWS_AS(k.partials_shape("x", 1, 2), Error);
    CHECK_THROWS_WITH(k.launch(Args()), Catch::Contains("empty") && Catch::Contains("Runtime::compile"));
}

TEST_CASE("a checked graph keeps its nodes when the user's graph grows", "[runtime]") {
    Graph g = blocks::out_proj();
    const CheckedGraph checked = check_graph(g);
    const std::size_t before = checked.graph.nodes().size();
    g.store(g.accumulator("again"), "extra", DType::F32);
    CHECK(checked.graph.nodes().size() == before);
    CHECK(g.nodes().size() == before + 2);
    CHECK(detail::GraphAccess::of(g.accumulator("third")).nodes().size() == before + 3);
}

TEST_CASE("targets older than sm_80 and malformed arch names are user errors", "[runtime]") {
    const auto source_for = [](const std::string& arch) {
        CompileOptions options;
        options.arch = arch;
        return Runtime::instance().source(blocks::out_proj(), options);
    };
    CHECK_THROWS_WITH(source_for("sm_75"), Catch::Contains("sm_80 or newer"));
    CHECK_THROWS_WITH(source_for("compute_90"), Catch::Contains("is not a GPU architecture"));
    CompileOptions bad;
    bad.arch = "nonsense";
    CHECK_THROWS_WITH(Runtime::instance().warm(blocks::out_proj(), bad), Catch::Contains("is not a GPU architecture"));
    CHECK_NOTHROW(source_for("sm_86"));
    CHECK_NOTHROW(source_for("sm_100a"));
}

TEST_CASE("source() and warm() honour CompileOptions: the arch and the config", "[runtime]") {
    CompileOptions options;
    options.arch = "sm_80";
    // Without a config: the arch's default mainloop.
    CHECK(Runtime::instance().source(blocks::out_proj(), options).find("// kernel: coda::portable_gemm<") !=
          std::string::npos);
    options.arch = "sm_90a";
    CHECK(Runtime::instance().source(blocks::out_proj(), options).find("// kernel: coda::hopper_gemm<") !=
          std::string::npos);
    // A config is used as given, never replaced by the default.
    options.config = HopperConfig{128, 256, 4, Schedule::Cooperative, 1};
    CHECK(Runtime::instance().source(blocks::out_proj(), options)
              .find("// config: hopper bm=128 bn=256 bk=64 stages=4 cooperative cluster=1\n") != std::string::npos);
    options.config = PortableConfig{};
    CHECK(Runtime::instance().source(blocks::out_proj(), options).find("// kernel: coda::portable_gemm<") !=
          std::string::npos);
    // A Hopper config for another arch is an error, not a silent switch to the portable mainloop.
    options.arch = "sm_80";
    options.config = HopperConfig{};
    CHECK_THROWS_WITH(Runtime::instance().source(blocks::out_proj(), options), Catch::Contains("needs sm_90a"));
    // Tile programs and finalizers take no config.
    options.arch = "sm_90a";
    CHECK_THROWS_WITH(Runtime::instance().source(blocks::rope_backward(), options),
                      Catch::Contains("takes no kernel config"));
    options.config.reset();
    CHECK_NOTHROW(Runtime::instance().source(blocks::rope_backward(), options));
}

TEST_CASE("warm() without an arch, a GPU or CODA_ARCH asks for an arch", "[runtime]") {
    if (Driver::instance().available() || !settings().arch.empty()) return;  // an arch is known then
    CHECK_THROWS_WITH(Runtime::instance().warm(blocks::out_proj()),
                      Catch::Contains("no arch to compile for") && Catch::Contains("CompileOptions::arch"));
}

TEST_CASE("default_config is the arch's mainloop default, and none for the programs", "[runtime]") {
    CHECK(Runtime::instance().default_config(blocks::out_proj(), "sm_80") == KernelConfig(PortableConfig{}));
    CHECK_FALSE(Runtime::instance().default_config(blocks::rope_backward(), "sm_90a").has_value());
    CHECK_FALSE(Runtime::instance().default_config(blocks::rms_finalize(), "sm_80").has_value());
}
