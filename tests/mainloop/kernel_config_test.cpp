// KernelConfig's text form (it is part of the cache key and the tuning database, so parse must invert to_text
// exactly), the defaults parse fills in, and the named configs of each mainloop.
#include <catch2/catch.hpp>

#include <set>

#include "coda/error.hpp"
#include "coda/kernel_config.hpp"
#include "mainloop/mainloops.hpp"

using namespace coda;

namespace {

HopperConfig hopper(int bm, int bn, int stages, Schedule schedule, int cluster_m = 1, int cluster_n = 1) {
    return HopperConfig{bm, bn, stages, schedule, cluster_m, cluster_n};
}

}  // namespace

TEST_CASE("portable and every named config survive to_text and parse", "[mainloop]") {
    std::vector<KernelConfig> configs = {PortableConfig{}, PortableConfig{64, 256, 64, 1, 4, 3}, HopperConfig{}};
    for (const Mainloop* m : all_mainloops())
        for (const NamedConfig& named : m->candidates()) configs.push_back(named.config);
    for (const KernelConfig& c : configs) {
        const std::string text = c.to_text();
        INFO(text);
        const KernelConfig back = KernelConfig::parse(text);
        CHECK(back == c);
        CHECK(back.to_text() == text);
    }
    CHECK(KernelConfig(PortableConfig{}).to_text() == "portable bm=128 bn=128 bk=32 wm=2 wn=2 stages=4");
    CHECK(KernelConfig(hopper(128, 256, 4, Schedule::Cooperative)).to_text() ==
          "hopper bm=128 bn=256 bk=64 stages=4 cooperative cluster=1");
    CHECK(KernelConfig(hopper(64, 256, 5, Schedule::PingPong, 2)).to_text() ==
          "hopper bm=64 bn=256 bk=64 stages=5 pingpong cluster=2");
    CHECK(KernelConfig(hopper(256, 128, 4, Schedule::Cooperative, 1, 2)).to_text() ==
          "hopper bm=256 bn=128 bk=64 stages=4 cooperative cluster=1 cluster_n=2");
    // The direct variant (no staging of tile tensors): a word at the end, a different config and cache key.
    HopperConfig direct = hopper(128, 128, 6, Schedule::Cooperative);
    direct.direct = true;
    CHECK(KernelConfig(direct).to_text() == "hopper bm=128 bn=128 bk=64 stages=6 cooperative cluster=1 direct");
    CHECK(KernelConfig::parse(KernelConfig(direct).to_text()) == direct);
    CHECK(KernelConfig::parse("hopper direct cooperative") == direct);
    CHECK(KernelConfig(direct) != KernelConfig(hopper(128, 128, 6, Schedule::Cooperative)));
}

TEST_CASE("parse takes fields in any order and fills the rest from the mainloop's default", "[mainloop]") {
    PortableConfig expected;
    expected.bm = 64;
    expected.stages = 3;
    CHECK(KernelConfig::parse("stages=3  bm=64") == expected);           // bare fields: the portable mainloop's
    CHECK(KernelConfig::parse("portable stages=3 bm=64") == expected);
    // A Hopper text starts from HopperConfig{}, the default the runtime uses (ping-pong 128 x 128, 6 stages).
    CHECK(KernelConfig::parse("hopper") == HopperConfig{});
    CHECK(KernelConfig::parse("hopper bm=128 bn=128") == HopperConfig{});
    CHECK(KernelConfig::parse("hopper cooperative bn=256") == hopper(128, 256, 6, Schedule::Cooperative));
    CHECK(KernelConfig::parse("hopper bk=64 cluster=2") == hopper(128, 128, 6, Schedule::PingPong, 2));
    CHECK(KernelConfig::parse("hopper cluster_n=2") == hopper(128, 128, 6, Schedule::PingPong, 1, 2));
}

TEST_CASE("parse errors are coda::Errors that quote the text and say what is wrong", "[mainloop]") {
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
    fails_with("bm 128", "'bm' names no mainloop");
    fails_with("blackwell bm=128", "'blackwell' names no mainloop");
    // Fields of one mainloop are unknown to the other.
    fails_with("bm=128 cluster=2", "unknown field 'cluster'");
    fails_with("hopper wm=2", "unknown field 'wm'");
    fails_with("cooperative", "'cooperative' names no mainloop");
    fails_with("portable pingpong", "'pingpong' is not a field=value pair");
    // The mainloop word comes first, not anywhere.
    fails_with("bm=128 hopper", "'hopper' is not a field=value pair");
    // The Hopper mainloop's K step is fixed.
    fails_with("hopper bk=32", "bk must be 64");
}

TEST_CASE("the examples in parse errors are the real defaults", "[mainloop]") {
    CHECK_THROWS_WITH(KernelConfig::parse(""),
                      Catch::Contains(KernelConfig(HopperConfig{}).to_text()) &&
                          Catch::Contains(KernelConfig(PortableConfig{}).to_text()));
    CHECK(KernelConfig(HopperConfig{}).to_text() == "hopper bm=128 bn=128 bk=64 stages=6 pingpong cluster=1");
}

TEST_CASE("KernelConfig holds one mainloop's config and says which", "[mainloop]") {
    const KernelConfig h = hopper(256, 128, 3, Schedule::PingPong, 2);
    REQUIRE(h.hopper() != nullptr);
    CHECK(h.portable() == nullptr);
    CHECK(h.hopper()->bm == 256);
    CHECK(h.hopper()->cluster_m == 2);
    CHECK(HopperConfig::bk == 64);  // one 128-byte swizzle row of 16-bit elements
    const KernelConfig p = PortableConfig{};
    CHECK(p.hopper() == nullptr);
    REQUIRE(p.portable() != nullptr);
    CHECK(h != hopper(256, 128, 3, Schedule::Cooperative, 2));
    CHECK(h != hopper(256, 128, 3, Schedule::PingPong, 1));
    // Equal fields in different mainloops are different configs.
    CHECK(KernelConfig(PortableConfig{}) != KernelConfig(HopperConfig{}));
}

TEST_CASE("each mainloop's named configs have distinct names and tiles, and belong to it", "[mainloop]") {
    std::set<std::string> names, texts;
    for (const Mainloop* m : all_mainloops())
        for (const NamedConfig& named : m->candidates()) {
            INFO(named.name << ": " << named.config.to_text());
            CHECK(m->owns(named.config));
            CHECK(&mainloop_of(named.config) == m);
            CHECK(names.insert(named.name).second);
            CHECK(texts.insert(named.config.to_text()).second);
        }
    CHECK(names.size() > 2);
}
