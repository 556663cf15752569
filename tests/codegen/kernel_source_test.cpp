// Tests of the whole generated translation unit: the out-proj golden file, determinism, the banner, the
// kernel template and traits chosen per domain and GemmSpec, and the KernelConfig text.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "codegen/codegen_test_graphs.hpp"
#include "codegen/kernel_source.hpp"
#include "coda/error.hpp"
#include "ir/check_graph.hpp"
#include "ir/hash.hpp"
#include "ir/text.hpp"

namespace coda {
namespace {

const std::string kGoldenPath = std::string(CODA_SOURCE_DIR) + "/tests/codegen/golden/out_proj.cu";

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return {};
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

TEST_CASE("the out-proj kernel source matches the golden file byte for byte", "[codegen]") {
    const KernelSource k = generate_kernel_source(check_graph(test::out_proj_graph()), KernelConfig{}, "sm_90a");
    const char* update = std::getenv("CODA_UPDATE_GOLDEN");
    if (update != nullptr && std::string(update) == "1") {
        std::ofstream(kGoldenPath, std::ios::binary) << k.source;
        WARN("rewrote " << kGoldenPath);
    }
    const std::string golden = read_file(kGoldenPath);
    INFO("generated source differs from " << kGoldenPath
                                           << "; if the change is intended, rerun this test with "
                                              "CODA_UPDATE_GOLDEN=1 to rewrite the golden file, then review its diff");
    REQUIRE_FALSE(golden.empty());
    CHECK(k.source == golden);
}

TEST_CASE("kernel sources are deterministic", "[codegen]") {
    const CheckedGraph g = check_graph(test::out_proj_graph());
    const KernelSource a = generate_kernel_source(g, KernelConfig{}, "sm_90a");
    const KernelSource b = generate_kernel_source(check_graph(test::out_proj_graph()), KernelConfig{}, "sm_90a");
    CHECK(a.source == b.source);
    CHECK(a.kernel_expression == b.kernel_expression);
}

TEST_CASE("the banner carries the graph text, hash, arch, config and kernel", "[codegen]") {
    const Graph graph = test::out_proj_graph();
    KernelConfig cfg;
    cfg.warps_n = 4;
    const KernelSource k = generate_kernel_source(check_graph(graph), cfg, "sm_80");
    CHECK(k.source.rfind("// coda generated kernel\n", 0) == 0);
    std::istringstream text(to_text(graph));
    for (std::string line; std::getline(text, line);) CHECK(contains(k.source, "//   " + line + "\n"));
    CHECK(contains(k.source, "// hash: " + graph_hash(graph) + "\n"));
    CHECK(contains(k.source, "// arch: sm_80\n"));
    CHECK(contains(k.source, "// config: bm=128 bn=128 bk=32 wm=2 wn=4 stages=4\n"));
    CHECK(contains(k.source, "// kernel: " + k.kernel_expression + "\n"));
    CHECK(contains(k.source, "#include \"coda/portable_gemm.cuh\"\n"));
    CHECK(k.kernel_expression ==
          "coda::portable_gemm<coda::bf16, true, true, 128, 128, 32, 2, 4, 4, coda_gen::Epilogue>");
    CHECK(contains(k.source, "using Traits = coda::PortableGemmTraits<coda::bf16, true, true, 128, 128, 32, 2, 4, 4, "
                             "coda_gen::Epilogue>;"));
    CHECK(contains(k.source, "extern \"C\" __constant__ int coda_kernel_info[12] = {coda_gen::Traits::kThreads, "
                             "coda_gen::Traits::kSmemBytes, coda_gen::Traits::Layout::kBM, "
                             "coda_gen::Traits::Layout::kBN, 0, 0, 0, 0, 0, 1, 0, 0};"));
}

TEST_CASE("a Hopper config selects the TMA + wgmma mainloop on sm_90a", "[codegen]") {
    Graph g = Graph::gemm("dw", GemmSpec{DType::F16, Major::MN, Major::K});
    g.store(g.accumulator(), "D", DType::BF16);
    const KernelSource k =
        generate_kernel_source(check_graph(g), hopper_config(128, 128, 6, Schedule::PingPong), "sm_90a");
    CHECK(contains(k.source, "// config: hopper bm=128 bn=128 bk=64 stages=6 pingpong cluster=1\n"));
    CHECK(contains(k.source, "#include \"coda/hopper_gemm.cuh\"\n"));
    CHECK(k.kernel_expression == "coda::hopper_gemm<coda::f16, false, true, 128, 128, 6, true, coda_gen::Epilogue>");
    CHECK(contains(k.source, "coda_gen::Traits::Layout::kBN, 1, coda_gen::Traits::kStages, "
                             "coda_gen::Traits::kTileMaps, coda_gen::Traits::kStageInputs ? 1 : 0, "
                             "coda_gen::Traits::kChunkColumns, coda_gen::Traits::kCluster, "
                             "coda_gen::Traits::kOutputMaps, coda_gen::Traits::kWgM};"));
    CHECK(contains(k.source, "using Traits = coda::HopperGemmTraits<coda::f16, false, true, 128, 128, 6, true, 1, "
                             "coda_gen::Epilogue>;"));
}

TEST_CASE("a Hopper config with cluster=2 selects the entry point with 2-CTA clusters", "[codegen]") {
    const KernelSource k = generate_kernel_source(check_graph(test::out_proj_graph()),
                                                  hopper_config(128, 128, 6, Schedule::PingPong, 2), "sm_90a");
    CHECK(contains(k.source, "// config: hopper bm=128 bn=128 bk=64 stages=6 pingpong cluster=2\n"));
    CHECK(k.kernel_expression ==
          "coda::hopper_gemm_pair<coda::bf16, true, true, 128, 128, 6, true, coda_gen::Epilogue>");
    CHECK(contains(k.source, "using Traits = coda::HopperGemmTraits<coda::bf16, true, true, 128, 128, 6, true, 2, "
                             "coda_gen::Epilogue>;"));
}

TEST_CASE("Hopper configs are checked before NVRTC sees them", "[codegen]") {
    const CheckedGraph g = check_graph(test::out_proj_graph());
    const auto rejects = [&](const KernelConfig& cfg, const std::string& arch, const std::string& why) {
        INFO(cfg.to_text() << " on " << arch);
        CHECK_THROWS_WITH(generate_kernel_source(g, cfg, arch),
                          Catch::Contains("not valid for the Hopper mainloop") && Catch::Contains(why));
    };
    const KernelConfig good = hopper_config(128, 256, 4, Schedule::Cooperative);
    rejects(good, "sm_80", "needs sm_90a");
    rejects(good, "sm_90", "needs sm_90a");
    KernelConfig c = good;
    c.bk = 32;
    rejects(c, "sm_90a", "bk must be 64");
    rejects(hopper_config(128, 192, 4, Schedule::Cooperative), "sm_90a", "bn must be 128 or 256");
    rejects(hopper_config(64, 256, 4, Schedule::Cooperative), "sm_90a", "64 or 128 rows");
    rejects(hopper_config(256, 256, 4, Schedule::Cooperative), "sm_90a", "must not exceed 128 x 128");
    rejects(hopper_config(128, 256, 4, Schedule::PingPong), "sm_90a", "must not exceed 128 x 128");
    rejects(hopper_config(128, 256, 1, Schedule::Cooperative), "sm_90a", "stages must be between 2 and 16");
    rejects(hopper_config(128, 256, 4, Schedule::Cooperative, 3), "sm_90a", "cluster must be 1 or 2");
    rejects(hopper_config(128, 256, 4, Schedule::Cooperative, 0), "sm_90a", "cluster must be 1 or 2");
    for (const NamedConfig& named : hopper_named_configs()) {
        INFO(named.name);
        CHECK_NOTHROW(generate_kernel_source(g, named.config, "sm_90a"));
    }
}

TEST_CASE("the kernel template follows the domain and the GemmSpec", "[codegen]") {
    Graph gemm = Graph::gemm("dw", GemmSpec{DType::F16, Major::MN, Major::MN});
    gemm.accumulate(gemm.accumulator(), "grad", DType::F32);
    KernelConfig cfg{64, 256, 64, 2, 4, 3};
    const KernelSource g = generate_kernel_source(check_graph(gemm), cfg, "sm_90a");
    CHECK(g.kernel_expression ==
          "coda::portable_gemm<coda::f16, false, false, 64, 256, 64, 2, 4, 3, coda_gen::Epilogue>");

    Graph tile = Graph::tile("copy");
    tile.store(tile.tile_input("x", DType::BF16), "y", DType::F32);
    const KernelSource t = generate_kernel_source(check_graph(tile), cfg, "sm_90a");
    CHECK(t.kernel_expression == "coda::tile_program<coda_gen::Epilogue>");
    CHECK(contains(t.source, "#include \"coda/tile_program.cuh\"\n"));
    CHECK(contains(t.source, "using Traits = coda::TileProgramTraits<coda_gen::Epilogue>;"));
    CHECK_FALSE(contains(t.source, "// config:"));

    Graph fin = Graph::finalize("rstd");
    fin.store(fin.rsqrt(fin.partials("sumsq", ReduceOp::Sum)), "r", DType::F32);
    const KernelSource f = generate_kernel_source(check_graph(fin), cfg, "sm_90a");
    CHECK(f.kernel_expression == "coda::finalize_program<coda_gen::Program>");
    CHECK(contains(f.source, "#include \"coda/finalize_program.cuh\"\n"));
    CHECK(contains(f.source, "using Traits = coda::FinalizeTraits<coda_gen::Program>;"));
}

TEST_CASE("a gemm kernel with a non-positive tile parameter is a user error", "[codegen]") {
    KernelConfig cfg;
    cfg.stages = 0;
    try {
        generate_kernel_source(check_graph(test::out_proj_graph()), cfg, "sm_90a");
        FAIL("expected coda::Error");
    } catch (const Error& e) {
        const std::string what = e.what();
        CHECK(contains(what, "out_proj"));
        CHECK(contains(what, "stages=0"));
        CHECK(contains(what, "positive"));
    }
}

TEST_CASE("a gemm config the portable mainloop cannot build is a user error naming the rule", "[codegen]") {
    struct Case {
        KernelConfig cfg;
        const char* rule;
    };
    const Case cases[] = {
        {{64, 128, 32, 8, 1, 4}, "multiple of 16 * wm"},     {{128, 128, 24, 2, 2, 4}, "multiple of 16"},
        {{128, 128, 32, 2, 2, 1}, "at least 2"},             {{192, 128, 32, 2, 2, 3}, "powers of two"},
        {{128, 128, 32, 2, 16, 4}, "multiple of 16 * wn"},    {{256, 256, 128, 2, 2, 4}, "227 KiB"},
        {{32, 32, 16, 2, 2, 2}, "split evenly"},
    };
    for (const Case& c : cases) {
        INFO(c.cfg.to_text());
        CHECK_THROWS_WITH(generate_kernel_source(check_graph(test::out_proj_graph()), c.cfg, "sm_90a"),
                          Catch::Contains("not valid for the portable mainloop") && Catch::Contains(c.rule));
    }
    const KernelConfig wide{128, 128, 32, 2, 4, 4};
    CHECK_NOTHROW(generate_kernel_source(check_graph(test::out_proj_graph()), wide, "sm_90a"));
}

TEST_CASE("KernelConfig::to_text", "[codegen]") {
    CHECK(KernelConfig{}.to_text() == "bm=128 bn=128 bk=32 wm=2 wn=2 stages=4");
    CHECK(KernelConfig{64, 256, 64, 1, 8, 3}.to_text() == "bm=64 bn=256 bk=64 wm=1 wn=8 stages=3");
}

}  // namespace
}  // namespace coda
