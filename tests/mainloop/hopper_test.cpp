// The Hopper mainloop's host side without a GPU: its tile rules (the ones hopper_gemm.cuh asserts) checked before
// NVRTC sees a config, with messages that quote the limits; its candidates; its fallback for unsupported operands.
#include <catch2/catch.hpp>

#include "codegen/codegen_test_graphs.hpp"
#include "coda/blocks.hpp"
#include "coda/error.hpp"
#include "coda/hopper_rules.cuh"
#include "ir/check_graph.hpp"
#include "mainloop/hopper.hpp"
#include "mainloop/hopper_tma.hpp"
#include "mainloop/mainloops.hpp"
#include "mainloop/portable.hpp"
#include "runtime/launch_plan.hpp"
#include "support/fp8_graphs.hpp"

namespace coda {
namespace {

HopperConfig hopper(int bm, int bn, int stages, Schedule schedule, int cluster_m = 1, int cluster_n = 1) {
    return HopperConfig{bm, bn, stages, schedule, cluster_m, cluster_n};
}

TEST_CASE("Hopper configs are checked against hopper_rules before NVRTC sees them", "[mainloop]") {
    const Graph g = test::out_proj_graph();
    const Mainloop& m = hopper_mainloop();
    const auto rejects = [&](const HopperConfig& cfg, const std::string& arch, const std::string& why) {
        INFO(KernelConfig(cfg).to_text() << " on " << arch);
        CHECK_THROWS_WITH(m.validate(g, KernelConfig(cfg), arch),
                          Catch::Contains("graph 'out_proj'") && Catch::Contains("not valid for the Hopper mainloop") &&
                              Catch::Contains(why) && Catch::Contains("its default is '" +
                                                                      KernelConfig(HopperConfig{}).to_text() + "'"));
    };
    const HopperConfig good = hopper(128, 256, 4, Schedule::Cooperative);
    rejects(good, "sm_80", "needs sm_90a");
    rejects(good, "sm_90", "needs sm_90a");
    rejects(hopper(128, 192, 4, Schedule::Cooperative), "sm_90a", "bn must be 128 or 256");
    rejects(hopper(320, 128, 4, Schedule::Cooperative), "sm_90a", "bm must be a multiple of 64 from 64 to 256");
    rejects(hopper(64, 256, 4, Schedule::Cooperative), "sm_90a", "64 or 128 rows");
    rejects(hopper(256, 256, 4, Schedule::Cooperative), "sm_90a", "must not exceed 16384 elements");
    rejects(hopper(128, 256, 4, Schedule::PingPong), "sm_90a", "must not exceed 16384 elements");
    rejects(hopper(128, 256, 1, Schedule::Cooperative), "sm_90a", "stages must be between 2 and 16");
    rejects(hopper(128, 256, 17, Schedule::Cooperative), "sm_90a", "stages must be between 2 and 16");
    rejects(hopper(128, 256, 4, Schedule::Cooperative, 3), "sm_90a", "a cluster holds at most 2 CTAs");
    rejects(hopper(128, 256, 4, Schedule::Cooperative, 0), "sm_90a", "a cluster holds at most 2 CTAs");
    rejects(hopper(128, 256, 4, Schedule::Cooperative, 1, 0), "sm_90a", "a cluster holds at most 2 CTAs");
    rejects(hopper(128, 256, 4, Schedule::Cooperative, 2, 2), "sm_90a", "a cluster holds at most 2 CTAs");
    CHECK_NOTHROW(m.validate(g, KernelConfig(hopper(256, 128, 4, Schedule::Cooperative, 1, 2)), "sm_90a"));
    // An M-major A tile of one 64-row box cannot be split between two CTAs along N.
    Graph m_major = Graph::gemm("m_major_a", GemmSpec{DType::BF16, Major::MN, Major::K});
    m_major.store(m_major.accumulator("acc"), "d", DType::BF16);
    CHECK_THROWS_WITH(m.validate(m_major, KernelConfig(hopper(64, 256, 4, Schedule::PingPong, 1, 2)), "sm_90a"),
                      Catch::Contains("an equal share of the operand they share"));
    CHECK_NOTHROW(m.validate(m_major, KernelConfig(hopper(128, 128, 4, Schedule::PingPong, 1, 2)), "sm_90a"));
    CHECK_NOTHROW(m.validate(g, KernelConfig(good), "sm_90a"));
    for (const NamedConfig& named : m.candidates()) {
        INFO(named.name);
        CHECK_NOTHROW(m.validate(g, named.config, "sm_90a"));
    }
}

TEST_CASE("hopper_rules is the one statement of the tile rules", "[mainloop]") {
    using hopper_rules::Rule;
    const auto check = [](int bm, int bn, int stages, bool pingpong, int cluster_m, int cluster_n = 1,
                          bool a_k_major = true, bool b_k_major = true) {
        return hopper_rules::check(bm, bn, stages, pingpong, cluster_m, cluster_n, a_k_major, b_k_major);
    };
    CHECK(check(128, 128, 6, true, 1) == Rule::Ok);
    CHECK(check(128, 256, 4, false, 2) == Rule::Ok);
    CHECK(check(256, 128, 4, false, 1, 2) == Rule::Ok);
    CHECK(check(128, 64, 4, false, 1) == Rule::BN);
    CHECK(check(96, 128, 4, false, 1) == Rule::BM);
    CHECK(check(256, 128, 4, true, 1) == Rule::ConsumerRows);
    CHECK(check(256, 256, 4, false, 1) == Rule::Accumulators);
    CHECK(check(128, 128, 1, true, 1) == Rule::Stages);
    CHECK(check(128, 128, 4, true, 4) == Rule::Cluster);
    CHECK(check(128, 128, 4, true, 2, 2) == Rule::Cluster);
    CHECK(check(64, 128, 4, true, 1, 2, false) == Rule::ClusterSplit);  // one 64-row box of M-major A
    CHECK(check(64, 128, 4, true, 1, 2, true) == Rule::Ok);             // K-major: two boxes of 32 rows
    // The default config is valid, and so is every candidate.
    const HopperConfig d;
    CHECK(check(d.bm, d.bn, d.stages, d.schedule == Schedule::PingPong, d.cluster_m, d.cluster_n) == Rule::Ok);
}

TEST_CASE("the Hopper mainloop is sm_90a's default and falls back to a portable config with its tile", "[mainloop]") {
    CHECK(&default_gemm_mainloop("sm_90a") == &hopper_mainloop());
    CHECK(&default_gemm_mainloop("sm_90") == &portable_mainloop());
    CHECK(&default_gemm_mainloop("sm_80") == &portable_mainloop());
    CHECK(hopper_mainloop().default_config(test::out_proj_graph(), {}) == HopperConfig{});
    const Graph g = test::out_proj_graph();
    for (const NamedConfig& named : hopper_mainloop().candidates()) {
        INFO(named.name);
        const std::optional<KernelConfig> fallback = hopper_mainloop().fallback_config(named.config);
        REQUIRE(fallback);
        REQUIRE(fallback->portable() != nullptr);
        // The same tile, so that partials tensors sized for the Hopper kernel fit the fallback's.
        CHECK(fallback->portable()->bm == named.config.hopper()->bm);
        CHECK(fallback->portable()->bn == named.config.hopper()->bn);
        CHECK_NOTHROW(portable_mainloop().validate(g, fallback, "sm_90a"));
    }
    CHECK_FALSE(portable_mainloop().fallback_config(PortableConfig{}));
}

// out_proj's arguments at M x N x K (N even), every tensor 16-byte aligned unless a test moves one.
Args out_proj_args(std::int64_t m, std::int64_t n, std::int64_t k) {
    const auto at = [](std::uintptr_t address) { return reinterpret_cast<const void*>(address); };
    Args a;
    a.bind("A", matrix(at(0x100000), DType::BF16, m, k));
    a.bind("B", matrix_col_major(at(0x200000), DType::BF16, k, n));
    a.bind("residual", matrix(at(0x300000), DType::BF16, m, n));
    a.bind("gamma", vector(at(0x400000), DType::BF16, n));
    a.bind("x1", matrix(at(0x500000), DType::BF16, m, n));
    a.bind("h", matrix(at(0x600000), DType::BF16, m, n));
    a.bind("x1_sumsq", matrix(at(0x700000), DType::F32, (n + 127) / 128, m));
    return a;
}

TEST_CASE("a staging kernel's launch with unstageable tile tensors goes to its direct variant, bad operands to the "
          "portable mainloop", "[mainloop]") {
    const CheckedGraph g = check_graph(blocks::out_proj());
    const auto plan = [&](const Args& args) { return plan_launch(g, TileShape{128, 128}, args, "out_proj"); };
    const Mainloop& m = hopper_mainloop();
    const HopperConfig staged;
    HopperConfig direct;
    direct.direct = true;

    const LaunchPlan aligned = plan(out_proj_args(300, 512, 256));
    CHECK(tile_tensors_stageable(g, aligned));
    // A tile input's row pitch off the 16-byte grid; a store's base; a stored row ending inside a 16-byte unit
    // (N = 508: 1016 bytes); each alone makes the launch unstageable.
    Args pitch = out_proj_args(300, 512, 256);
    pitch.bind("residual", matrix(reinterpret_cast<const void*>(0x300000), DType::BF16, 300, 512, 516));
    Args base = out_proj_args(300, 512, 256);
    base.bind("h", matrix(reinterpret_cast<const void*>(0x600004), DType::BF16, 300, 512));
    Args row_end = out_proj_args(300, 508, 256);
    for (const Args& args : {pitch, base, row_end}) {
        const LaunchPlan p = plan(args);
        CHECK_FALSE(tile_tensors_stageable(g, p));
        const std::optional<KernelConfig> fallback = m.fallback_config(staged, p);
        REQUIRE(fallback);
        CHECK(*fallback == direct);  // the same config, without staging
        CHECK(fallback->to_text() == "hopper bm=128 bn=128 bk=64 stages=6 pingpong cluster=1 direct");
        // The direct variant reads tile tensors where they are; what it cannot run goes to the portable mainloop.
        CHECK(m.fallback_config(direct, p)->portable() != nullptr);
    }
    // Operands TMA cannot read: the portable mainloop, whatever the tile tensors.
    Args operand = out_proj_args(300, 512, 256);
    operand.bind("A", matrix(reinterpret_cast<const void*>(0x100000), DType::BF16, 300, 256, 258));
    const LaunchPlan bad_a = plan(operand);
    CHECK(tile_tensors_stageable(g, bad_a));
    CHECK(m.fallback_config(staged, bad_a)->portable() != nullptr);
    // The direct variant's template arguments say so; the staging kernel's say the other.
    CHECK_THAT(m.instantiate(blocks::out_proj(), KernelConfig(direct)).kernel,
               Catch::EndsWith("coda_gen::Epilogue, true>"));
    CHECK_THAT(m.instantiate(blocks::out_proj(), KernelConfig(staged)).kernel,
               Catch::EndsWith("coda_gen::Epilogue>"));
}

TEST_CASE("FP8 operands: 16-byte rows are 16 elements, and nothing else takes what TMA cannot read", "[mainloop]") {
    const GemmSpec spec{DType::E4M3, Major::K, Major::K};
    const CheckedGraph g = check_graph(blocks::out_proj(spec));
    const Mainloop& m = hopper_mainloop();
    const auto plan = [&](std::int64_t lda) {
        Args args = out_proj_args(300, 512, 256);
        args.bind("A", matrix(reinterpret_cast<const void*>(0x100000), DType::E4M3, 300, 256, lda));
        args.bind("B", matrix_col_major(reinterpret_cast<const void*>(0x200000), DType::E4M3, 256, 512));
        return plan_launch(g, TileShape{128, 128}, args, "out_proj");
    };
    const LaunchPlan tight = plan(256);
    CHECK(tight.operand_bytes == 1);
    HopperConfig direct;
    direct.direct = true;
    const std::optional<KernelConfig> variant = m.fallback_config(HopperConfig{}, tight);
    REQUIRE(variant);
    CHECK(*variant == direct);  // a staging kernel's own direct variant still takes FP8
    // lda = 264 bytes: a bf16 operand's 528 would be aligned; this one is not, and the portable mainloop
    // multiplies no FP8.
    const LaunchPlan off = plan(264);
    CHECK_FALSE(m.fallback_config(HopperConfig{}, off));
    CHECK(plan(272).operand_bytes == 1);
    CHECK_THAT(m.instantiate(blocks::out_proj(spec), KernelConfig(HopperConfig{})).kernel,
               Catch::StartsWith("coda::hopper_gemm<coda::e4m3, true, true, 128, 128"));
}

TEST_CASE("FP8 operands of two types instantiate the mainloop on a tag that names both", "[mainloop]") {
    const Mainloop& m = hopper_mainloop();
    const KernelTemplate k =
        m.instantiate(blocks::out_proj(GemmSpec{DType::E5M2, Major::K, Major::K, DType::E4M3}), HopperConfig{});
    CHECK_THAT(k.kernel, Catch::StartsWith("coda::hopper_gemm<coda::fp8_operands<coda::e5m2, coda::e4m3>, true, true"));
    CHECK_THAT(k.traits, Catch::StartsWith("coda::HopperGemmTraits<coda::fp8_operands<coda::e5m2, coda::e4m3>, "));
    // B's type spelled out as A's is the same kernel as before.
    CHECK_THAT(m.instantiate(blocks::out_proj(GemmSpec{DType::E4M3, Major::K, Major::K, DType::E4M3}), HopperConfig{})
                   .kernel,
               Catch::StartsWith("coda::hopper_gemm<coda::e4m3, true, true"));
}

TEST_CASE("promoted FP8 accumulation runs the block-scaled loop on a tag of its own, on the tiles that loop takes: "
          "by default and among the candidates",
          "[mainloop]") {
    const Mainloop& m = hopper_mainloop();
    const GemmSpec wgrad_spec{DType::E5M2, Major::K, Major::K, DType::E4M3, ScaleMode::Off, Accumulation::Promoted};
    const Graph tensorwise = test::tensorwise_graph(DType::E4M3, Accumulation::Promoted);
    const Graph wgrad = blocks::wgrad_fp8_accumulate(wgrad_spec);
    const HopperConfig wide{128, 256, 4, Schedule::Cooperative, 1};
    CHECK_THAT(m.instantiate(tensorwise, wide).kernel,
               Catch::StartsWith("coda::hopper_gemm<coda::promoted<coda::e4m3>, true, true, 128, 256, 4, false"));
    CHECK_THAT(m.instantiate(wgrad, wide).traits,
               Catch::StartsWith("coda::HopperGemmTraits<coda::promoted<coda::fp8_operands<coda::e5m2, "
                                 "coda::e4m3>>, "));
    // Fast accumulation and block scales instantiate what they always did.
    CHECK_THAT(m.instantiate(test::tensorwise_graph(DType::E4M3, Accumulation::Fast), wide).kernel,
               Catch::StartsWith("coda::hopper_gemm<coda::e4m3, true, true"));
    CHECK_THAT(m.instantiate(test::block_scaled_graph(DType::E4M3), wide).kernel,
               Catch::StartsWith("coda::hopper_gemm<coda::block_scaled<coda::e4m3>, true, true"));

    // The defaults: cooperative 128 x 256 (the block-scaled GEMMs'), 128 x 128 beside a column reduction; at a weight
    // gradient's shape (K = tokens), where a fast FP8 GEMM takes pairs of 256 x 128 tiles, and without a shape.
    GemmSpec promoted_e4m3{DType::E4M3, Major::K, Major::K};
    promoted_e4m3.accumulation = Accumulation::Promoted;
    Graph dgamma = Graph::gemm("promoted_dgamma", promoted_e4m3);
    dgamma.reduce_col(dgamma.accumulator(), ReduceOp::Sum, "col_sums");
    for (const ProblemShape& shape : {ProblemShape{}, ProblemShape{4096, 14336, 16384}}) {
        INFO(shape.m << " x " << shape.n << " x " << shape.k);
        CHECK(m.default_config(tensorwise, shape) == KernelConfig(wide));
        CHECK(m.default_config(wgrad, shape) == KernelConfig(wide));
        CHECK(m.default_config(dgamma, shape) == KernelConfig(HopperConfig{128, 128, 6, Schedule::Cooperative, 1}));
    }
    CHECK(m.default_config(test::tensorwise_graph(DType::E4M3, Accumulation::Fast), ProblemShape{}) ==
          KernelConfig(HopperConfig{}));

    // coda tune's candidates for it: the cooperative 128-row tiles; validate says why the others cannot run it.
    std::vector<std::string> legal;
    for (const NamedConfig& named : m.candidates_for(wgrad, "sm_90a")) legal.push_back(named.name);
    CHECK(legal == std::vector<std::string>{"h128x256", "h128x128", "h128x256c2"});
    CHECK(m.candidates_for(test::tensorwise_graph(DType::E4M3, Accumulation::Fast), "sm_90a").size() ==
          m.candidates().size());
    CHECK(m.candidates_for(wgrad, "sm_80").empty());
    for (const NamedConfig& named : m.candidates()) {
        const HopperConfig& h = *named.config.hopper();
        INFO(named.name);
        if (h.schedule == Schedule::Cooperative && h.bm == 128)
            CHECK_NOTHROW(m.validate(wgrad, named.config, "sm_90a"));
        else
            CHECK_THROWS_WITH(m.validate(wgrad, named.config, "sm_90a"),
                              Catch::Contains("graph 'wgrad_fp8_accumulate'") &&
                                  Catch::Contains("promoted FP8 accumulation (acc=promoted) takes cooperative 128 x "
                                                  "128 or 128 x 256 tiles"));
    }
    // The portable mainloop multiplies no FP8, promoted or not.
    CHECK(&mainloop_for(tensorwise, std::nullopt, "sm_89") == &portable_mainloop());
    CHECK_THROWS_WITH(portable_mainloop().validate(tensorwise, KernelConfig(PortableConfig{}), "sm_89"),
                      Catch::Contains("e4m3 operands need the Hopper mainloop"));
}

TEST_CASE("a Hopper config's bare words are its schedules and direct: any other is refused", "[mainloop]") {
    CHECK(KernelConfig::parse("hopper direct cooperative") ==
          KernelConfig(HopperConfig{128, 128, 6, Schedule::Cooperative, 1, 1, true}));
    CHECK_THROWS_WITH(KernelConfig::parse("hopper cooperative turbo"),
                      Catch::Contains("'turbo' is not a field=value pair") && Catch::Contains("expected e.g."));
}

}  // namespace
}  // namespace coda
