// Tests of the CUDA spelling helpers: exact float literals (read back with strtof, which parses hex
// floats like the CUDA front end), infinities, and collision-free identifiers.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <set>

#include "codegen/cuda_spelling.hpp"
#include "coda/error.hpp"

namespace coda {
namespace {

float read_back(const std::string& literal) {
    REQUIRE(literal.back() == 'f');
    const std::string body = literal.substr(0, literal.size() - 1);
    char* end = nullptr;
    const float x = std::strtof(body.c_str(), &end);
    REQUIRE(*end == '\0');
    return x;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST_CASE("float literals denote the exact float", "[codegen]") {
    CHECK(codegen::float_literal(1.0f) == "0x1p+0f");
    CHECK(codegen::float_literal(-2.5f) == "-0x1.4p+1f");
    CHECK(codegen::float_literal(0.0f) == "0.0f");
    CHECK(codegen::float_literal(-0.0f) == "-0.0f");
    CHECK(codegen::float_literal(std::numeric_limits<float>::infinity()) == "__int_as_float(0x7f800000)");
    CHECK(codegen::float_literal(-std::numeric_limits<float>::infinity()) == "(-__int_as_float(0x7f800000))");
    CHECK_THROWS_AS(codegen::float_literal(std::numeric_limits<float>::quiet_NaN()), InternalError);

    const float specials[] = {1e-6f, 0.1f, 3.14159265f, std::numeric_limits<float>::max(),
                              std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(),
                              -1.17549421e-38f /* largest subnormal */, 65504.0f, -0.0f};
    for (float x : specials) {
        INFO(codegen::float_literal(x));
        CHECK(same_bits(read_back(codegen::float_literal(x)), x));
    }
    std::mt19937 rng(7);
    for (int i = 0; i < 20000; ++i) {
        std::uint32_t bits = rng();
        float x = 0;
        std::memcpy(&x, &bits, sizeof x);
        if (!std::isfinite(x)) continue;
        INFO(bits);
        CHECK(same_bits(read_back(codegen::float_literal(x)), x));
    }
}

TEST_CASE("value identifiers are unique and prefixed by the node id", "[codegen]") {
    Graph g = Graph::tile("names");
    Value a = g.tile_input("x", DType::F32);
    Value b = g.neg(a);
    Value c = g.neg(b, "x1");
    Value d = g.add(c, a, "v1");  // a user name that looks like a generated one
    g.store(d, "v3_v1", DType::F32);
    std::set<std::string> seen;
    for (int id = 0; id < static_cast<int>(g.nodes().size()); ++id) seen.insert(codegen::value_identifier(g, id));
    CHECK(seen.size() == g.nodes().size());
    CHECK(codegen::value_identifier(g, 0) == "v0_x");
    CHECK(codegen::value_identifier(g, 1) == "v1");
    CHECK(codegen::value_identifier(g, 2) == "v2_x1");
    CHECK(codegen::value_identifier(g, 3) == "v3_v1");
    CHECK(codegen::value_identifier(g, 4) == "v4_v3_v1");
}

}  // namespace
}  // namespace coda
