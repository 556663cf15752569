// choose_config, the pure decision behind Runtime::default_config: the portable default off sm_90a, none for graphs
// without a GEMM, the Hopper default (ping-pong 128x128, or cooperative 128x128 for epilogues whose per-visit shared
// memory traffic is heavy against K) on sm_90a, and a tuned record only for the GPU, graph and shape class it was
// measured on.
#include <catch2/catch.hpp>

#include "coda/blocks.hpp"
#include "coda/runtime.hpp"
#include "driver/cuda_driver.hpp"
#include "ir/hash.hpp"
#include "mainloop/epilogue_cost.hpp"
#include "runtime/config_choice.hpp"

namespace {

using coda::KernelConfig;
using coda::ProblemShape;
using coda::Schedule;

const KernelConfig kDefault = coda::HopperConfig{128, 128, 6, Schedule::PingPong, 1};
const KernelConfig kPingPong = coda::HopperConfig{64, 256, 5, Schedule::PingPong, 1};  // a tuned record's
const KernelConfig kPortable = coda::PortableConfig{};
const KernelConfig kCooperative = coda::HopperConfig{128, 128, 6, Schedule::Cooperative, 1};

coda::Graph gemm_graph() {
    coda::Graph g = coda::Graph::gemm("config_choice_test");
    coda::Value acc = g.accumulator();
    g.store(acc, "D", coda::DType::BF16);
    return g;
}

coda::Graph tile_graph() {
    coda::Graph g = coda::Graph::tile("config_choice_tile");
    coda::Value x = g.tile_input("x", coda::DType::BF16);
    g.store(x, "y", coda::DType::BF16);
    return g;
}

}  // namespace

TEST_CASE("choose_config: portable off sm_90a, and nothing for graphs without a GEMM", "[tune]") {
    const coda::Graph g = gemm_graph();
    const coda::TargetDevice h200{"NVIDIA H200", 132};
    for (const char* arch : {"sm_80", "sm_86", "sm_89", "sm_90", "sm_100a"}) {
        INFO(arch);
        CHECK(coda::choose_config(g, arch, {4096, 4096, 4096}, {}, nullptr) == kPortable);
    }
    CHECK_FALSE(coda::choose_config(tile_graph(), "sm_90a", {4096, 4096, 0}, h200, nullptr).has_value());
    coda::TuningDb db;
    db.put({"NVIDIA H200", coda::graph_hash(g), coda::shape_class({4096, 4096, 4096}), kPingPong, 1.0});
    CHECK(coda::choose_config(g, "sm_80", {4096, 4096, 4096}, h200, &db) == kPortable);
}

TEST_CASE("choose_config on sm_90a: ping-pong 128x128 at every shape for fragment-moved tile tensors", "[tune]") {
    coda::Graph residual = coda::Graph::gemm("config_choice_residual");
    residual.store(residual.accumulator() + residual.tile_input("residual", coda::DType::BF16), "D", coda::DType::BF16);
    CHECK(KernelConfig(coda::HopperConfig{}) == kDefault);
    for (const ProblemShape& shape :
         {ProblemShape{}, ProblemShape{4096, 4096, 4096}, ProblemShape{16384, 4096, 14336}, ProblemShape{4096, 2048, 2048},
          ProblemShape{1024, 4096, 4096}, ProblemShape{1, 4096, 64}}) {
        INFO(shape.m << "x" << shape.n << "x" << shape.k);
        // (A plain GEMM at K >= 5120 has a rule of its own: the test below.)
        if (shape.k < 5120) CHECK(coda::choose_config(gemm_graph(), "sm_90a", shape, {}, nullptr) == kDefault);
        CHECK(coda::choose_config(residual, "sm_90a", shape, {"NVIDIA H100 PCIe", 114}, nullptr) == kDefault);
    }
    CHECK(coda::choose_config(coda::blocks::out_proj(), "sm_90a", {4096, 4096, 4096}, {}, nullptr) == kDefault);
}

TEST_CASE("choose_config uses a tuned record only for its GPU, graph and shape class", "[tune]") {
    coda::Graph g = gemm_graph();
    const ProblemShape shape{4096, 6144, 4096};
    coda::TuningDb db;
    db.put({"NVIDIA H200", coda::graph_hash(g), coda::shape_class(shape), kPingPong, 0.5});
    const coda::TargetDevice h200{"NVIDIA H200", 132};

    CHECK(coda::choose_config(g, "sm_90a", shape, h200, &db) == kPingPong);
    CHECK(coda::choose_config(g, "sm_90a", {4000, 5000, 3000}, h200, &db) == kPingPong);  // the same class
    CHECK(coda::choose_config(g, "sm_90a", shape, h200, nullptr) == kDefault);
    // No GPU (no name): a record is never used, whatever the file says.
    CHECK(coda::choose_config(g, "sm_90a", shape, {}, &db) == kDefault);
    CHECK(coda::choose_config(g, "sm_90a", shape, {"", 132}, &db) == kDefault);
    CHECK(coda::choose_config(g, "sm_90a", shape, {"NVIDIA H100 80GB HBM3", 132}, &db) == kDefault);
    CHECK(coda::choose_config(g, "sm_90a", {16384, 6144, 4096}, h200, &db) == kDefault);
    CHECK(coda::choose_config(g, "sm_90a", {}, h200, &db) == kDefault);
    coda::Graph other = coda::Graph::gemm("config_choice_other");
    coda::Value acc = other.accumulator();
    other.store(acc, "D", coda::DType::F16);
    CHECK(coda::choose_config(other, "sm_90a", shape, h200, &db) == kDefault);

    // The graph's hash is remembered per graph; a graph that grows is another graph.
    CHECK(coda::choose_config(g, "sm_90a", shape, h200, &db) == kPingPong);
    g.constant(2.0f, "two");
    CHECK(coda::choose_config(g, "sm_90a", shape, h200, &db) == kDefault);
}

TEST_CASE("Runtime::default_config: portable on sm_80, Hopper on sm_90a", "[tune]") {
    const coda::Graph g = gemm_graph();  // a graph no tuning database has a record for
    const coda::Runtime& rt = coda::Runtime::instance();
    CHECK(rt.default_config(g, "sm_80") == kPortable);
    CHECK(rt.default_config(g, "sm_80", {4096, 4096, 4096}) == kPortable);
    CHECK_FALSE(rt.default_config(tile_graph(), "sm_90a").has_value());
    CHECK(rt.default_config(g, "sm_90a") == kDefault);
    CHECK(rt.default_config(g, "sm_90a", {16384, 16384, 4096}) == kDefault);
    CHECK(rt.default_config(g, "sm_90a", {16384, 16384, 14336}) ==
          KernelConfig(coda::HopperConfig{256, 128, 4, Schedule::Cooperative, 1, 2}));  // a plain GEMM, long K
    CHECK(rt.default_config(g, "sm_90a", {128, 256, 64}) == kDefault);
}

TEST_CASE("epilogue_traffic counts tile tensors by how the Hopper epilogue moves them", "[tune]") {
    // out_proj: residual in, x1 and h out, all full-width bf16: fragments only.
    const coda::EpilogueTraffic out_proj = coda::epilogue_traffic(coda::blocks::out_proj());
    CHECK(out_proj.fragment_bytes == 6.0);
    CHECK(out_proj.per_visit_bytes == 0.0);
    // gate/up: z full-width (fragments), y half-width (a byte an accumulator element, per visit).
    const coda::EpilogueTraffic gate_up = coda::epilogue_traffic(coda::blocks::gate_up_swiglu());
    CHECK(gate_up.fragment_bytes == 2.0);
    CHECK(gate_up.per_visit_bytes == 1.0);
    // swiglu_backward (accumulator dy, N = F): z in and dz out double width (4 bytes each), y full width (2).
    const coda::EpilogueTraffic swiglu = coda::epilogue_traffic(coda::blocks::swiglu_backward());
    CHECK(swiglu.fragment_bytes == 2.0);
    CHECK(swiglu.per_visit_bytes == 8.0);
    // rmsnorm_backward: x in and o out (fragments); the f32 accumulate is read and written (8 per visit).
    const coda::EpilogueTraffic rms = coda::epilogue_traffic(coda::blocks::rmsnorm_backward());
    CHECK(rms.fragment_bytes == 4.0);
    CHECK(rms.per_visit_bytes == 8.0);
    // Tile programs and graphs that do not check: nothing.
    CHECK(coda::epilogue_traffic(tile_graph()).per_visit_bytes == 0.0);
}

TEST_CASE("choose_config on sm_90a: cooperative 128x128 only where per-visit epilogue traffic outweighs K", "[tune]") {
    using coda::blocks::rmsnorm_backward;
    using coda::blocks::swiglu_backward;
    // The measured cases behind the threshold (src/mainloop/hopper.cpp, default_config): ping-pong from 256 K a byte.
    CHECK(coda::choose_config(swiglu_backward(), "sm_90a", {16384, 8192, 2048}, {}, nullptr) == kDefault);
    CHECK(coda::choose_config(swiglu_backward(), "sm_90a", {16384, 14336, 4096}, {}, nullptr) == kDefault);
    CHECK(coda::choose_config(rmsnorm_backward(), "sm_90a", {16384, 2048, 16384}, {}, nullptr) == kDefault);
    CHECK(coda::choose_config(rmsnorm_backward(), "sm_90a", {16384, 4096, 28672}, {}, nullptr) == kDefault);
    CHECK(coda::choose_config(rmsnorm_backward(), "sm_90a", {16384, 2048, 6144}, {}, nullptr) == kDefault);
    CHECK(coda::choose_config(rmsnorm_backward(), "sm_90a", {16384, 2048, 4096}, {}, nullptr) == kDefault);
    CHECK(coda::choose_config(coda::blocks::gate_up_swiglu(), "sm_90a", {16384, 16384, 2048}, {}, nullptr) == kDefault);
    // Below it, unmeasured since the epilogues changed, the older data's cooperative stays.
    CHECK(coda::choose_config(swiglu_backward(), "sm_90a", {16384, 8192, 1024}, {}, nullptr) == kCooperative);
    CHECK(coda::choose_config(rmsnorm_backward(), "sm_90a", {16384, 2048, 1536}, {}, nullptr) == kCooperative);
    // A short K tips a light epilogue too; an unknown K counts as 4096.
    CHECK(coda::choose_config(coda::blocks::gate_up_swiglu(), "sm_90a", {16384, 16384, 128}, {}, nullptr) ==
          kCooperative);
    CHECK(coda::choose_config(coda::blocks::gate_up_swiglu(), "sm_90a", {16384, 16384, 256}, {}, nullptr) == kDefault);
    CHECK(coda::choose_config(swiglu_backward(), "sm_90a", {}, {}, nullptr) == kDefault);
    CHECK(coda::choose_config(coda::blocks::gate_up_swiglu(), "sm_90a", {}, {}, nullptr) == kDefault);
    // Without tile tensors there is nothing to weigh: ping-pong at any K.
    CHECK(coda::choose_config(gemm_graph(), "sm_90a", {16384, 4096, 64}, {}, nullptr) == kDefault);
}

TEST_CASE("choose_config on sm_90a: FP8 operands keep ping-pong 128x128 where not measured", "[tune]") {
    coda::Graph g = coda::Graph::gemm("fp8", coda::GemmSpec{coda::DType::E4M3, coda::Major::K, coda::Major::K});
    g.store(g.accumulator(), "D", coda::DType::BF16);
    CHECK(coda::choose_config(g, "sm_90a", {16384, 4096, 4096}, {}, nullptr) == kDefault);
    CHECK(coda::choose_config(g, "sm_90a", {16384, 4096, 64}, {}, nullptr) == kDefault);
    // A tile input (the 16-bit cooperative-below-256-K-per-byte rule): unmeasured with FP8 operands, ping-pong.
    CHECK(coda::choose_config(coda::blocks::out_proj_fp8(), "sm_90a", {16384, 4096, 14336}, {}, nullptr) == kDefault);
}

TEST_CASE("choose_config on sm_90a: a vocabulary-sized N keeps the rules of any other N", "[tune]") {
    // Cooperative 256x128 pairs along N were the default at N >= 98304 for a day; side by side they ran the CE-stats
    // LM head 6-36% slower than ping-pong (src/mainloop/hopper.cpp, default_config), so no N has a rule of its own.
    const coda::Graph g = gemm_graph();
    CHECK(coda::choose_config(g, "sm_90a", {8192, 128256, 4096}, {}, nullptr) == kDefault);
    CHECK(coda::choose_config(g, "sm_90a", {16384, 128256, 2048}, {}, nullptr) == kDefault);
    CHECK(coda::choose_config(g, "sm_90a", {8192, 65536, 4096}, {}, nullptr) == kDefault);
    CHECK(coda::choose_config(coda::blocks::lm_head_ce_stats(), "sm_90a", {8192, 128256, 4096}, {}, nullptr) ==
          kDefault);
    // An epilogue with per-visit traffic keeps the rule above.
    CHECK(coda::choose_config(coda::blocks::swiglu_backward(), "sm_90a", {16384, 131072, 2048}, {}, nullptr) ==
          kDefault);
    CHECK(coda::choose_config(coda::blocks::swiglu_backward(), "sm_90a", {16384, 131072, 1024}, {}, nullptr) ==
          kCooperative);
}

TEST_CASE("choose_config on sm_90a: a plain GEMM at K >= 5120 takes cooperative 256x128 pairs where measured",
          "[tune]") {
    const KernelConfig pairs = coda::HopperConfig{256, 128, 4, Schedule::Cooperative, 1, 2};
    const coda::Graph plain = gemm_graph();
    REQUIRE(coda::stores_accumulator_only(plain));
    for (const ProblemShape& shape : {ProblemShape{4096, 4096, 14336}, ProblemShape{8192, 4096, 11008},
                                      ProblemShape{16384, 8192, 8192}, ProblemShape{4096, 2048, 65536},
                                      ProblemShape{8192, 2048, 5632}, ProblemShape{4096, 4096, 5120}}) {
        INFO(shape.m << "x" << shape.n << "x" << shape.k);
        CHECK(coda::choose_config(plain, "sm_90a", shape, {}, nullptr) == pairs);
    }
    // Below K = 5120, with K unknown (a typical 4096 is assumed), or on a grid narrower than measured: ping-pong.
    CHECK(coda::choose_config(plain, "sm_90a", {8192, 4096, 5119}, {}, nullptr) == kDefault);
    CHECK(coda::choose_config(plain, "sm_90a", {16384, 4096, 4096}, {}, nullptr) == kDefault);
    CHECK(coda::choose_config(plain, "sm_90a", {}, {}, nullptr) == kDefault);
    CHECK(coda::choose_config(plain, "sm_90a", {4095, 4096, 14336}, {}, nullptr) == kDefault);
    CHECK(coda::choose_config(plain, "sm_90a", {8192, 2047, 14336}, {}, nullptr) == kDefault);
    CHECK(coda::choose_config(plain, "sm_90a", {8192, 128, 14336}, {}, nullptr) == kDefault);
    // Measured: A and B both K-major (above) or both M/N-major (a weight gradient); not the mixed layouts.
    coda::Graph wgrad = coda::Graph::gemm("config_choice_wgrad", {coda::DType::BF16, coda::Major::MN, coda::Major::MN});
    wgrad.store(wgrad.accumulator(), "D", coda::DType::BF16);
    CHECK(coda::choose_config(wgrad, "sm_90a", {12288, 4096, 16384}, {}, nullptr) == pairs);
    coda::Graph mixed = coda::Graph::gemm("config_choice_mixed", {coda::DType::BF16, coda::Major::MN, coda::Major::K});
    mixed.store(mixed.accumulator(), "D", coda::DType::BF16);
    REQUIRE(coda::stores_accumulator_only(mixed));
    CHECK(coda::choose_config(mixed, "sm_90a", {4096, 4096, 14336}, {}, nullptr) == kDefault);
    // An epilogue with any work of its own keeps ping-pong: a cooperative tile's consumers stop for it together.
    coda::Graph scaled = coda::Graph::gemm("config_choice_scaled");
    scaled.store(scaled.accumulator() * scaled.scalar("alpha"), "D", coda::DType::BF16);
    CHECK_FALSE(coda::stores_accumulator_only(scaled));
    CHECK(coda::choose_config(scaled, "sm_90a", {4096, 4096, 14336}, {}, nullptr) == kDefault);
    CHECK(coda::choose_config(coda::blocks::out_proj(), "sm_90a", {16384, 4096, 14336}, {}, nullptr) == kDefault);
    CHECK(coda::choose_config(coda::blocks::lm_head_ce_stats(), "sm_90a", {8192, 128256, 8192}, {}, nullptr) ==
          kDefault);
    CHECK_FALSE(coda::stores_accumulator_only(tile_graph()));
    // Only 16-bit stores were measured: an f32 one is moved by a shared-memory access per visit.
    coda::Graph f32_store = coda::Graph::gemm("config_choice_f32_store");
    f32_store.store(f32_store.accumulator(), "D", coda::DType::F32);
    REQUIRE(coda::stores_accumulator_only(f32_store));
    CHECK(coda::choose_config(f32_store, "sm_90a", {4096, 4096, 14336}, {}, nullptr) == kDefault);
}

TEST_CASE("choose_config on sm_90a: a 16-bit weight gradient added into an f32 buffer takes the pairs", "[tune]") {
    const KernelConfig pairs = coda::HopperConfig{256, 128, 4, Schedule::Cooperative, 1, 2};
    coda::Graph wgrad =
        coda::Graph::gemm("config_choice_wgrad_sum", {coda::DType::BF16, coda::Major::MN, coda::Major::MN});
    wgrad.accumulate(wgrad.accumulator(), "D", coda::DType::F32);
    REQUIRE(coda::accumulates_accumulator_only(wgrad));
    CHECK_FALSE(coda::stores_accumulator_only(wgrad));
    // The four weight gradients of the d = 4096 layer (measured), and the region of the plain GEMM's rule.
    for (const ProblemShape& shape : {ProblemShape{12288, 4096, 16384}, ProblemShape{4096, 4096, 16384},
                                      ProblemShape{28672, 4096, 16384}, ProblemShape{4096, 14336, 16384},
                                      ProblemShape{4096, 2048, 5120}}) {
        INFO(shape.m << "x" << shape.n << "x" << shape.k);
        CHECK(coda::choose_config(wgrad, "sm_90a", shape, {}, nullptr) == pairs);
    }
    CHECK(coda::choose_config(wgrad, "sm_90a", {4096, 4096, 4096}, {}, nullptr) == kDefault);
    CHECK(coda::choose_config(wgrad, "sm_90a", {2048, 4096, 16384}, {}, nullptr) == kDefault);
    // Measured in the plain GEMM's layouts only: both operands M/N-major (or both K-major), not mixed.
    coda::Graph mixed =
        coda::Graph::gemm("config_choice_wgrad_mixed", {coda::DType::BF16, coda::Major::MN, coda::Major::K});
    mixed.accumulate(mixed.accumulator(), "D", coda::DType::F32);
    CHECK(coda::choose_config(mixed, "sm_90a", {12288, 4096, 16384}, {}, nullptr) == kDefault);
    // Anything beside the sum (a scale) keeps the rules above; so does a store.
    coda::Graph scaled =
        coda::Graph::gemm("config_choice_wgrad_scaled", {coda::DType::BF16, coda::Major::MN, coda::Major::MN});
    scaled.accumulate(scaled.accumulator() * scaled.scalar("alpha"), "D", coda::DType::F32);
    CHECK_FALSE(coda::accumulates_accumulator_only(scaled));
    CHECK(coda::choose_config(scaled, "sm_90a", {12288, 4096, 16384}, {}, nullptr) == kDefault);
    CHECK_FALSE(coda::accumulates_accumulator_only(gemm_graph()));
}

TEST_CASE("choose_config on sm_90a: a per-tensor FP8 GEMM takes the pairs at long K and on the largest grids",
          "[tune]") {
    const KernelConfig pairs = coda::HopperConfig{256, 128, 4, Schedule::Cooperative, 1, 2};
    const coda::GemmSpec fp8{coda::DType::E4M3, coda::Major::K, coda::Major::K};
    coda::Graph scaled = coda::Graph::gemm("config_choice_fp8_scaled", fp8);
    const coda::Value scale = scaled.scalar("scale_a") * scaled.scalar("scale_b");
    scaled.store(scaled.accumulator() * scale, "D", coda::DType::BF16);
    REQUIRE(coda::stores_scaled_accumulator_only(scaled));
    coda::Graph plain = coda::Graph::gemm("config_choice_fp8_plain", fp8);
    plain.store(plain.accumulator(), "D", coda::DType::BF16);
    REQUIRE(coda::stores_scaled_accumulator_only(plain));
    for (const coda::Graph* g : {&scaled, &plain})
        for (const ProblemShape& shape : {ProblemShape{16384, 4096, 14336}, ProblemShape{16384, 8192, 8192},
                                          ProblemShape{8192, 4096, 11008}, ProblemShape{16384, 14336, 4096},
                                          ProblemShape{8192, 128256, 4096}, ProblemShape{16384, 8192, 4096}}) {
            INFO(g->name() << " " << shape.m << "x" << shape.n << "x" << shape.k);
            CHECK(coda::choose_config(*g, "sm_90a", shape, {}, nullptr) == pairs);
        }
    // Measured slower on the pairs, or not measured: ping-pong.
    for (const ProblemShape& shape : {ProblemShape{4096, 4096, 4096}, ProblemShape{16384, 6144, 4096},
                                      ProblemShape{8192, 11008, 4096}, ProblemShape{16384, 8192, 2048},
                                      ProblemShape{4095, 4096, 14336}, ProblemShape{1 << 20, 128, 4096},
                                      ProblemShape{}}) {
        INFO(shape.m << "x" << shape.n << "x" << shape.k);
        CHECK(coda::choose_config(scaled, "sm_90a", shape, {}, nullptr) == kDefault);
    }
    // Anything beyond scalar products keeps ping-pong: a row-wise scale, an offset, a scale that is not a scalar.
    coda::Graph rowwise = coda::Graph::gemm("config_choice_fp8_rowwise", fp8);
    rowwise.store(rowwise.accumulator() * rowwise.row_input("scale_a", coda::DType::F32), "D", coda::DType::BF16);
    coda::Graph offset = coda::Graph::gemm("config_choice_fp8_offset", fp8);
    offset.store(offset.accumulator() * offset.scalar("s") + offset.scalar("b"), "D", coda::DType::BF16);
    coda::Graph squared = coda::Graph::gemm("config_choice_fp8_squared", fp8);
    const coda::Value acc = squared.accumulator();
    squared.store(acc * acc, "D", coda::DType::BF16);
    for (const coda::Graph* g : {&rowwise, &offset, &squared}) {
        INFO(g->name());
        CHECK_FALSE(coda::stores_scaled_accumulator_only(*g));
        CHECK(coda::choose_config(*g, "sm_90a", {16384, 4096, 14336}, {}, nullptr) == kDefault);
    }
    CHECK_FALSE(coda::stores_scaled_accumulator_only(tile_graph()));
}
