// Tests of the whole generated translation unit: the out-proj golden file, determinism, the banner, the kernel
// template and traits that the mainloop of each domain and config names, and the kernel's self-description.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "codegen/codegen_test_graphs.hpp"
#include "codegen/kernel_source.hpp"
#include "coda/error.hpp"
#include "coda/runtime.hpp"
#include "ir/check_graph.hpp"
#include "ir/hash.hpp"
#include "ir/text.hpp"
#include "mainloop/mainloops.hpp"

namespace coda {
namespace {

const std::string kGoldenPath = std::string(CODA_SOURCE_DIR) + "/tests/codegen/golden/out_proj.cu";

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

// The source for `config`, or without one for the default config of the arch's mainloop.
KernelSource source_of(const Graph& g, const std::optional<KernelConfig>& config, const std::string& arch) {
    const std::optional<KernelConfig> used = config ? config : Runtime::instance().default_config(g, arch);
    return generate_kernel_source(check_graph(g), mainloop_for(g, used, arch), used, arch);
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return {};
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

TEST_CASE("the out-proj kernel source matches the golden file byte for byte", "[codegen]") {
    const KernelSource k = source_of(test::out_proj_graph(), HopperConfig{}, "sm_90a");
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
    const KernelSource a = source_of(test::out_proj_graph(), PortableConfig{}, "sm_90a");
    const KernelSource b = source_of(test::out_proj_graph(), PortableConfig{}, "sm_90a");
    CHECK(a.source == b.source);
    CHECK(a.kernel_expression == b.kernel_expression);
}

TEST_CASE("the banner carries the graph text, hash, arch, config and kernel", "[codegen]") {
    const Graph graph = test::out_proj_graph();
    PortableConfig cfg;
    cfg.warps_n = 4;
    const KernelSource k = source_of(graph, cfg, "sm_80");
    CHECK(k.source.rfind("// coda generated kernel\n", 0) == 0);
    std::istringstream text(to_text(graph));
    for (std::string line; std::getline(text, line);) CHECK(contains(k.source, "//   " + line + "\n"));
    CHECK(contains(k.source, "// hash: " + graph_hash(graph) + "\n"));
    CHECK(contains(k.source, "// arch: sm_80\n"));
    CHECK(contains(k.source, "// config: portable bm=128 bn=128 bk=32 wm=2 wn=4 stages=4\n"));
    CHECK(contains(k.source, "// kernel: " + k.kernel_expression + "\n"));
    CHECK(contains(k.source, "#include \"coda/portable_gemm.cuh\"\n"));
    CHECK(k.kernel_expression ==
          "coda::portable_gemm<coda::bf16, true, true, 128, 128, 32, 2, 4, 4, coda_gen::Epilogue>");
    CHECK(contains(k.source, "using Traits = coda::PortableGemmTraits<coda::bf16, true, true, 128, 128, 32, 2, 4, 4, "
                             "coda_gen::Epilogue>;"));
    // The kernel describes itself with the traits' info(), a KernelInfo declared once for host and device.
    CHECK(contains(k.source, "extern \"C\" __constant__ coda::KernelInfo coda_kernel_info = coda_gen::Traits::info();"));
}

TEST_CASE("a Hopper config selects the TMA + wgmma mainloop on sm_90a", "[codegen]") {
    Graph g = Graph::gemm("dw", GemmSpec{DType::F16, Major::MN, Major::K});
    g.store(g.accumulator(), "D", DType::BF16);
    const KernelSource k = source_of(g, HopperConfig{}, "sm_90a");
    CHECK(contains(k.source, "// config: hopper bm=128 bn=128 bk=64 stages=6 pingpong cluster=1\n"));
    CHECK(contains(k.source, "#include \"coda/hopper_gemm.cuh\"\n"));
    CHECK(k.kernel_expression == "coda::hopper_gemm<coda::f16, false, true, 128, 128, 6, true, coda_gen::Epilogue>");
    CHECK(contains(k.source, "using Traits = coda::HopperGemmTraits<coda::f16, false, true, 128, 128, 6, true, 1, 1, "
                             "coda_gen::Epilogue>;"));
    // Without a config, sm_90a's GEMMs take the Hopper mainloop's default and other archs the portable one's.
    CHECK(source_of(g, std::nullopt, "sm_90a").kernel_expression == k.kernel_expression);
    CHECK(contains(source_of(g, std::nullopt, "sm_80").kernel_expression, "coda::portable_gemm<"));
}

TEST_CASE("a Hopper config with a cluster selects the entry point with 2-CTA clusters", "[codegen]") {
    const KernelSource k = source_of(test::out_proj_graph(), HopperConfig{128, 128, 6, Schedule::PingPong, 2}, "sm_90a");
    CHECK(contains(k.source, "// config: hopper bm=128 bn=128 bk=64 stages=6 pingpong cluster=2\n"));
    CHECK(k.kernel_expression ==
          "coda::hopper_gemm_pair<coda::bf16, true, true, 128, 128, 6, true, false, coda_gen::Epilogue>");
    CHECK(contains(k.source, "using Traits = coda::HopperGemmTraits<coda::bf16, true, true, 128, 128, 6, true, 2, 1, "
                             "coda_gen::Epilogue>;"));
    // Pairs along N share A: the same entry point, told so.
    const KernelSource n = source_of(test::out_proj_graph(), HopperConfig{256, 128, 4, Schedule::Cooperative, 1, 2},
                                     "sm_90a");
    CHECK(contains(n.source, "// config: hopper bm=256 bn=128 bk=64 stages=4 cooperative cluster=1 cluster_n=2\n"));
    CHECK(n.kernel_expression ==
          "coda::hopper_gemm_pair<coda::bf16, true, true, 256, 128, 4, false, true, coda_gen::Epilogue>");
    CHECK(contains(n.source, "using Traits = coda::HopperGemmTraits<coda::bf16, true, true, 256, 128, 4, false, 1, 2, "
                             "coda_gen::Epilogue>;"));
}

TEST_CASE("tile programs and finalizers take their fixed templates and no config", "[codegen]") {
    Graph tile = Graph::tile("copy");
    tile.store(tile.tile_input("x", DType::BF16), "y", DType::F32);
    const KernelSource t = source_of(tile, std::nullopt, "sm_90a");
    CHECK(t.kernel_expression == "coda::tile_program<coda_gen::Epilogue>");
    CHECK(contains(t.source, "#include \"coda/tile_program.cuh\"\n"));
    CHECK(contains(t.source, "using Traits = coda::TileProgramTraits<coda_gen::Epilogue>;"));
    CHECK(contains(t.source, "// config: tile bm=64 bn=128\n"));

    Graph fin = Graph::finalize("rstd");
    fin.store(fin.rsqrt(fin.partials("sumsq", ReduceOp::Sum)), "r", DType::F32);
    const KernelSource f = source_of(fin, std::nullopt, "sm_90a");
    CHECK(f.kernel_expression == "coda::finalize_program<coda_gen::Program>");
    CHECK(contains(f.source, "#include \"coda/finalize_program.cuh\"\n"));
    CHECK(contains(f.source, "using Traits = coda::FinalizeTraits<coda_gen::Program>;"));

    // A config given to either is a user error, not silently ignored.
    CHECK_THROWS_WITH(mainloop_for(tile, PortableConfig{}, "sm_90a"),
                      Catch::Contains("graph 'copy' is a tile graph") && Catch::Contains("takes no kernel config"));
    CHECK_THROWS_AS(mainloop_for(fin, HopperConfig{}, "sm_90a"), Error);
}

TEST_CASE("archs before sm_80 and malformed names are user errors", "[codegen]") {
    CHECK_THROWS_WITH(source_of(test::out_proj_graph(), PortableConfig{}, "sm_75"), Catch::Contains("sm_80 or newer"));
    CHECK_THROWS_WITH(source_of(test::out_proj_graph(), PortableConfig{}, "compute_90"),
                      Catch::Contains("not a GPU architecture"));
}

}  // namespace
}  // namespace coda
