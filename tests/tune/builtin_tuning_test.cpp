// The tuning records coda ships (src/tune/builtin_tuning.cpp): each parses, names a block graph by its hash (a change
// to that graph's text fails here rather than dropping the record in the field), takes a config the Hopper mainloop
// accepts for that graph, and is what the default config picks on its GPU at its shapes, after the user's records.
#include <catch2/catch.hpp>

#include <cstdio>
#include <sstream>

#include "mainloop/hopper.hpp"
#include "runtime/config_choice.hpp"
#include "support/block_graphs.hpp"
#include "tune/builtin_tuning.hpp"

using namespace coda;

namespace {

// A shape of the class "m<M> n<N> k<K>": its bounds themselves (powers of two round to themselves).
ProblemShape shape_of_class(const std::string& cls) {
    ProblemShape s;
    REQUIRE(std::sscanf(cls.c_str(), "m%lld n%lld k%lld", &s.m, &s.n, &s.k) == 3);
    REQUIRE(shape_class(s) == cls);
    return s;
}

}  // namespace

TEST_CASE("every shipped tuning record parses and names a block graph and a config it takes", "[tune]") {
    std::istringstream text(builtin_tuning_text());
    std::size_t lines = 0;
    for (std::string line; std::getline(text, line);)
        if (!line.empty() && line[0] != '#') ++lines;
    const TuningDb& db = builtin_tuning_db();
    REQUIRE(lines > 0);
    CHECK(db.records().size() == lines);  // none skipped as corrupt, none a duplicate key
    for (const TuningRecord& r : db.records()) {
        INFO(format_tuning_line(r));
        const std::optional<Graph> g = test::block_graph_with_hash(r.graph_hash);
        REQUIRE(g.has_value());
        CHECK(g->domain() == Domain::Gemm);
        REQUIRE(r.config.hopper() != nullptr);
        CHECK_NOTHROW(hopper_mainloop().validate(*g, r.config, "sm_90a"));
        CHECK(r.median_ms > 0);
    }
}

TEST_CASE("choose_config takes a shipped record on its GPU and shape class, after the user's", "[tune]") {
    const TuningDb& shipped = builtin_tuning_db();
    const KernelConfig users = HopperConfig{64, 256, 5, Schedule::PingPong, 1};
    for (const TuningRecord& r : shipped.records()) {
        INFO(format_tuning_line(r));
        const Graph g = *test::block_graph_with_hash(r.graph_hash);
        const ProblemShape shape = shape_of_class(r.shape_class);
        const TargetDevice device{r.gpu, 132};
        CHECK(choose_config(g, "sm_90a", shape, device, nullptr, &shipped) == r.config);
        // Without the shipped records, on another GPU, or at a shape of another class: the mainloop's rule.
        const KernelConfig rule = hopper_mainloop().default_config(g, shape);
        CHECK(choose_config(g, "sm_90a", shape, device, nullptr, nullptr) == rule);
        CHECK(choose_config(g, "sm_90a", shape, TargetDevice{"NVIDIA H200", 132}, nullptr, &shipped) == rule);
        const ProblemShape other{shape.m * 2, shape.n, shape.k};
        CHECK(choose_config(g, "sm_90a", other, device, nullptr, &shipped) == hopper_mainloop().default_config(g, other));
        // The user's record for the same key wins; the portable mainloop's arch ignores both.
        TuningDb user;
        user.put({r.gpu, r.graph_hash, r.shape_class, users, 1.0});
        CHECK(choose_config(g, "sm_90a", shape, device, &user, &shipped) == users);
        CHECK(choose_config(g, "sm_80", shape, device, &user, &shipped) == KernelConfig(PortableConfig{}));
    }
}
