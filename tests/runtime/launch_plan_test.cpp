// Launch-argument checks run on the host, so each error message is tested here without a GPU.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "coda/blocks.hpp"
#include "coda/error.hpp"
#include "ir/check_graph.hpp"
#include "runtime/launch_plan.hpp"

using namespace coda;

namespace {

const void* fake(std::uintptr_t address) { return reinterpret_cast<const void*>(address); }

constexpr std::int64_t M = 300, N = 512, K = 256;
const TileShape kTile{128, 128};

// A complete, valid argument set for blocks::out_proj at M x N x K.
Args out_proj_args() {
    Args a;
    a.bind("A", matrix(fake(0x100000), DType::BF16, M, K));
    a.bind("B", matrix_col_major(fake(0x200000), DType::BF16, K, N));
    a.bind("residual", matrix(fake(0x300000), DType::BF16, M, N));
    a.bind("gamma", vector(fake(0x400000), DType::BF16, N));
    a.bind("x1", matrix(fake(0x500000), DType::BF16, M, N));
    a.bind("h", matrix(fake(0x600000), DType::BF16, M, N));
    a.bind("x1_sumsq", matrix(fake(0x700000), DType::F32, (N + 127) / 128, M));
    return a;
}

std::string error_of(const Args& args, const CheckedGraph& g) {
    try {
        plan_launch(g, kTile, args, "out_proj");
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

// D = alpha * A B, and its bindings with alpha = 2.
Graph scaled_gemm() {
    Graph g = Graph::gemm("scaled");
    g.store(g.mul(g.accumulator(), g.scalar("alpha")), "D", DType::BF16);
    return g;
}

Args scaled_gemm_args() {
    Args args;
    args.bind("A", matrix(fake(0x100000), DType::BF16, M, K));
    args.bind("B", matrix_col_major(fake(0x200000), DType::BF16, K, N));
    args.bind("D", matrix(fake(0x300000), DType::BF16, M, N)).bind("alpha", 2.0f);
    return args;
}

}  // namespace

TEST_CASE("a valid launch fills the problem, the slots and the extents", "[runtime]") {
    const CheckedGraph g = check_graph(blocks::out_proj());
    const LaunchPlan plan = plan_launch(g, kTile, out_proj_args(), "out_proj");
    CHECK(plan.gemm.m == M);
    CHECK(plan.gemm.n == N);
    CHECK(plan.gemm.k == K);
    CHECK(plan.gemm.lda == K);
    CHECK(plan.gemm.ldb == K);
    CHECK(plan.gemm.flags == (kGemmVectorA | kGemmVectorB));
    CHECK(plan.m == M);
    CHECK(plan.n == N);
    // residual (ptr, ld), gamma, x1 (ptr, ld), h (ptr, ld), x1_sumsq
    REQUIRE(plan.slots.size() == 8);
    CHECK(plan.slots[0] == 0x300000);
    CHECK(plan.slots[1] == N);
    CHECK(plan.slots[2] == 0x400000);
    CHECK(plan.slots[7] == 0x700000);
}

TEST_CASE("FP8 operands are planned as bytes, and must be the spec's dtype", "[runtime]") {
    const CheckedGraph g = check_graph(blocks::out_proj(GemmSpec{DType::E5M2, Major::K, Major::K}));
    Args a = out_proj_args();
    a.bind("A", matrix(fake(0x100000), DType::E5M2, M, K));
    a.bind("B", matrix_col_major(fake(0x200000), DType::E5M2, K, N));
    const LaunchPlan plan = plan_launch(g, kTile, a, "out_proj");
    CHECK(plan.operand_bytes == 1);
    CHECK(plan.gemm.lda == K);
    CHECK(plan_launch(check_graph(blocks::out_proj()), kTile, out_proj_args(), "out_proj").operand_bytes == 2);
    a.bind("B", matrix_col_major(fake(0x200000), DType::E4M3, K, N));
    CHECK_THAT(error_of(a, g), Catch::Contains("B") && Catch::Contains("e5m2") && Catch::Contains("e4m3"));
}

TEST_CASE("FP8 operands of two types: each must be its own one", "[runtime]") {
    const CheckedGraph g = check_graph(blocks::out_proj(GemmSpec{DType::E5M2, Major::K, Major::K, DType::E4M3}));
    Args a = out_proj_args();
    a.bind("A", matrix(fake(0x100000), DType::E5M2, M, K));
    a.bind("B", matrix_col_major(fake(0x200000), DType::E4M3, K, N));
    CHECK(plan_launch(g, kTile, a, "out_proj").operand_bytes == 1);
    a.bind("B", matrix_col_major(fake(0x200000), DType::E5M2, K, N));
    CHECK_THAT(error_of(a, g), Catch::Contains("'B'") && Catch::Contains("expected dtype e4m3"));
    a.bind("A", matrix(fake(0x100000), DType::E4M3, M, K));
    a.bind("B", matrix_col_major(fake(0x200000), DType::E4M3, K, N));
    CHECK_THAT(error_of(a, g), Catch::Contains("'A'") && Catch::Contains("expected dtype e5m2"));
}

TEST_CASE("an unaligned leading dimension turns off 16-byte operand loads but still launches", "[runtime]") {
    const CheckedGraph g = check_graph(blocks::out_proj());
    Args a = out_proj_args();
    a.bind("A", matrix(fake(0x100000), DType::BF16, M, K, K + 2));
    const LaunchPlan plan = plan_launch(g, kTile, a, "out_proj");
    CHECK(plan.gemm.lda == K + 2);
    CHECK(plan.gemm.flags == kGemmVectorB);
}

TEST_CASE("launch errors name the argument, the expectation and what was given", "[runtime]") {
    const CheckedGraph g = check_graph(blocks::out_proj());
    struct Case {
        const char* what;
        std::function<void(Args&)> mutate;
        std::vector<std::string> expected;
    };
    const std::vector<Case> cases = {
        {"missing binding", [](Args& a) { a = Args(); a.bind("A", matrix(fake(0x100000), DType::BF16, M, K));
                                           a.bind("B", matrix_col_major(fake(0x200000), DType::BF16, K, N)); },
         {"'residual'", "is not bound"}},
        {"unknown name", [](Args& a) { a.bind("resid", matrix(fake(0x300000), DType::BF16, M, N)); },
         {"'resid'", "no such binding", "residual"}},
        {"wrong dtype", [](Args& a) { a.bind("residual", matrix(fake(0x300000), DType::F16, M, N)); },
         {"'residual'", "expected dtype bf16", "f16"}},
        {"wrong shape", [](Args& a) { a.bind("residual", matrix(fake(0x300000), DType::BF16, M, N - 2)); },
         {"'residual'", "expected shape [300 x 512]", "[300 x 510]"}},
        {"misaligned tile", [](Args& a) { a.bind("x1", matrix(fake(0x500002), DType::BF16, M, N)); },
         {"'x1'", "not aligned to 4 bytes"}},
        {"column-major tile", [](Args& a) { a.bind("h", matrix_col_major(fake(0x600000), DType::BF16, M, N)); },
         {"'h'", "row-major"}},
        {"odd row stride", [](Args& a) { a.bind("h", matrix(fake(0x600000), DType::BF16, M, N, N + 1)); },
         {"'h'", "multiple of 2 elements"}},
        {"wrong A layout", [](Args& a) { a.bind("A", matrix_col_major(fake(0x100000), DType::BF16, M, K)); },
         {"'A'", "K-major A"}},
        {"wrong B layout", [](Args& a) { a.bind("B", matrix(fake(0x200000), DType::BF16, K, N)); },
         {"'B'", "K-major B"}},
        {"K mismatch", [](Args& a) { a.bind("B", matrix_col_major(fake(0x200000), DType::BF16, K + 8, N)); },
         {"'B'", "K = 256"}},
        {"odd N", [](Args& a) { a.bind("B", matrix_col_major(fake(0x200000), DType::BF16, K, N - 1)); },
         {"'B'", "odd"}},
        {"operand dtype", [](Args& a) { a.bind("A", matrix(fake(0x100000), DType::F16, M, K)); },
         {"'A'", "expected dtype bf16"}},
        {"null pointer", [](Args& a) { a.bind("gamma", vector(nullptr, DType::BF16, N)); },
         {"'gamma'", "null pointer"}},
        {"partials shape", [](Args& a) { a.bind("x1_sumsq", matrix(fake(0x700000), DType::F32, M, 4)); },
         {"'x1_sumsq'", "expected shape [4 x 300]", "one f32 partial per (N-tile, row)"}},
        {"partials dtype", [](Args& a) { a.bind("x1_sumsq", matrix(fake(0x700000), DType::BF16, 4, M)); },
         {"'x1_sumsq'", "expected dtype f32"}},
        {"vector stride", [](Args& a) { a.bind("gamma", TensorRef{fake(0x400000), DType::BF16, {N}, {2}}); },
         {"'gamma'", "contiguous vector"}},
        {"scalar for tensor", [](Args& a) { Args b; for (auto& [n, t] : a.tensors()) if (n != "gamma") b.bind(n, t);
                                             b.bind("gamma", 1.0f); a = b; },
         {"'gamma'", "bound to a scalar"}},
    };
    for (const Case& c : cases) {
        INFO(c.what);
        Args a = out_proj_args();
        c.mutate(a);
        const std::string message = error_of(a, g);
        REQUIRE_FALSE(message.empty());
        CHECK_THAT(message, Catch::Contains("kernel 'out_proj'"));
        for (const auto& piece : c.expected) CHECK_THAT(message, Catch::Contains(piece));
    }
}

TEST_CASE("scalars are checked and passed as f32 bits", "[runtime]") {
    const CheckedGraph g = check_graph(blocks::rms_finalize());
    Args a;
    a.bind("x1_sumsq", matrix(fake(0x1000), DType::F32, 4, 100));
    a.bind("rstd", vector(fake(0x2000), DType::F32, 100));
    a.bind("inv_d", 0.5f);
    std::string message;
    try {
        plan_launch(g, {1, 1}, a, "rms_finalize");
    } catch (const Error& e) {
        message = e.what();
    }
    CHECK_THAT(message, Catch::Contains("'eps'") && Catch::Contains("Args::bind(\"eps\", value)"));

    a.bind("eps", 1.0f);
    const LaunchPlan plan = plan_launch(g, {1, 1}, a, "rms_finalize");
    CHECK(plan.finalize.l == 100);
    CHECK(plan.finalize.t == 4);
    REQUIRE(plan.slots.size() == 4);
    CHECK(plan.slots[1] == 0x3f000000u);  // 0.5f
    CHECK(plan.slots[2] == 0x3f800000u);  // 1.0f

    Args wrong = a;
    wrong.bind("rstd", vector(fake(0x2000), DType::F32, 99));
    CHECK_THROWS_WITH(plan_launch(g, {1, 1}, wrong, "rms_finalize"), Catch::Contains("expected shape [100]"));
}

TEST_CASE("tile programs take M and N from their first tile tensor", "[runtime]") {
    const CheckedGraph g = check_graph(blocks::rope_backward());
    Args a;
    a.bind("dqkv", matrix(fake(0x1000), DType::BF16, 70, 64));
    a.bind("z", matrix(fake(0x2000), DType::BF16, 70, 64));
    a.bind("pos", vector(fake(0x3000), DType::I32, 70));
    a.bind("theta", vector(fake(0x4000), DType::F32, 32));
    a.bind("dz", matrix(fake(0x5000), DType::BF16, 70, 64));
    a.bind("zdz_partials", matrix(fake(0x6000), DType::F32, 1, 70));
    const LaunchPlan plan = plan_launch(g, {64, 128}, a, "rope_backward");
    CHECK(plan.tile.m == 70);
    CHECK(plan.tile.n == 64);
    CHECK(plan.m == 70);
    CHECK(plan.n == 64);
    a.bind("theta", vector(fake(0x4000), DType::F32, 64));
    CHECK_THROWS_WITH(plan_launch(g, {64, 128}, a, "rope_backward"),
                      Catch::Contains("'theta'") && Catch::Contains("expected shape [32]"));
}

TEST_CASE("a store_transposed output is N x M, and a tile program takes its extents from another tensor", "[runtime]") {
    Graph g = Graph::tile("transpose");
    g.store_transposed(g.tile_input("x", DType::BF16), "x_t", DType::E4M3);
    const CheckedGraph c = check_graph(g);
    Args a;
    a.bind("x_t", matrix(fake(0x2000), DType::E4M3, 64, 70));
    CHECK_THROWS_WITH(plan_launch(c, {64, 128}, a, "transpose"), Catch::Contains("'x'"));  // the extents' source
    a.bind("x", matrix(fake(0x1000), DType::BF16, 70, 64));
    const LaunchPlan plan = plan_launch(c, {64, 128}, a, "transpose");
    CHECK(plan.m == 70);
    CHECK(plan.n == 64);
    REQUIRE(plan.slots.size() == 4);
    CHECK(plan.slots[2] == 0x2000);
    CHECK(plan.slots[3] == 70);  // its row pitch: M
    a.bind("x_t", matrix(fake(0x2000), DType::E4M3, 70, 64));  // M x N: not transposed
    CHECK_THROWS_WITH(plan_launch(c, {64, 128}, a, "transpose"),
                      Catch::Contains("'x_t'") && Catch::Contains("expected shape [64 x 70]") &&
                          Catch::Contains("store_transposed"));
}

TEST_CASE("a tile_input_transposed input is N x M, and gives a tile program its extents when nothing else does",
          "[runtime]") {
    Graph g = Graph::tile("read_transposed");
    g.store_transposed(g.tile_input_transposed("x", DType::BF16), "x_t", DType::BF16);
    const CheckedGraph c = check_graph(g);
    Args a;
    a.bind("x", matrix(fake(0x1000), DType::BF16, 64, 70));  // N x M
    a.bind("x_t", matrix(fake(0x2000), DType::BF16, 64, 70));
    const LaunchPlan plan = plan_launch(c, {64, 128}, a, "read_transposed");
    CHECK(plan.m == 70);
    CHECK(plan.n == 64);
    REQUIRE(plan.slots.size() == 4);
    CHECK(plan.slots[0] == 0x1000);
    CHECK(plan.slots[1] == 70);  // its row pitch: M
    // With a tile tensor as stored beside it, that one gives M and N, and the transposed input must agree.
    Graph h = Graph::tile("quantize_transposed");
    h.store(h.tile_input_transposed("x", DType::BF16), "y", DType::BF16);
    const CheckedGraph ch = check_graph(h);
    Args b;
    b.bind("y", matrix(fake(0x2000), DType::BF16, 70, 64));
    b.bind("x", matrix(fake(0x1000), DType::BF16, 70, 64));  // M x N: not transposed
    CHECK_THROWS_WITH(plan_launch(ch, {64, 128}, b, "quantize_transposed"),
                      Catch::Contains("'x'") && Catch::Contains("expected shape [64 x 70]") &&
                          Catch::Contains("tile_input_transposed"));
    b.bind("x", matrix(fake(0x1000), DType::BF16, 64, 71));  // odd N: a tile program's N must be even
    b.bind("y", matrix(fake(0x2000), DType::BF16, 71, 64));
    CHECK_NOTHROW(plan_launch(ch, {64, 128}, b, "quantize_transposed"));
    Args odd;
    odd.bind("x", matrix(fake(0x1000), DType::BF16, 65, 70));
    odd.bind("x_t", matrix(fake(0x2000), DType::BF16, 65, 70));
    CHECK_THROWS_WITH(plan_launch(c, {64, 128}, odd, "read_transposed"), Catch::Contains("N = 65"));
}

// BoundLaunch::rebind: a pointer rebound into a checked plan gives the plan a fresh check of the new arguments gives.
TEST_CASE("rebinding a pointer matches planning the new arguments, and checks the pointer", "[runtime]") {
    const CheckedGraph g = check_graph(blocks::out_proj());
    const LaunchPlan original = plan_launch(g, kTile, out_proj_args(), "out_proj");
    const auto rebound_equals_fresh = [&](const std::string& name, const void* data) {
        LaunchPlan rebound = original;
        rebind_pointer(g, rebound, name, data, "out_proj");
        Args moved = out_proj_args();
        TensorRef t = moved.tensors().at(name);
        t.data = data;
        moved.bind(name, t);
        const LaunchPlan fresh = plan_launch(g, kTile, moved, "out_proj");
        CHECK(rebound.slots == fresh.slots);
        CHECK(rebound.gemm.a == fresh.gemm.a);
        CHECK(rebound.gemm.b == fresh.gemm.b);
        CHECK(rebound.gemm.flags == fresh.gemm.flags);
    };
    rebound_equals_fresh("residual", fake(0x910000));
    rebound_equals_fresh("gamma", fake(0x920004));     // bf16 column pairs: 4-byte aligned is enough
    rebound_equals_fresh("x1_sumsq", fake(0x930004));
    rebound_equals_fresh("A", fake(0x940000));
    rebound_equals_fresh("A", fake(0x940002));         // no longer 16-byte aligned: no 16-byte loads of A
    rebound_equals_fresh("B", fake(0x950008));

    LaunchPlan plan = original;
    const auto error_of_rebind = [&](const std::string& name, const void* data) -> std::string {
        try {
            rebind_pointer(g, plan, name, data, "out_proj");
        } catch (const Error& e) {
            return e.what();
        }
        return "";
    };
    CHECK_THAT(error_of_rebind("residual", nullptr), Catch::Contains("'residual': cannot rebind to a null pointer"));
    CHECK_THAT(error_of_rebind("residual", fake(0x910002)), Catch::Contains("not aligned to 4 bytes"));
    CHECK_THAT(error_of_rebind("A", fake(0x940001)), Catch::Contains("'A': pointer") &&
                                                          Catch::Contains("not aligned to 2 bytes"));
    CHECK_THAT(error_of_rebind("x1_sumsq", fake(0x930002)), Catch::Contains("not aligned to 4 bytes"));
    CHECK_THAT(error_of_rebind("nope", fake(0x910000)),
               Catch::Contains("'nope' cannot be rebound: the kernel has no such binding") &&
                   Catch::Contains("A, B, residual"));
    // A failed rebind leaves the plan as it was.
    CHECK(plan.slots == original.slots);
    CHECK(plan.gemm.a == original.gemm.a);
}

TEST_CASE("rebinding a scalar writes its f32 bits, and tensors and scalars do not mix", "[runtime]") {
    const CheckedGraph checked = check_graph(scaled_gemm());
    Args args = scaled_gemm_args();
    LaunchPlan plan = plan_launch(checked, kTile, args, "scaled");
    rebind_scalar(checked, plan, "alpha", -0.5f, "scaled");
    args.bind("alpha", -0.5f);
    CHECK(plan.slots == plan_launch(checked, kTile, args, "scaled").slots);
    CHECK_THROWS_WITH(rebind_scalar(checked, plan, "D", 1.0f, "scaled"),
                      Catch::Contains("cannot rebind the output tensor to a scalar"));
    CHECK_THROWS_WITH(rebind_pointer(checked, plan, "alpha", fake(0x400000), "scaled"),
                      Catch::Contains("cannot rebind an f32 scalar to a pointer"));
    CHECK_THROWS_WITH(rebind_scalar(checked, plan, "A", 1.0f, "scaled"),
                      Catch::Contains("cannot rebind GEMM operand A to a scalar"));
}

TEST_CASE("a device scalar is passed as its pointer tagged with bit 63, a value as its f32 bits", "[runtime]") {
    const CheckedGraph g = check_graph(blocks::rms_finalize());
    const auto plan_with = [&](const Args& scalars) {
        Args a = scalars;
        a.bind("x1_sumsq", matrix(fake(0x1000), DType::F32, 4, 100));
        a.bind("rstd", vector(fake(0x2000), DType::F32, 100));
        return plan_launch(g, {1, 1}, a, "rms_finalize");
    };
    const auto device = [](std::uintptr_t address) { return device_scalar(static_cast<const float*>(fake(address))); };
    Args scalars;
    scalars.bind("inv_d", 0.5f).bind("eps", device(0x7f0000001004));
    LaunchPlan plan = plan_with(scalars);
    REQUIRE(plan.slots.size() == 4);
    CHECK(plan.slots[1] == 0x3f000000u);  // 0.5f, high word 0
    CHECK(plan.slots[2] == (0x7f0000001004ull | (1ull << 63)));

    // Binding a value replaces the device scalar, and the other way round.
    scalars.bind("eps", 1.0f);
    CHECK(plan_with(scalars).slots[2] == 0x3f800000u);
    scalars.bind("inv_d", device(0x3000));
    CHECK(plan_with(scalars).slots[1] == (0x3000ull | (1ull << 63)));

    const auto error_with = [&](const DeviceScalar& eps) {
        Args a = scalars;
        a.bind("eps", eps);
        try {
            plan_with(a);
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    CHECK_THAT(error_with(device_scalar(nullptr)),
               Catch::Contains("kernel 'rms_finalize': argument 'eps'") && Catch::Contains("null pointer"));
    CHECK_THAT(error_with(device(0x3002)),
               Catch::Contains("argument 'eps'") && Catch::Contains("not aligned to 4 bytes"));

    CHECK(error_with(device(0x3000)).empty());

    // A tensor bound to a scalar name is still an error, which names the device-scalar form; a tensor name cannot
    // take a device scalar either.
    Args with_tensor;
    with_tensor.bind("eps", vector(fake(0x3000), DType::F32, 1)).bind("inv_d", 0.5f);
    CHECK_THROWS_WITH(plan_with(with_tensor), Catch::Contains("'eps': is an f32 scalar but was bound to a tensor") &&
                                                  Catch::Contains("device_scalar(ptr)"));
    CHECK_THROWS_WITH(Args().bind("rstd", vector(fake(0x2000), DType::F32, 100)).bind("rstd", device(0x3000)),
                      Catch::Contains("'rstd' is already bound to a tensor"));
}

TEST_CASE("rebinding a scalar to device memory tags its pointer and checks it", "[runtime]") {
    const CheckedGraph checked = check_graph(scaled_gemm());
    Args args = scaled_gemm_args();
    LaunchPlan plan = plan_launch(checked, kTile, args, "scaled");
    const DeviceScalar alpha = device_scalar(static_cast<const float*>(fake(0x400000)));
    rebind_scalar(checked, plan, "alpha", alpha, "scaled");
    args.bind("alpha", alpha);
    CHECK(plan.slots == plan_launch(checked, kTile, args, "scaled").slots);
    const LaunchPlan before = plan;
    CHECK_THROWS_WITH(rebind_scalar(checked, plan, "alpha", device_scalar(nullptr), "scaled"),
                      Catch::Contains("kernel 'scaled': argument 'alpha'") && Catch::Contains("null pointer"));
    CHECK_THROWS_WITH(rebind_scalar(checked, plan, "alpha", device_scalar(static_cast<const float*>(fake(0x400001))),
                                    "scaled"),
                      Catch::Contains("not aligned to 4 bytes"));
    CHECK_THROWS_WITH(rebind_scalar(checked, plan, "D", alpha, "scaled"),
                      Catch::Contains("cannot rebind the output tensor to a scalar"));
    CHECK(plan.slots == before.slots);
    rebind_scalar(checked, plan, "alpha", 2.0f, "scaled");
    args.bind("alpha", 2.0f);
    CHECK(plan.slots == plan_launch(checked, kTile, args, "scaled").slots);
}

namespace {

// D = alpha * A B on block-scaled e4m3 operands (GemmSpec::scales), and its bindings: at K = 256 and
// N = 512, A_scale is [2 x M] and B_scale [4 x 2].
constexpr std::int64_t KB = K / kScaleBlock, NB = N / kScaleBlock;

Graph block_scaled_gemm() {
    GemmSpec spec{DType::E4M3, Major::K, Major::K};
    spec.scales = ScaleMode::Block128x128;
    Graph g = Graph::gemm("scaled", spec);
    g.store(g.mul(g.accumulator(), g.scalar("alpha")), "D", DType::BF16);
    return g;
}

Args block_scaled_args(bool with_scales = true) {
    Args args;
    args.bind("A", matrix(fake(0x100000), DType::E4M3, M, K));
    args.bind("B", matrix_col_major(fake(0x200000), DType::E4M3, K, N));
    args.bind("D", matrix(fake(0x300000), DType::BF16, M, N)).bind("alpha", 2.0f);
    if (with_scales) {
        args.bind("A_scale", matrix(fake(0x400000), DType::F32, KB, M));
        args.bind("B_scale", matrix(fake(0x500000), DType::F32, NB, KB));
    }
    return args;
}

}  // namespace

// The 4 words after the bindings' slots: A_scale's pointer and leading dimension, then B_scale's.
std::vector<std::uint64_t> scale_words(const CheckedGraph& g, const LaunchPlan& plan) {
    const auto first = plan.slots.begin() + total_slots(g);
    return {first, first + block_scale_slots(g.graph)};
}

std::uint64_t word(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

TEST_CASE("a block-scaled GEMM plans its scales into the slots after the bindings'", "[runtime]") {
    const CheckedGraph g = check_graph(block_scaled_gemm());
    const LaunchPlan plan = plan_launch(g, kTile, block_scaled_args(), "scaled");
    REQUIRE(static_cast<int>(plan.slots.size()) == total_slots(g) + block_scale_slots(g.graph));
    CHECK(block_scale_slots(g.graph) == 4);
    CHECK(scale_words(g, plan) == std::vector<std::uint64_t>{word(fake(0x400000)), static_cast<std::uint64_t>(M),
                                                            word(fake(0x500000)), static_cast<std::uint64_t>(KB)});
    CHECK(plan.operand_bytes == 1);

    // Leading dimensions beyond the rows' lengths, and K and N not multiples of 128: ceil(K / 128) k-blocks.
    Args wide = block_scaled_args();
    wide.bind("A", matrix(fake(0x100000), DType::E4M3, M, K + 16));
    wide.bind("B", matrix_col_major(fake(0x200000), DType::E4M3, K + 16, N - 2));
    wide.bind("D", matrix(fake(0x300000), DType::BF16, M, N - 2));
    wide.bind("A_scale", matrix(fake(0x400000), DType::F32, KB + 1, M, M + 4));
    wide.bind("B_scale", matrix(fake(0x500000), DType::F32, NB, KB + 1, KB + 3));
    const LaunchPlan padded = plan_launch(g, kTile, wide, "scaled");
    CHECK(scale_words(g, padded)[1] == static_cast<std::uint64_t>(M + 4));
    CHECK(scale_words(g, padded)[3] == static_cast<std::uint64_t>(KB + 3));

    // Other GEMMs take no such slots.
    const CheckedGraph plain_graph = check_graph(scaled_gemm());
    const LaunchPlan plain = plan_launch(plain_graph, kTile, scaled_gemm_args(), "scaled");
    CHECK(static_cast<int>(plain.slots.size()) == std::max(1, total_slots(plain_graph)));
}

TEST_CASE("block-scale errors name the scale, the expected shape and what was given", "[runtime]") {
    const CheckedGraph g = check_graph(block_scaled_gemm());
    struct Case {
        const char* what;
        std::function<void(Args&)> mutate;
        std::vector<std::string> expected;
    };
    const std::vector<Case> cases = {
        {"missing A_scale", [](Args& a) { a = block_scaled_args(false); },
         {"'A_scale'", "is not bound", "block scales of A", "Args::bind(\"A_scale\", tensor)"}},
        {"missing B_scale",
         [](Args& a) { a = block_scaled_args(false); a.bind("A_scale", matrix(fake(0x400000), DType::F32, KB, M)); },
         {"'B_scale'", "is not bound", "block scales of B"}},
        {"A_scale dtype", [](Args& a) { a.bind("A_scale", matrix(fake(0x400000), DType::BF16, KB, M)); },
         {"'A_scale'", "expected dtype f32", "bf16"}},
        {"B_scale dtype", [](Args& a) { a.bind("B_scale", matrix(fake(0x500000), DType::E4M3, NB, KB)); },
         {"'B_scale'", "expected dtype f32", "e4m3"}},
        {"A_scale transposed", [](Args& a) { a.bind("A_scale", matrix(fake(0x400000), DType::F32, M, KB)); },
         {"'A_scale'", "expected shape [2 x 300]", "ceil(K / 128) x M", "[300 x 2]"}},
        {"B_scale per k only", [](Args& a) { a.bind("B_scale", vector(fake(0x500000), DType::F32, KB)); },
         {"'B_scale'", "expected shape [4 x 2]", "ceil(N / 128) x ceil(K / 128)"}},
        {"B_scale short", [](Args& a) { a.bind("B_scale", matrix(fake(0x500000), DType::F32, NB - 1, KB)); },
         {"'B_scale'", "expected shape [4 x 2]", "[3 x 2]"}},
        {"A_scale column-major",
         [](Args& a) { a.bind("A_scale", matrix_col_major(fake(0x400000), DType::F32, KB, M)); },
         {"'A_scale'", "row-major"}},
        {"B_scale overlapping rows",
         [](Args& a) { a.bind("B_scale", TensorRef{fake(0x500000), DType::F32, {NB, KB}, {1, 1}}); },
         {"'B_scale'", "row stride 1 is smaller than its 2 columns"}},
        {"A_scale misaligned", [](Args& a) { a.bind("A_scale", matrix(fake(0x400002), DType::F32, KB, M)); },
         {"'A_scale'", "not aligned to 4 bytes"}},
        {"B_scale null", [](Args& a) { a.bind("B_scale", matrix(nullptr, DType::F32, NB, KB)); },
         {"'B_scale'", "null pointer"}},
        {"A_scale scalar", [](Args& a) { Args b = block_scaled_args(false);
                                          b.bind("B_scale", a.tensors().at("B_scale")).bind("A_scale", 1.0f); a = b; },
         {"'A_scale'", "bound to a scalar"}},
        {"unknown name lists the scales", [](Args& a) { a.bind("C_scale", 1.0f); },
         {"'C_scale'", "no such binding", "A, B, A_scale, B_scale, "}},
    };
    for (const Case& c : cases) {
        INFO(c.what);
        Args a = block_scaled_args();
        c.mutate(a);
        std::string message;
        try {
            plan_launch(g, kTile, a, "scaled");
        } catch (const Error& e) {
            message = e.what();
        }
        REQUIRE_FALSE(message.empty());
        CHECK_THAT(message, Catch::Contains("kernel 'scaled'"));
        for (const auto& piece : c.expected) CHECK_THAT(message, Catch::Contains(piece));
    }
}

TEST_CASE("with B's scales per row (Block1x128), B_scale is [ceil(K / 128) x N] and the block shape is refused",
          "[runtime]") {
    GemmSpec spec{DType::E4M3, Major::K, Major::K};
    spec.scales = ScaleMode::Block1x128;
    Graph rows = Graph::gemm("scaled", spec);
    rows.store(rows.mul(rows.accumulator(), rows.scalar("alpha")), "D", DType::BF16);
    const CheckedGraph g = check_graph(rows);
    Args args = block_scaled_args();
    args.bind("B_scale", matrix(fake(0x500000), DType::F32, KB, N, N + 8));
    const LaunchPlan plan = plan_launch(g, kTile, args, "scaled");
    CHECK(scale_words(g, plan) == std::vector<std::uint64_t>{word(fake(0x400000)), static_cast<std::uint64_t>(M),
                                                            word(fake(0x500000)), static_cast<std::uint64_t>(N + 8)});
    // The 128 x 128 blocks' shape, [4 x 2], is not this one's.
    args.bind("B_scale", matrix(fake(0x500000), DType::F32, NB, KB));
    CHECK_THROWS_WITH(plan_launch(g, kTile, args, "scaled"),
                      Catch::Contains("'B_scale'") && Catch::Contains("expected shape [2 x 512]") &&
                          Catch::Contains("ceil(K / 128) x N") && Catch::Contains("[4 x 2]"));
}

TEST_CASE("scales bound to a GEMM without block scales are unknown names", "[runtime]") {
    const CheckedGraph g = check_graph(scaled_gemm());
    for (const char* name : {"A_scale", "B_scale"}) {
        INFO(name);
        Args args = scaled_gemm_args();
        args.bind(name, matrix(fake(0x400000), DType::F32, KB, M));
        CHECK_THROWS_WITH(plan_launch(g, kTile, args, "scaled"),
                          Catch::Contains(fmt::format("'{}' is bound but the kernel has no such binding", name)) &&
                              Catch::Contains("its bindings are: A, B, ") &&
                              !Catch::Contains("A, B, A_scale"));
        LaunchPlan plan = plan_launch(g, kTile, scaled_gemm_args(), "scaled");
        CHECK_THROWS_WITH(rebind_pointer(g, plan, name, fake(0x400000), "scaled"),
                          Catch::Contains("no such binding"));
    }
}

TEST_CASE("rebinding a block scale rewrites its pointer, and checks it", "[runtime]") {
    const CheckedGraph g = check_graph(block_scaled_gemm());
    const LaunchPlan original = plan_launch(g, kTile, block_scaled_args(), "scaled");
    for (const char* name : {"A_scale", "B_scale"}) {
        INFO(name);
        LaunchPlan rebound = original;
        rebind_pointer(g, rebound, name, fake(0x910004), "scaled");
        Args moved = block_scaled_args();
        TensorRef t = moved.tensors().at(name);
        t.data = fake(0x910004);
        moved.bind(name, t);
        const LaunchPlan fresh = plan_launch(g, kTile, moved, "scaled");
        CHECK(rebound.slots == fresh.slots);

        LaunchPlan plan = original;
        CHECK_THROWS_WITH(rebind_pointer(g, plan, name, fake(0x910002), "scaled"),
                          Catch::Contains(fmt::format("'{}': pointer", name)) &&
                              Catch::Contains("not aligned to 4 bytes"));
        CHECK_THROWS_WITH(rebind_pointer(g, plan, name, nullptr, "scaled"),
                          Catch::Contains("cannot rebind to a null pointer"));
        CHECK_THROWS_WITH(rebind_scalar(g, plan, name, 1.0f, "scaled"),
                          Catch::Contains(fmt::format("'{}': cannot rebind the block scales of {}", name, name[0])));
        CHECK(plan.slots == original.slots);
    }
}
