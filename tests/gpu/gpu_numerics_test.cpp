// GPU numerics against the CPU reference (fp64): the block's epilogues, and random graphs over every
// primitive, every operand layout, both input dtypes and odd shapes. Inputs are fresh random values and
// outputs are poisoned before each run (verify::check_on_device).
#include <catch2/catch.hpp>

#include <atomic>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "coda/blocks.hpp"
#include "coda/runtime.hpp"
#include "support/random_graph.hpp"
#include "verify/device_check.hpp"

using namespace coda;

namespace {

void require_pass(const verify::CheckReport& report) {
    INFO(report.kernel << " " << report.problem << "\n" << report.summary());
    CHECK(report.pass);
}

// Compiles graphs on all host cores first, so the checks below find them in the cache.
void warm_in_parallel(const std::vector<Graph>& graphs) {
    std::vector<std::thread> threads;
    std::atomic<std::size_t> next{0};
    const unsigned workers = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
    for (unsigned t = 0; t < workers; ++t)
        threads.emplace_back([&] {
            for (std::size_t i = next++; i < graphs.size(); i = next++) Runtime::instance().compile(graphs[i]);
        });
    for (auto& t : threads) t.join();
}

struct Shape {
    std::int64_t m, n, k;
    int pad;  // extra leading-dimension elements on A and B: a pad of 2 forces the non-16-byte load path
};

}  // namespace

TEST_CASE("the block's epilogues match the reference at odd shapes", "[gpu]") {
    const auto graphs = blocks::llama_block();
    warm_in_parallel(graphs);
    std::uint64_t seed = 100;
    for (const Graph& g : graphs) {
        for (const Shape& s : {Shape{1000, 1000, 1000, 0}, Shape{1, 512, 4096, 0}, Shape{257, 130, 72, 2}}) {
            verify::CheckProblem p;
            p.m = s.m;
            p.n = s.n;
            p.k = s.k;
            p.operand_pad = s.pad;
            p.seed = seed++;
            require_pass(verify::check_on_device(Runtime::instance().compile(g), p));
        }
    }
}

TEST_CASE("random GEMM epilogues over all layouts and both dtypes match the reference", "[gpu]") {
    std::mt19937_64 rng(20261202);
    struct Case {
        Graph graph;
        Shape shape;
    };
    std::vector<Case> cases;
    for (DType input : {DType::BF16, DType::F16})
        for (Major a : {Major::K, Major::MN})
            for (Major b : {Major::K, Major::MN}) {
                const GemmSpec spec{input, a, b};
                cases.push_back({test::random_graph(rng, Domain::Gemm, spec), {1, 4096, 4096, 0}});
                cases.push_back({test::random_graph(rng, Domain::Gemm, spec), {129, 130, 70, 2}});
                if (input == DType::BF16) {
                    cases.push_back({test::random_graph(rng, Domain::Gemm, spec), {1000, 1000, 1000, 0}});
                    cases.push_back({test::random_graph(rng, Domain::Gemm, spec), {4097, 2050, 520, 0}});
                }
            }
    std::vector<Graph> graphs;
    for (const Case& c : cases) graphs.push_back(c.graph);
    warm_in_parallel(graphs);
    std::uint64_t seed = 1;
    for (const Case& c : cases) {
        verify::CheckProblem p;
        p.m = c.shape.m;
        p.n = c.shape.n;
        p.k = c.shape.k;
        p.operand_pad = c.shape.pad;
        p.seed = seed++;
        require_pass(verify::check_on_device(Runtime::instance().compile(c.graph), p));
    }
}

TEST_CASE("random tile programs and finalizers match the reference", "[gpu]") {
    std::mt19937_64 rng(4242);
    std::vector<Graph> tiles, finals;
    for (int i = 0; i < 6; ++i) tiles.push_back(test::random_graph(rng, Domain::Tile, {}));
    for (int i = 0; i < 4; ++i) finals.push_back(test::random_graph(rng, Domain::Finalize, {}));
    std::vector<Graph> all = tiles;
    all.insert(all.end(), finals.begin(), finals.end());
    warm_in_parallel(all);
    std::uint64_t seed = 77;
    const Shape tile_shapes[] = {{1, 4096, 0, 0}, {1000, 1000, 0, 0}, {4097, 2050, 0, 0}};
    for (std::size_t i = 0; i < tiles.size(); ++i) {
        const Shape s = tile_shapes[i % 3];
        verify::CheckProblem p;
        p.m = s.m;
        p.n = s.n;
        p.seed = seed++;
        require_pass(verify::check_on_device(Runtime::instance().compile(tiles[i]), p));
    }
    for (const Graph& g : finals) {
        verify::CheckProblem p;
        p.m = 100003;
        p.t = 17;
        p.seed = seed++;
        require_pass(verify::check_on_device(Runtime::instance().compile(g), p));
    }
}

TEST_CASE("reductions are bitwise deterministic: the same inputs give the same bytes", "[gpu]") {
    for (const Graph& g : {blocks::lm_head_ce(), blocks::rmsnorm_backward(), blocks::rope_backward()}) {
        verify::CheckProblem p;
        p.m = 1023;
        p.n = 2050;
        p.k = 520;
        p.seed = 99;
        const Kernel k = Runtime::instance().compile(g);
        const verify::CheckReport first = verify::check_on_device(k, p);
        const verify::CheckReport second = verify::check_on_device(k, p);
        require_pass(first);
        REQUIRE(first.outputs.size() == second.outputs.size());
        for (std::size_t i = 0; i < first.outputs.size(); ++i) {
            INFO(g.name() << " output " << first.outputs[i].name);
            CHECK(first.outputs[i].digest == second.outputs[i].digest);
        }
        p.seed = 100;  // and the digest does see the data
        CHECK(verify::check_on_device(k, p).outputs[0].digest != first.outputs[0].digest);
    }
}

TEST_CASE("launch errors reach the user before the GPU", "[gpu]") {
    const Kernel k = Runtime::instance().compile(blocks::out_proj());
    Args args;
    CHECK_THROWS_WITH(k.launch(args), Catch::Contains("argument 'A'") && Catch::Contains("is not bound"));
}
