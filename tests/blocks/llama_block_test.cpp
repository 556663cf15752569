// The ready-made block epilogues are valid, and tools/graphs/*.coda hold exactly their canonical text
// (CODA_UPDATE_GRAPHS=1 rewrites the files from the builder code), one per entry of the block catalog (blocks.def).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "coda/blocks.hpp"
#include "ir/check_graph.hpp"
#include "ir/text.hpp"
#include "support/block_graphs.hpp"

using namespace coda;

using test::every_block_graph;

TEST_CASE("every block epilogue validates", "[blocks]") {
    for (const Graph& g : every_block_graph()) {
        INFO(g.name());
        CHECK_NOTHROW(check_graph(g));
    }
}

TEST_CASE("tools/graphs hold the block epilogues' canonical text", "[blocks]") {
    const bool update = std::getenv("CODA_UPDATE_GRAPHS") != nullptr;
    for (const Graph& g : every_block_graph()) {
        const std::string path = std::string(CODA_SOURCE_DIR) + "/tools/graphs/" + g.name() + ".coda";
        INFO(path);
        if (update) {
            std::ofstream(path, std::ios::binary) << to_text(g);
        }
        std::ifstream in(path, std::ios::binary);
        REQUIRE(in);
        std::stringstream text;
        text << in.rdbuf();
        CHECK(text.str() == to_text(g));
        const auto parsed = parse_graph_file(text.str(), path);
        REQUIRE(parsed.size() == 1);
        CHECK(parsed[0].graph == g);
    }
}

TEST_CASE("every file in tools/graphs is a graph of the block catalog", "[blocks]") {
    std::set<std::string> names;
    for (const blocks::BlockEntry& e : blocks::catalog()) CHECK(names.insert(e.name).second);
    int files = 0;
    for (const auto& file : std::filesystem::directory_iterator(std::string(CODA_SOURCE_DIR) + "/tools/graphs")) {
        if (file.path().extension() != ".coda") continue;
        ++files;
        INFO(file.path().string() << ": add its graph to include/coda/blocks.def, or remove the file");
        CHECK(names.count(file.path().stem().string()) == 1);
    }
    CHECK(files == static_cast<int>(names.size()));
}

TEST_CASE("blocks.def names each block function's graph and default spec", "[blocks]") {
    const auto check_block = [](const char* name, const Graph& g, blocks::BlockSpec spec) {
        INFO(name);
        CHECK(g.name() == name);
        const std::optional<GemmSpec> expected = blocks::default_spec(spec);
        CHECK((g.domain() == Domain::Gemm) == expected.has_value());
        if (expected) CHECK(g.spec() == *expected);
    };
    // blocks::name() with its C++ default argument, against the table's spec.
#define CODA_BLOCK(name, recipe, spec) check_block(#name, blocks::name(), blocks::BlockSpec::spec);
#include "coda/blocks.def"
#undef CODA_BLOCK
}

TEST_CASE("the llama_block lists are the catalog's recipes, in its order", "[blocks]") {
    std::vector<std::string> from_lists, from_catalog;
    for (const auto& list : {blocks::llama_block(), blocks::llama_block_fp8(), blocks::llama_block_fp8_blockwise(),
                             blocks::llama_block_fp8_rowwise()})
        for (const Graph& g : list) from_lists.push_back(g.name());
    for (const blocks::BlockEntry& e : blocks::catalog()) from_catalog.push_back(e.name);
    CHECK(from_lists == from_catalog);
    CHECK(blocks::llama_block().size() == 21);
    CHECK(blocks::llama_block().front().name() == "rms_entry");
    CHECK(blocks::llama_block_fp8_rowwise().back().name() == "wgrad_fp8_rowwise_accumulate");
}

namespace {

std::vector<std::string> binding_names(const Graph& g) {
    std::vector<std::string> names;
    for (const Binding& b : check_graph(g).bindings) names.push_back(b.name);
    return names;
}

}  // namespace

TEST_CASE("the LM head without logits: the forward stores nothing of M x V, the backward only dlogits",
          "[blocks]") {
    using Names = std::vector<std::string>;
    // lm_head_ce's bindings less the logits, in the same order: ce_finalize reads the partials of either.
    Names with_logits = binding_names(blocks::lm_head_ce());
    with_logits.erase(std::find(with_logits.begin(), with_logits.end(), "logits"));
    CHECK(binding_names(blocks::lm_head_ce_stats()) == with_logits);
    CHECK(binding_names(blocks::lm_head_ce_backward()) ==
          Names{"rstd", "lse", "labels", "scale", "dlogits", "zdz_partials"});
    for (const Graph& g : {blocks::lm_head_ce_stats(), blocks::lm_head_ce_backward()}) {
        INFO(g.name());
        int tile_outputs = 0;
        for (const Binding& b : check_graph(g).bindings)
            tile_outputs += b.role == BindingRole::Output && b.kind == Kind::Tile ? 1 : 0;
        CHECK(tile_outputs == (g.name() == "lm_head_ce_backward" ? 1 : 0));
    }
    // Both variants run in block order: each forward before ce_finalize, each backward after it.
    Names order;
    for (const Graph& g : blocks::llama_block()) order.push_back(g.name());
    const auto at = [&](const char* name) { return std::find(order.begin(), order.end(), name) - order.begin(); };
    CHECK(at("lm_head_ce_stats") < at("ce_finalize"));
    CHECK(at("lm_head_ce") < at("ce_finalize"));
    CHECK(at("ce_finalize") < at("lm_head_ce_backward"));
    CHECK(at("ce_finalize") < at("cross_entropy_backward"));
}

TEST_CASE("the variants coda.torch runs bind what blocks.hpp says, and differ from their originals only there",
          "[blocks]") {
    using Names = std::vector<std::string>;
    CHECK(binding_names(blocks::rmsnorm_backward_bf16()) ==
          Names{"rstd", "x", "gamma", "s", "dx", "o", "dgamma_partials"});
    CHECK(binding_names(blocks::rmsnorm_backward_residual()) ==
          Names{"rstd", "x", "gamma", "s", "dx_in", "dx", "o", "dgamma_partials"});
    CHECK(binding_names(blocks::dgamma_finalize()) == Names{"dgamma_partials", "dgamma"});
    CHECK(binding_names(blocks::rope_backward_from_output()) ==
          Names{"dqkv", "pos", "theta", "dz", "qkv", "zdz_partials"});
    CHECK(binding_names(blocks::rms_entry()) == Names{"x", "gamma", "h", "x1_sumsq"});
    CHECK(binding_names(blocks::lm_head_ce_backward_row_scale()) ==
          Names{"rstd", "lse", "labels", "row_scale", "dlogits", "zdz_partials"});
    CHECK(binding_names(blocks::cross_entropy_backward_row_scale()) ==
          Names{"logits", "lse", "labels", "row_scale", "dlogits", "zdz_partials"});
    // The per-row variants are their originals node for node, the scalar `scale` aside.
    const auto per_row = [](std::string text, const std::string& from, const std::string& to) {
        text.replace(text.find("graph " + from + " "), from.size() + 7, "graph " + to + " ");
        text.replace(text.find("%scale = scalar"), 15, "%row_scale = row_input f32");
        text.replace(text.find(" %scale\n"), 8, " %row_scale\n");
        return text;
    };
    CHECK(to_text(blocks::lm_head_ce_backward_row_scale()) ==
          per_row(to_text(blocks::lm_head_ce_backward()), "lm_head_ce_backward", "lm_head_ce_backward_row_scale"));
    CHECK(to_text(blocks::cross_entropy_backward_row_scale()) ==
          per_row(to_text(blocks::cross_entropy_backward()), "cross_entropy_backward",
                  "cross_entropy_backward_row_scale"));
}
