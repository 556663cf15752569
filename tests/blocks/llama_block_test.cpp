// The ready-made block epilogues are valid, and tools/graphs/*.coda hold exactly their canonical text
// (CODA_UPDATE_GRAPHS=1 rewrites the files from the builder code).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "coda/blocks.hpp"
#include "ir/check_graph.hpp"
#include "ir/text.hpp"

using namespace coda;

TEST_CASE("every block epilogue validates", "[blocks]") {
    for (const Graph& g : blocks::llama_block()) {
        INFO(g.name());
        CHECK_NOTHROW(check_graph(g));
    }
}

TEST_CASE("tools/graphs hold the block epilogues' canonical text", "[blocks]") {
    const bool update = std::getenv("CODA_UPDATE_GRAPHS") != nullptr;
    for (const Graph& g : blocks::llama_block()) {
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
