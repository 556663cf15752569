// The mainloop's declaration of a block-scaled GEMM's scale tensors (coda::block_scale_operands): the names, shapes
// and slots that graph texts, hashes, the kernel cache and bound arguments rely on, and a graph bound under the
// declared names through the CPU reference, against the layouts GemmSpec's comment gives.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ir/check_graph.hpp"
#include "mainloop/block_scales.hpp"
#include "reference/reference.hpp"

namespace coda {
namespace {

GemmSpec fp8_spec(ScaleMode scales) {
    GemmSpec spec{DType::E4M3, Major::K, Major::K};
    spec.scales = scales;
    return spec;
}

Graph identity(ScaleMode scales) {
    Graph g = Graph::gemm("scaled", fp8_spec(scales));
    g.store(g.accumulator(), "D", DType::F32);
    return g;
}

std::vector<std::string> names(const std::vector<BlockScaleOperand>& operands) {
    std::vector<std::string> out;
    for (const BlockScaleOperand& s : operands) out.emplace_back(s.name);
    return out;
}

std::vector<long long> shape(const BlockScaleOperand& s, long long m, long long n, long long k) {
    const BlockScaleShape e = s.shape(m, n, k);
    return {e.rows, e.cols};
}

// M = 3, N = 260, K = 300: three n-blocks and three k-blocks, the last ones partial.
constexpr long long M = 3, N = 260, K = 300, KB = 3, NB = 3;

TEST_CASE("the block scales keep the names, shapes and slots that graph texts, caches and launches rely on",
          "[mainloop]") {
    CHECK(block_scale_operands(fp8_spec(ScaleMode::Off)).empty());
    CHECK(block_scale_slots(identity(ScaleMode::Off)) == 0);
    const Graph tile = Graph::tile("copy");
    CHECK(block_scale_operands(tile).empty());

    for (const ScaleMode mode : {ScaleMode::Block128x128, ScaleMode::Block1x128}) {
        INFO(to_string(mode));
        const std::vector<BlockScaleOperand>& scales = block_scale_operands(fp8_spec(mode));
        REQUIRE(names(scales) == std::vector<std::string>{"A_scale", "B_scale"});
        CHECK(scales[0].operand == "A");
        CHECK(scales[1].operand == "B");
        CHECK(scales[0].what == "block scales of A");
        for (const BlockScaleOperand& s : scales) CHECK(s.dtype == DType::F32);
        CHECK(shape(scales[0], M, N, K) == std::vector<long long>{KB, M});
        CHECK(shape(scales[1], M, N, K) ==
              (mode == ScaleMode::Block1x128 ? std::vector<long long>{KB, N} : std::vector<long long>{NB, KB}));
        CHECK(shape(scales[0], 1, 2, 128) == std::vector<long long>{1, 1});

        const Graph g = identity(mode);
        CHECK(block_scale_slots(g) == 4);  // pointer and leading dimension each: kernel_abi.cuh reads 4 words
        REQUIRE(find_block_scale(g, "B_scale") != nullptr);
        CHECK(find_block_scale(g, "B_scale")->operand == "B");
        CHECK(find_block_scale(g, "D") == nullptr);
        CHECK(find_block_scale(identity(ScaleMode::Off), "A_scale") == nullptr);
    }
}

// Values exact in e4m3 and f32 (quarters up to 2, powers of two), every one different enough that a scale read at the
// wrong index shows.
double operand_value(long long r, long long c) { return static_cast<double>((r * 7 + c * 3) % 9 - 4) / 2.0; }
double scale_value(std::size_t operand, long long flat) {
    return std::ldexp(1.0, static_cast<int>((flat * 5 + static_cast<long long>(operand) * 3) % 9) - 4);
}

TEST_CASE("a graph whose scales are bound under the declared names and shapes runs through the CPU reference",
          "[mainloop]") {
    HostTensor a{DType::E4M3, {M, K}, {}}, b{DType::E4M3, {K, N}, {}};
    for (long long i = 0; i < M; ++i)
        for (long long kk = 0; kk < K; ++kk) a.values.push_back(operand_value(i, kk));
    for (long long kk = 0; kk < K; ++kk)
        for (long long j = 0; j < N; ++j) b.values.push_back(operand_value(kk + 1, j));

    for (const ScaleMode mode : {ScaleMode::Block128x128, ScaleMode::Block1x128}) {
        INFO(to_string(mode));
        const Graph g = identity(mode);
        ReferenceProblem p;
        p.m = M, p.n = N, p.k = K, p.a = &a, p.b = &b;
        const std::vector<BlockScaleOperand>& scales = block_scale_operands(g.spec());
        for (std::size_t s = 0; s < scales.size(); ++s) {
            const BlockScaleShape e = scales[s].shape(M, N, K);
            HostTensor t{scales[s].dtype, {e.rows, e.cols}, {}};
            for (long long flat = 0; flat < e.rows * e.cols; ++flat) t.values.push_back(scale_value(s, flat));
            p.inputs[std::string(scales[s].name)] = t;
        }
        const HostTensor d = run_reference(check_graph(g), p).at("D");
        REQUIRE(d.shape == std::vector<long long>{M, N});

        // GemmSpec's layouts: A's [kb][i]; B's [j / 128][kb], or with Block1x128 [kb][j].
        const std::vector<double>& sa = p.inputs.at("A_scale").values;
        const std::vector<double>& sb = p.inputs.at("B_scale").values;
        for (long long i = 0; i < M; ++i)
            for (long long j = 0; j < N; ++j) {
                double expect = 0;
                for (long long kb = 0; kb < KB; ++kb) {
                    double block = 0;
                    for (long long kk = kb * 128; kk < std::min(K, kb * 128 + 128); ++kk)
                        block += a.values[static_cast<std::size_t>(i * K + kk)] *
                                 b.values[static_cast<std::size_t>(kk * N + j)];
                    const long long b_at = mode == ScaleMode::Block1x128 ? kb * N + j : (j / 128) * KB + kb;
                    expect += sa[static_cast<std::size_t>(kb * M + i)] * sb[static_cast<std::size_t>(b_at)] * block;
                }
                INFO("i=" << i << " j=" << j);
                CHECK(d.values[static_cast<std::size_t>(i * N + j)] == expect);
            }
    }
}

}  // namespace
}  // namespace coda
