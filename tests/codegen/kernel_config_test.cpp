// KernelConfig's text form (it is part of the cache key and the tuning database, so parse must invert
// to_text exactly) and the Hopper config constructors.
#include <catch2/catch.hpp>

#include <set>

#include "coda/error.hpp"
#include "coda/kernel_config.hpp"

using namespace coda;

TEST_CASE("portable and every named Hopper config survive to_text and parse", "[codegen]") {
    std::vector<KernelConfig> configs = {KernelConfig{}};
    KernelConfig narrow;
    narrow.bm = 64;
    narrow.bn = 256;
    narrow.bk = 64;
    narrow.warps_m = 1;
    narrow.warps_n = 4;
    narrow.stages = 3;
    configs.push_back(narrow);
    for (const NamedConfig& named : hopper_named_configs()) configs.push_back(named.config);
    for (const KernelConfig& c : configs) {
        const std::string text = c.to_text();
        INFO(text);
        const KernelConfig back = KernelConfig::parse(text);
        CHECK(back == c);
        CHECK(back.to_text() == text);
    }
    CHECK(KernelConfig{}.to_text() == "bm=128 bn=128 bk=32 wm=2 wn=2 stages=4");
    CHECK(hopper_config(128, 256, 4, Schedule::Cooperative).to_text() ==
          "hopper bm=128 bn=256 bk=64 stages=4 cooperative cluster=1");
    CHECK(hopper_config(64, 256, 5, Schedule::PingPong, 2).to_text() ==
          "hopper bm=64 bn=256 bk=64 stages=5 pingpong cluster=2");
}

TEST_CASE("parse accepts fields in any order and fills the rest from the defaults", "[codegen]") {
    KernelConfig expected;
    expected.bm = 64;
    expected.stages = 3;
    CHECK(KernelConfig::parse("stages=3  bm=64") == expected);
    // A Hopper text starts from hopper_config(128, 256, 4, Cooperative).
    CHECK(KernelConfig::parse("hopper pingpong bn=128") == hopper_config(128, 128, 4, Schedule::PingPong));
    CHECK(KernelConfig::parse("hopper") == hopper_config(128, 256, 4, Schedule::Cooperative));
}

TEST_CASE("parse errors are coda::Errors that quote the text and say what is wrong", "[codegen]") {
    const auto fails_with = [](const std::string& text, const std::string& why) {
        INFO("text: '" << text << "'");
        CHECK_THROWS_AS(KernelConfig::parse(text), Error);
        CHECK_THROWS_WITH(KernelConfig::parse(text), Catch::Contains("kernel config '" + text + "'") &&
                                                         Catch::Contains(why) && Catch::Contains("expected e.g."));
    };
    fails_with("", "empty");
    fails_with("   ", "empty");
    fails_with("bm=128 colour=3", "unknown field 'colour'");
    fails_with("bm=12x", "'12x' is not an integer");
    fails_with("bm=", "'' is not an integer");
    fails_with("stages=four", "'four' is not an integer");
    fails_with("bm 128", "'bm' is not a field=value pair");
    // Fields of one mainloop are unknown to the other.
    fails_with("bm=128 cluster=2", "unknown field 'cluster'");
    fails_with("hopper wm=2", "unknown field 'wm'");
    fails_with("cooperative", "'cooperative' is not a field=value pair");
    // "hopper" is a prefix, not a word that may appear anywhere.
    fails_with("bm=128 hopper", "'hopper' is not a field=value pair");
}

TEST_CASE("hopper_config sets every field of a Hopper tile", "[codegen]") {
    const KernelConfig c = hopper_config(256, 128, 3, Schedule::PingPong, 2);
    CHECK(c.mainloop == Mainloop::Hopper);
    CHECK(c.bm == 256);
    CHECK(c.bn == 128);
    CHECK(c.bk == 64);  // one 128-byte swizzle row of 16-bit elements
    CHECK(c.stages == 3);
    CHECK(c.schedule == Schedule::PingPong);
    CHECK(c.cluster_m == 2);
    // The warp grid is the portable mainloop's; zero so that equal Hopper tiles compare equal.
    CHECK(c.warps_m == 0);
    CHECK(c.warps_n == 0);
    CHECK(hopper_config(128, 256, 4, Schedule::Cooperative).cluster_m == 1);
    CHECK(c != hopper_config(256, 128, 3, Schedule::Cooperative, 2));
    CHECK(c != hopper_config(256, 128, 3, Schedule::PingPong, 1));
}

TEST_CASE("the named Hopper configs have distinct names and distinct tiles", "[codegen]") {
    std::set<std::string> names, texts;
    for (const NamedConfig& named : hopper_named_configs()) {
        INFO(named.name << ": " << named.config.to_text());
        CHECK(named.config.mainloop == Mainloop::Hopper);
        CHECK(names.insert(named.name).second);
        CHECK(texts.insert(named.config.to_text()).second);
    }
    CHECK_FALSE(names.empty());
}
