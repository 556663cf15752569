// Tests of the CPU reference interpreter on small hand-checked problems: GEMM + residual with row and column
// partials cut by small tiles, RoPE, SwiGLU, a loss finalizer over lse partials, an i32 label compare,
// accumulate and round, a block-scaled FP8 GEMM; plus the errors for missing or misshapen inputs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "coda/error.hpp"
#include "ir/check_graph.hpp"
#include "reference/reference.hpp"

namespace coda {
namespace {

using Approx = Catch::Detail::Approx;

HostTensor tensor(std::vector<long long> shape, std::vector<double> values, DType d = DType::F32) {
    return HostTensor{d, std::move(shape), std::move(values)};
}

double at(const HostTensor& t, long long i, long long j) {
    return t.values[static_cast<std::size_t>(i * t.shape[1] + j)];
}

TEST_CASE("3x4x5 GEMM + residual with sumsq row partials and sum column partials on 2x2 tiles", "[reference]") {
    Graph g = Graph::gemm("out_proj", GemmSpec{DType::BF16, Major::K, Major::K});
    Value acc = g.accumulator();
    Value x1 = g.add(acc, g.tile_input("residual", DType::F32), "x1");
    g.store(x1, "x1_out", DType::BF16);
    g.reduce_row(x1, ReduceOp::SumSq, "ss");
    g.reduce_col(x1, ReduceOp::Sum, "cs");

    const long long M = 3, N = 4, K = 5;
    HostTensor a = tensor({M, K}, {}), b = tensor({K, N}, {});
    for (long long i = 0; i < M; ++i)
        for (long long k = 0; k < K; ++k) a.values.push_back(static_cast<double>(i + 1 - k));
    for (long long k = 0; k < K; ++k)
        for (long long j = 0; j < N; ++j) b.values.push_back(0.5 * static_cast<double>(2 * k - j));
    std::vector<double> residual;
    for (long long i = 0; i < M; ++i)
        for (long long j = 0; j < N; ++j) residual.push_back(static_cast<double>(10 * i + j));

    ReferenceProblem p;
    p.m = M, p.n = N, p.k = K, p.a = &a, p.b = &b, p.bm = 2, p.bn = 2;
    p.inputs["residual"] = tensor({M, N}, residual);
    const auto out = run_reference(check_graph(g), p);
    REQUIRE(out.size() == 3);

    double expect[3][4];
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 4; ++j) {
            double s = 10.0 * i + j;
            for (int k = 0; k < 5; ++k) s += (i + 1 - k) * 0.5 * (2 * k - j);
            expect[i][j] = s;
        }
    CHECK(expect[0][0] == -20.0);  // by hand: (1)(0) + (0)(1) + (-1)(2) + (-2)(3) + (-3)(4)

    const HostTensor& x = out.at("x1_out");
    CHECK(x.dtype == DType::BF16);
    REQUIRE(x.shape == std::vector<long long>{3, 4});
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 4; ++j) CHECK(at(x, i, j) == expect[i][j]);

    const HostTensor& ss = out.at("ss");  // [ceil(4/2) x 3]: N-tile tn holds columns 2tn and 2tn+1
    REQUIRE(ss.shape == std::vector<long long>{2, 3});
    for (int tn = 0; tn < 2; ++tn)
        for (int i = 0; i < 3; ++i) {
            const double u = expect[i][2 * tn], v = expect[i][2 * tn + 1];
            CHECK(at(ss, tn, i) == u * u + v * v);
        }
    const HostTensor& cs = out.at("cs");  // [ceil(3/2) x 4]: M-tile 0 holds rows 0-1, M-tile 1 row 2
    REQUIRE(cs.shape == std::vector<long long>{2, 4});
    for (int j = 0; j < 4; ++j) {
        CHECK(at(cs, 0, j) == expect[0][j] + expect[1][j]);
        CHECK(at(cs, 1, j) == expect[2][j]);
    }
}

TEST_CASE("RoPE on a 2x4 tile: pairs rotated by pos_i * theta_j", "[reference]") {
    Graph g = Graph::tile("rope");
    Value x = g.tile_input("x", DType::F32);
    Value angle = g.mul(g.row_input("pos", DType::F32), g.col_input("theta", DType::F32, Width::Half), "angle");
    Value c = g.cos(angle, "c");
    Value s = g.sin(angle, "s");
    Value e = g.even(x, "e");
    Value o = g.odd(x, "o");
    Value re = g.sub(g.mul(e, c), g.mul(o, s), "re");
    Value ro = g.add(g.mul(e, s), g.mul(o, c), "ro");
    g.store(g.join(re, ro), "y", DType::F32);
    g.reduce_row(angle, ReduceOp::Sum, "angle_sum");

    ReferenceProblem p;
    p.m = 2, p.n = 4, p.bn = 2;
    p.inputs["x"] = tensor({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
    p.inputs["pos"] = tensor({2}, {1, 2});
    p.inputs["theta"] = tensor({2}, {0.5, 0.25});
    const auto out = run_reference(check_graph(g), p);

    const double xs[2][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}};
    const double pos[2] = {1, 2}, theta[2] = {0.5, 0.25};
    const HostTensor& y = out.at("y");
    REQUIRE(y.shape == std::vector<long long>{2, 4});
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) {
            const double t = pos[i] * theta[j];
            const double a = xs[i][2 * j], b = xs[i][2 * j + 1];
            CHECK(at(y, i, 2 * j) == Approx(a * std::cos(t) - b * std::sin(t)).epsilon(1e-15));
            CHECK(at(y, i, 2 * j + 1) == Approx(a * std::sin(t) + b * std::cos(t)).epsilon(1e-15));
            CHECK(std::hypot(at(y, i, 2 * j), at(y, i, 2 * j + 1)) == Approx(std::hypot(a, b)).epsilon(1e-14));
        }
    // A half-width value has bn / 2 = 1 column per N-tile of bn = 2 full columns.
    const HostTensor& sums = out.at("angle_sum");
    REQUIRE(sums.shape == std::vector<long long>{2, 2});
    for (int tn = 0; tn < 2; ++tn)
        for (int i = 0; i < 2; ++i) CHECK(at(sums, tn, i) == pos[i] * theta[tn]);
}

TEST_CASE("SwiGLU over interleaved gate/up columns", "[reference]") {
    Graph g = Graph::gemm("gate_up", GemmSpec{DType::F16, Major::K, Major::MN});
    Value acc = g.accumulator();
    g.store(g.mul(g.silu(g.even(acc, "gate")), g.odd(acc, "up"), "y"), "y_out", DType::BF16);

    HostTensor a = tensor({2, 1}, {1, 2});
    HostTensor b = tensor({1, 4}, {0.5, 2, -1, 3});  // (g0, u0, g1, u1)
    ReferenceProblem p;
    p.m = 2, p.n = 4, p.k = 1, p.a = &a, p.b = &b;
    const auto out = run_reference(check_graph(g), p);
    const HostTensor& y = out.at("y_out");
    REQUIRE(y.shape == std::vector<long long>{2, 2});
    const double gates[2] = {0.5, -1}, ups[2] = {2, 3};
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) {
            const double gate = (i + 1) * gates[j], up = (i + 1) * ups[j];
            CHECK(at(y, i, j) == Approx(gate / (1 + std::exp(-gate)) * up).epsilon(1e-15));
        }
}

TEST_CASE("reduce_group: each row's groups of 128 columns, the last cut at N", "[reference]") {
    // acc[i][j] = (i + 1) * (j - 100) for K = 1: groups [0, 128), [128, 256), [256, 260).
    Graph g = Graph::gemm("groups", GemmSpec{DType::BF16, Major::K, Major::MN});
    Value acc = g.accumulator();
    g.store(g.reduce_group(g.abs(acc), ReduceOp::Max, "amax"), "amax_out", DType::F32);
    g.store(g.reduce_group(acc, ReduceOp::Sum, "sum"), "sum_out", DType::F32);
    const long long n = 260;
    HostTensor a = tensor({2, 1}, {1, 2});
    std::vector<double> b_values;
    for (long long j = 0; j < n; ++j) b_values.push_back(static_cast<double>(j - 100));
    HostTensor b = tensor({1, n}, b_values);
    ReferenceProblem p;
    p.m = 2, p.n = n, p.k = 1, p.a = &a, p.b = &b;
    const auto out = run_reference(check_graph(g), p);
    for (int i = 0; i < 2; ++i)
        for (long long j = 0; j < n; ++j) {
            const long long first = j / 128 * 128, last = std::min(first + 128, n) - 1;
            double amax = 0, sum = 0;
            for (long long c = first; c <= last; ++c) {
                amax = std::max(amax, std::fabs((i + 1) * (c - 100.0)));
                sum += (i + 1) * (c - 100.0);
            }
            INFO("row " << i << " column " << j);
            CHECK(at(out.at("amax_out"), i, j) == amax);
            CHECK(at(out.at("sum_out"), i, j) == sum);
        }
}

TEST_CASE("store_transposed: out[j][i] = x[i][j], N x M", "[reference]") {
    Graph g = Graph::tile("transpose");
    Value x = g.tile_input("x", DType::BF16);
    g.store_transposed(x, "x_t", DType::F32);
    g.store_transposed(g.odd(x), "odd_t", DType::F32);
    HostTensor in = tensor({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
    ReferenceProblem p;
    p.m = 2, p.n = 4;
    p.inputs["x"] = in;
    const auto out = run_reference(check_graph(g), p);
    const HostTensor& t = out.at("x_t");
    REQUIRE(t.shape == std::vector<long long>{4, 2});
    CHECK(t.values == std::vector<double>{1, 5, 2, 6, 3, 7, 4, 8});
    const HostTensor& odd = out.at("odd_t");
    REQUIRE(odd.shape == std::vector<long long>{2, 2});
    CHECK(odd.values == std::vector<double>{2, 6, 4, 8});
}

TEST_CASE("tile_input_transposed: x[i][j] = in[j][i], the input N x M", "[reference]") {
    Graph g = Graph::tile("read_transposed");
    Value x = g.tile_input_transposed("x", DType::F32);
    g.store(x, "copy", DType::F32);
    g.reduce_row(x, ReduceOp::Sum, "row_sums");
    ReferenceProblem p;
    p.m = 2, p.n = 4;
    p.inputs["x"] = tensor({4, 2}, {1, 5, 2, 6, 3, 7, 4, 8});  // N x M
    const auto out = run_reference(check_graph(g), p);
    const HostTensor& copy = out.at("copy");
    REQUIRE(copy.shape == std::vector<long long>{2, 4});
    CHECK(copy.values == std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8});
    p.inputs["x"] = tensor({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});  // M x N: not what it reads
    CHECK_THROWS_WITH(run_reference(check_graph(g), p), Catch::Contains("'x'") && Catch::Contains("[4 x 2]"));
}

TEST_CASE("finalize: lse and sum partials fold into a loss and an rstd", "[reference]") {
    Graph g = Graph::finalize("loss");
    Value lse = g.partials("lse_parts", ReduceOp::Lse);
    Value sumsq = g.partials("sumsq_parts", ReduceOp::Sum);
    g.store(lse, "lse", DType::F32);
    g.store(g.sub(lse, g.row_input("target", DType::F32)), "loss", DType::F32);
    g.store(g.rsqrt(g.add(g.div(sumsq, g.scalar("d")), g.constant(0.5f))), "rstd", DType::F32);

    const double ninf = -std::numeric_limits<double>::infinity();
    ReferenceProblem p;
    p.m = 2, p.t = 3;
    p.inputs["lse_parts"] = tensor({3, 2}, {1.0, ninf, 2.0, 0.5, 3.0, ninf});  // column 1 has two empty tiles
    p.inputs["sumsq_parts"] = tensor({3, 2}, {1, 2, 3, 4, 5, 6});
    p.inputs["target"] = tensor({2}, {0.25, -1});
    p.scalars["d"] = 3;
    const auto out = run_reference(check_graph(g), p);
    const double lse0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
    const double lse1 = 0.5;
    REQUIRE(out.at("lse").shape == std::vector<long long>{2});
    CHECK(out.at("lse").values[0] == Approx(lse0).epsilon(1e-15));
    CHECK(out.at("lse").values[1] == Approx(lse1).epsilon(1e-15));
    CHECK(out.at("loss").values[0] == Approx(lse0 - 0.25).epsilon(1e-15));
    CHECK(out.at("loss").values[1] == Approx(lse1 + 1).epsilon(1e-15));
    CHECK(out.at("rstd").values[0] == Approx(1 / std::sqrt(9.0 / 3 + 0.5)).epsilon(1e-15));
    CHECK(out.at("rstd").values[1] == Approx(1 / std::sqrt(12.0 / 3 + 0.5)).epsilon(1e-15));

    p.t = 0;  // no partials at all: every fold is its identity
    p.inputs["lse_parts"] = tensor({0, 2}, {});
    p.inputs["sumsq_parts"] = tensor({0, 2}, {});
    const auto empty = run_reference(check_graph(g), p);
    CHECK(empty.at("lse").values[0] == ninf);
    CHECK(empty.at("rstd").values[1] == Approx(1 / std::sqrt(0.5)));
}

TEST_CASE("i32 labels compared with the column index pick the target logit", "[reference]") {
    Graph g = Graph::tile("pick");
    Value logits = g.tile_input("logits", DType::F32);
    Value hit = g.eq(g.col_index(), g.row_input("labels", DType::I32), "hit");
    g.store(hit, "mask", DType::F32);
    g.reduce_row(g.mul(logits, hit), ReduceOp::Sum, "target");
    g.reduce_row(logits, ReduceOp::Lse, "lse");

    ReferenceProblem p;
    p.m = 2, p.n = 4, p.bn = 4;
    p.inputs["logits"] = tensor({2, 4}, {0.5, -1, 2, 7, 3, 0, -2, 1});
    p.inputs["labels"] = tensor({2}, {3, 0}, DType::I32);
    const auto out = run_reference(check_graph(g), p);
    CHECK(out.at("mask").values == std::vector<double>{0, 0, 0, 1, 1, 0, 0, 0});
    CHECK(out.at("target").shape == std::vector<long long>{1, 2});
    CHECK(out.at("target").values == std::vector<double>{7, 3});
    CHECK(out.at("lse").values[0] ==
          Approx(std::log(std::exp(0.5) + std::exp(-1.0) + std::exp(2.0) + std::exp(7.0))).epsilon(1e-15));

    p.inputs["labels"] = tensor({2}, {3, 0.5}, DType::I32);
    CHECK_THROWS_WITH(run_reference(check_graph(g), p), Catch::Contains("labels") && Catch::Contains("non-integer"));
}

TEST_CASE("accumulate adds to the initial value as stored, and round rounds once", "[reference]") {
    Graph g = Graph::tile("acc");
    Value x = g.tile_input("x", DType::F32);
    g.accumulate(x, "sum", DType::BF16);
    g.store(g.round(x, DType::BF16), "rounded", DType::F32);
    g.reduce_col(g.join(x, x), ReduceOp::Max, "colmax");

    const double tie = 1.0 + std::ldexp(1.0, -8);  // not a bf16: stored as 1.0 (tie to even)
    const double above = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -20);
    ReferenceProblem p;
    p.m = 3, p.n = 2, p.bm = 2;
    p.inputs["x"] = tensor({3, 2}, {above, 2, -3, 4, 5, -6});
    p.inputs["sum"] = tensor({3, 2}, {tie, 1, 1, 1, 1, 1}, DType::BF16);
    const auto out = run_reference(check_graph(g), p);
    CHECK(out.at("sum").dtype == DType::BF16);
    CHECK(out.at("sum").values[0] == 1.0 + static_cast<double>(static_cast<float>(above)));
    CHECK(out.at("sum").values[1] == 3.0);
    CHECK(out.at("rounded").values[0] == 1.0 + std::ldexp(1.0, -7));
    CHECK(out.at("rounded").values[2] == -3.0);
    // Double width: columns 2c and 2c+1 of the joined value both hold x[:, c]; M-tiles are rows 0-1 and 2.
    const HostTensor& colmax = out.at("colmax");
    REQUIRE(colmax.shape == std::vector<long long>{2, 4});
    CHECK(colmax.values == std::vector<double>{above, above, 4, 4, 5, 5, -6, -6});
}

TEST_CASE("missing or misshapen inputs are reported by name", "[reference]") {
    Graph g = Graph::gemm("mm", GemmSpec{});
    Value acc = g.accumulator();
    Value bias = g.col_input("bias", DType::BF16);
    g.store(g.add(acc, bias), "y", DType::F32);
    const CheckedGraph checked = check_graph(g);
    HostTensor a = tensor({2, 3}, std::vector<double>(6, 1.0)), b = tensor({3, 4}, std::vector<double>(12, 1.0));
    ReferenceProblem p;
    p.m = 2, p.n = 4, p.k = 3;
    CHECK_THROWS_WITH(run_reference(checked, p), Catch::Contains("'mm'") && Catch::Contains("GEMM operands"));
    p.a = &a, p.b = &b;
    CHECK_THROWS_WITH(run_reference(checked, p), Catch::Contains("'bias'") && Catch::Contains("[4]"));
    p.inputs["bias"] = tensor({2, 2}, {1, 2, 3, 4});
    CHECK_THROWS_WITH(run_reference(checked, p), Catch::Contains("'bias'") && Catch::Contains("[2 x 2]"));
    p.inputs["bias"] = tensor({4}, {1, 2, 3, 4});
    const auto out = run_reference(checked, p);
    CHECK(out.at("y").values == std::vector<double>{4, 5, 6, 7, 4, 5, 6, 7});
    p.n = 3;
    CHECK_THROWS_AS(run_reference(checked, p), Error);
}

// The block-scaled tests' e4m3 operands: A[i][k] = (i + 1)(kb + 1), B[k][j] = 1 (j even) or -0.5 (odd), so the block
// sums are 128 (i + 1)(kb + 1) B[.][j].
std::pair<HostTensor, HostTensor> block_test_operands(long long m, long long n, long long k) {
    HostTensor a = tensor({m, k}, {}, DType::E4M3), b = tensor({k, n}, {}, DType::E4M3);
    for (long long i = 0; i < m; ++i)
        for (long long kk = 0; kk < k; ++kk) a.values.push_back(static_cast<double>((i + 1) * (kk / 128 + 1)));
    for (long long kk = 0; kk < k; ++kk)
        for (long long j = 0; j < n; ++j) b.values.push_back(j % 2 == 0 ? 1.0 : -0.5);
    return {a, b};
}

// Every element of D = the block-scaled product of block_test_operands over two k-blocks, scale(kb, i, j) being
// A_scale's times B_scale's for that element and k-block: sum over kb of scale * 128 * (i + 1) * (kb + 1) * B's sign.
template <class Scale>
void check_block_products(const HostTensor& d, long long m, long long n, Scale scale) {
    for (long long i = 0; i < m; ++i)
        for (long long j = 0; j < n; ++j) {
            double expect = 0;
            for (int kb = 0; kb < 2; ++kb)
                expect += scale(kb, i, j) * 128.0 * static_cast<double>((i + 1) * (kb + 1)) * (j % 2 == 0 ? 1.0 : -0.5);
            INFO("i=" << i << " j=" << j);
            CHECK(at(d, i, j) == expect);
        }
}

// M = 2, N = 130 (two n-blocks), K = 256 (two k-blocks), block_test_operands: every scale differs, so a misread index
// shows.
TEST_CASE("block-scaled FP8 GEMM: each 128-k block scaled by A_scale[kb][i] * B_scale[j / 128][kb]", "[reference]") {
    GemmSpec spec{DType::E4M3, Major::K, Major::K};
    spec.scales = ScaleMode::Block128x128;
    Graph g = Graph::gemm("scaled", spec);
    g.store(g.accumulator(), "D", DType::F32);
    const long long M = 2, N = 130, K = 256;
    const auto [a, b] = block_test_operands(M, N, K);
    const double a_scale[2][2] = {{1, 2}, {4, 8}};           // [kb][i]
    const double b_scale[2][2] = {{0.5, 0.25}, {3, 0.125}};  // [j / 128][kb]
    ReferenceProblem p;
    p.m = M, p.n = N, p.k = K, p.a = &a, p.b = &b;
    // Read as f32: the extra 2^-30 rounds away.
    p.inputs["A_scale"] = tensor({2, M}, {1 + std::ldexp(1.0, -30), 2, 4, 8});
    p.inputs["B_scale"] = tensor({2, 2}, {0.5, 0.25, 3, 0.125});
    const HostTensor d = run_reference(check_graph(g), p).at("D");
    REQUIRE(d.shape == std::vector<long long>{M, N});
    // By hand: [0][0] = 1 * 0.5 * 128 + 4 * 0.25 * 256 = 320; [1][129] = 2 * 3 * (-128) + 8 * 0.125 * (-256) = -1024.
    CHECK(at(d, 0, 0) == 320.0);
    CHECK(at(d, 1, 129) == -1024.0);
    check_block_products(d, M, N,
                         [&](int kb, long long i, long long j) { return a_scale[kb][i] * b_scale[j / 128][kb]; });

    // K = 200: the last k-block is partial (72 k), N = 4: one n-block.
    HostTensor a2 = tensor({1, 200}, std::vector<double>(200, 1.0), DType::E4M3);
    HostTensor b2 = tensor({200, 4}, std::vector<double>(800, 1.0), DType::E4M3);
    ReferenceProblem q;
    q.m = 1, q.n = 4, q.k = 200, q.a = &a2, q.b = &b2;
    q.inputs["A_scale"] = tensor({2, 1}, {1, 2});
    q.inputs["B_scale"] = tensor({1, 2}, {1, 0.5});
    CHECK(run_reference(check_graph(g), q).at("D").values == std::vector<double>(4, 128 + 72));
}

// The same operands with B's scales per row of B and k-block (Block1x128): B_scale[kb][j], so columns 0, 1 and
// 129 each get their own, and a scale read at (j / 128, kb) as the block layout has it would show.
TEST_CASE("block-scaled FP8 GEMM with B's scales per row: A_scale[kb][i] * B_scale[kb][j]", "[reference]") {
    GemmSpec spec{DType::E4M3, Major::K, Major::K};
    spec.scales = ScaleMode::Block1x128;
    Graph g = Graph::gemm("scaled", spec);
    g.store(g.accumulator(), "D", DType::F32);
    const long long M = 2, N = 130, K = 256;
    const auto [a, b] = block_test_operands(M, N, K);
    const double a_scale[2][2] = {{1, 2}, {4, 8}};  // [kb][i]
    std::vector<double> b_scale(2 * N);             // [kb][j]: 2^-(j % 5) for kb 0, 3 * 2^-(j % 3) for kb 1
    for (long long j = 0; j < N; ++j) {
        b_scale[static_cast<std::size_t>(j)] = std::ldexp(1.0, -static_cast<int>(j % 5));
        b_scale[static_cast<std::size_t>(N + j)] = 3 * std::ldexp(1.0, -static_cast<int>(j % 3));
    }
    ReferenceProblem p;
    p.m = M, p.n = N, p.k = K, p.a = &a, p.b = &b;
    p.inputs["A_scale"] = tensor({2, M}, {1, 2, 4, 8});
    p.inputs["B_scale"] = tensor({2, N}, b_scale);
    const HostTensor d = run_reference(check_graph(g), p).at("D");
    REQUIRE(d.shape == std::vector<long long>{M, N});
    // By hand: [0][0] = 1 * 1 * 128 + 4 * 3 * 256 = 3200; [1][129] = 2 * 2^-4 * (-128) + 8 * 3 * (-256) = -6160.
    CHECK(at(d, 0, 0) == 3200.0);
    CHECK(at(d, 1, 129) == -6160.0);
    check_block_products(d, M, N, [&](int kb, long long i, long long j) {
        return a_scale[kb][i] * b_scale[static_cast<std::size_t>(kb * N + j)];
    });
    // The block layout's shape is refused by name, with the shape this layout needs.
    p.inputs["B_scale"] = tensor({2, 2}, {1, 1, 1, 1});
    CHECK_THROWS_WITH(run_reference(check_graph(g), p),
                      Catch::Contains("'B_scale'") && Catch::Contains("[2 x 130]") && Catch::Contains("per row of B"));
}

TEST_CASE("block scales that are missing or misshapen are reported by name and shape", "[reference]") {
    GemmSpec spec{DType::E4M3, Major::K, Major::K};
    spec.scales = ScaleMode::Block128x128;
    Graph g = Graph::gemm("scaled", spec);
    g.store(g.accumulator(), "D", DType::F32);
    const CheckedGraph checked = check_graph(g);
    HostTensor a = tensor({2, 3}, std::vector<double>(6, 1.0)), b = tensor({3, 4}, std::vector<double>(12, 1.0));
    ReferenceProblem p;
    p.m = 2, p.n = 4, p.k = 3, p.a = &a, p.b = &b;
    CHECK_THROWS_WITH(run_reference(checked, p), Catch::Contains("lacks 'A_scale'") && Catch::Contains("[1 x 2]"));
    p.inputs["A_scale"] = tensor({1, 2}, {1, 1});
    CHECK_THROWS_WITH(run_reference(checked, p), Catch::Contains("lacks 'B_scale'") && Catch::Contains("[1 x 1]"));
    p.inputs["B_scale"] = tensor({1, 2}, {1, 1});
    CHECK_THROWS_WITH(run_reference(checked, p),
                      Catch::Contains("'B_scale'") && Catch::Contains("shape [1 x 2]") && Catch::Contains("[1 x 1]"));
    p.inputs["B_scale"] = tensor({1, 1}, {0.5});
    CHECK(run_reference(checked, p).at("D").values == std::vector<double>(8, 1.5));
}

}  // namespace
}  // namespace coda
