// The portable mainloop's host side without a GPU: its tile rules (the ones portable_gemm.cuh asserts) and the
// shared-memory budget of the target arch, checked before NVRTC sees a config.
#include <catch2/catch.hpp>

#include "codegen/codegen_test_graphs.hpp"
#include "coda/error.hpp"
#include "mainloop/portable.hpp"

namespace coda {
namespace {

TEST_CASE("a portable config the mainloop cannot build is a user error naming the rule", "[mainloop]") {
    struct Case {
        PortableConfig cfg;
        const char* rule;
    };
    const Case cases[] = {
        {{64, 128, 32, 8, 1, 4}, "multiple of 16 * wm"},   {{128, 128, 24, 2, 2, 4}, "multiple of 16"},
        {{128, 128, 32, 2, 2, 1}, "at least 2"},           {{192, 128, 32, 2, 2, 3}, "powers of two"},
        {{128, 128, 32, 2, 16, 4}, "multiple of 16 * wn"}, {{256, 256, 128, 2, 2, 4}, "232448 bytes"},
        {{32, 32, 16, 2, 2, 2}, "split evenly"},           {{128, 128, 32, 2, 2, 0}, "positive"},
    };
    const Graph g = test::out_proj_graph();
    for (const Case& c : cases) {
        INFO(KernelConfig(c.cfg).to_text());
        CHECK_THROWS_WITH(portable_mainloop().validate(g, KernelConfig(c.cfg), "sm_90a"),
                          Catch::Contains("graph 'out_proj'") && Catch::Contains("not valid for the portable mainloop") &&
                              Catch::Contains(c.rule));
    }
    CHECK_NOTHROW(portable_mainloop().validate(g, KernelConfig(PortableConfig{128, 128, 32, 2, 4, 4}), "sm_90a"));
}

TEST_CASE("the portable pipeline must fit the shared memory of the target arch", "[mainloop]") {
    // 4 * (128 + 128) * 64 * 2 = 128 KiB: fits sm_80 (163 KiB) and sm_90a (227 KiB), not sm_86 (99 KiB).
    const KernelConfig deep = PortableConfig{128, 128, 64, 2, 2, 4};
    const Graph g = test::out_proj_graph();
    CHECK_NOTHROW(portable_mainloop().validate(g, deep, "sm_80"));
    CHECK_NOTHROW(portable_mainloop().validate(g, deep, "sm_90a"));
    CHECK_THROWS_WITH(portable_mainloop().validate(g, deep, "sm_86"),
                      Catch::Contains("131072 bytes of pipeline exceed the 101376 bytes") && Catch::Contains("sm_86"));
}

}  // namespace
}  // namespace coda
