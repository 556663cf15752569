// Finalizers with an element's partials split among G threads of a warp (finalize_program.cuh), against the CPU
// reference: the block's finalizers, a graph of every op a finalize graph may hold and random finalize graphs, at
// shapes that give every G with the awkward cases (L not a whole number of warps' elements, T not a multiple of G,
// T < G, L = 1, a long vector past the grid's cap); and the same bytes on every run and launch path.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include <fmt/format.h>

#include "coda/blocks.hpp"
#include "coda/runtime.hpp"
#include "gpu/gpu_support.hpp"
#include "mainloop/finalize_program.hpp"
#include "support/random_graph.hpp"

using namespace coda;
using namespace coda::test;

namespace {

struct FinalizeShape {
    std::int64_t l, t;
    int strands;  // the G it runs with (set_finalize_strands_override: every G is tested, not only the host's pick)
};

// Runs the finalizers of a scope at one G, and returns them to the setting after it.
struct StrandsOverride {
    explicit StrandsOverride(int strands) { set_finalize_strands_override(strands); }
    ~StrandsOverride() { set_finalize_strands_override(std::nullopt); }
    StrandsOverride(const StrandsOverride&) = delete;
    StrandsOverride& operator=(const StrandsOverride&) = delete;
};

const FinalizeShape kShapes[] = {
    {16384, 256, 8},   // ce_finalize's: 16384 rows, a 32768 vocabulary in tiles of 128, at the host's G
    {16384, 256, 16},
    {2048, 128, 8},    // dgamma_finalize's: d = 2048, 16384 rows in tiles of 128, at the host's G
    {2048, 128, 32},
    {33, 17, 32},      // a warp per element; T not a multiple of G
    {1003, 13, 16},    // T < G; 2 elements a warp, L odd
    {40001, 70, 8},    // L not a multiple of the 4 elements a warp; T not a multiple of G
    {60001, 17, 4},    // L not a multiple of 8; T = 4 G + 1
    {1001, 3, 4},      // T < G, one strand of four folds nothing
    {100003, 3, 2},    // L not a multiple of 16
    {1, 5, 8},         // L = 1: one lane of 32 writes
    {1, 1, 1},
    {3000017, 2, 1},   // a long vector with few partials: one thread an element, looping past the grid's cap
};

// Random graphs assume partials that combine a few values (random_graph.hpp): their sums stay small at T <= 17.
bool small_t(const FinalizeShape& s) { return s.t <= 17; }

// Every kind of node a finalize graph may hold: partials of each combine, row inputs (bf16, i32), the row index, a
// scalar and a constant, elementwise math with a compare and a select, stores of f32, bf16, f16 and i32, and an
// accumulate, which an element written twice would get wrong.
Graph every_finalize_op() {
    Graph g = Graph::finalize("every_finalize_op");
    Value total = g.partials("sum_parts", ReduceOp::Sum);
    Value largest = g.partials("max_parts", ReduceOp::Max);
    Value smallest = g.partials("min_parts", ReduceOp::Min);
    Value lse = g.partials("lse_parts", ReduceOp::Lse);
    Value bias = g.row_input("bias", DType::BF16);
    Value label = g.row_input("label", DType::I32);
    Value row = g.row_index("row");
    Value scale = g.scalar("scale");
    Value one = g.constant(1.0f, "one");
    g.store(g.mul(total, scale, "scaled"), "scaled_sum", DType::F32);
    Value hit = g.eq(label, row, "hit");
    Value picked = g.select(hit, largest, smallest, "picked");
    g.store(g.add(picked, bias, "biased"), "picked_out", DType::BF16);
    g.store(g.sqrt(g.add(total, one, "sum_1"), "root"), "root_out", DType::F16);
    g.store(row, "rows", DType::I32);
    g.accumulate(g.sub(lse, largest, "lse_over_max"), "loss", DType::F32);
    return g;
}

std::vector<Graph> block_finalizers() {
    std::vector<Graph> out;
    for (const Graph& g : blocks::llama_block())
        if (g.domain() == Domain::Finalize) out.push_back(g);
    return out;
}

verify::CheckProblem problem(const FinalizeShape& s, std::uint64_t seed, verify::CheckProblem::Path path) {
    verify::CheckProblem p;
    p.m = s.l;
    p.t = s.t;
    p.seed = seed;
    p.path = path;
    return p;
}

}  // namespace

TEST_CASE("finalizers with an element's partials split among threads match the reference at every G", "[gpu]") {
    std::vector<Build> builds;
    for (const Graph& g : block_finalizers()) builds.push_back({g, {}});
    builds.push_back({every_finalize_op(), {}});
    const std::size_t first_random = builds.size();
    std::mt19937_64 rng(909);
    for (int i = 0; i < 4; ++i) builds.push_back({random_graph(rng, Domain::Finalize, {}), {}});
    warm_in_parallel(builds);

    // Launched directly, bound (the packed launch picks G itself) and rebound, in turn.
    using Path = verify::CheckProblem::Path;
    const Path paths[] = {Path::Launch, Path::Bound, Path::Rebound};
    std::uint64_t seed = 300;
    int run = 0;
    for (std::size_t i = 0; i < builds.size(); ++i) {
        const Kernel kernel = Runtime::instance().compile(builds[i].graph);
        for (const FinalizeShape& s : kShapes) {
            if (i >= first_random && !small_t(s)) continue;
            INFO("graph " << builds[i].graph.name() << fmt::format(" L={} T={} G={}", s.l, s.t, s.strands));
            const StrandsOverride strands(s.strands);
            require_pass(verify::check_on_device(kernel, problem(s, seed++, paths[run++ % 3])));
        }
    }
}

TEST_CASE("finalizers are bitwise deterministic at every G, on every launch path", "[gpu]") {
    using Path = verify::CheckProblem::Path;
    const FinalizeShape shapes[] = {{16384, 256, 32}, {1003, 13, 16}, {40001, 70, 8}, {100003, 17, 4},
                                    {200001, 3, 2}};
    std::vector<Build> builds;
    for (const Graph& g : {blocks::ce_finalize(), blocks::dgamma_finalize(), every_finalize_op()})
        builds.push_back({g, {}});
    warm_in_parallel(builds);
    for (const Build& b : builds) {
        const Kernel kernel = Runtime::instance().compile(b.graph);
        for (const FinalizeShape& s : shapes) {
            INFO("graph " << b.graph.name() << fmt::format(" L={} T={} G={}", s.l, s.t, s.strands));
            const StrandsOverride strands(s.strands);
            const verify::CheckReport first = verify::check_on_device(kernel, problem(s, 41, Path::Launch));
            require_pass(first);
            for (Path path : {Path::Launch, Path::Bound, Path::Rebound}) {
                const verify::CheckReport again = verify::check_on_device(kernel, problem(s, 41, path));
                REQUIRE(again.outputs.size() == first.outputs.size());
                for (std::size_t i = 0; i < first.outputs.size(); ++i) {
                    INFO("output " << first.outputs[i].name);
                    CHECK(again.outputs[i].digest == first.outputs[i].digest);
                }
            }
            // And the digest does see the data.
            CHECK(verify::check_on_device(kernel, problem(s, 42, Path::Launch)).outputs[0].digest !=
                  first.outputs[0].digest);
        }
    }
}
