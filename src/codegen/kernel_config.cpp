// KernelConfig::to_text / parse: the canonical one-line form of a tile configuration. It appears in the banner
// of generated sources, in the cache key and in the tuning database, so its spelling must never depend on
// anything but the fields. Also the named Hopper configs.
#include "coda/kernel_config.hpp"

#include <map>
#include <sstream>

#include <fmt/format.h>

#include "coda/error.hpp"

namespace coda {

std::string KernelConfig::to_text() const {
    if (mainloop == Mainloop::Portable)
        return fmt::format("bm={} bn={} bk={} wm={} wn={} stages={}", bm, bn, bk, warps_m, warps_n, stages);
    return fmt::format("hopper bm={} bn={} bk={} stages={} {} cluster={}", bm, bn, bk, stages,
                       schedule == Schedule::Cooperative ? "cooperative" : "pingpong", cluster_m);
}

KernelConfig KernelConfig::parse(const std::string& text) {
    const auto bad = [&](const std::string& why) -> Error {
        return Error(fmt::format("kernel config '{}': {}; expected e.g. '{}' or '{}'", text, why,
                                 KernelConfig{}.to_text(), hopper_config(128, 256, 4, Schedule::Cooperative).to_text()));
    };
    std::istringstream in(text);
    std::vector<std::string> words;
    for (std::string w; in >> w;) words.push_back(w);
    if (words.empty()) throw bad("empty");
    KernelConfig c;
    std::size_t i = 0;
    if (words[0] == "hopper") {
        c = hopper_config(128, 256, 4, Schedule::Cooperative);
        ++i;
    }
    std::map<std::string, int*> fields = {{"bm", &c.bm}, {"bn", &c.bn}, {"bk", &c.bk}, {"stages", &c.stages}};
    if (c.mainloop == Mainloop::Portable) {
        fields["wm"] = &c.warps_m;
        fields["wn"] = &c.warps_n;
    } else {
        fields["cluster"] = &c.cluster_m;
    }
    for (; i < words.size(); ++i) {
        const std::string& w = words[i];
        if (c.mainloop == Mainloop::Hopper && (w == "cooperative" || w == "pingpong")) {
            c.schedule = w == "cooperative" ? Schedule::Cooperative : Schedule::PingPong;
            continue;
        }
        const auto eq = w.find('=');
        if (eq == std::string::npos) throw bad(fmt::format("'{}' is not a field=value pair", w));
        auto it = fields.find(w.substr(0, eq));
        if (it == fields.end()) throw bad(fmt::format("unknown field '{}'", w.substr(0, eq)));
        try {
            std::size_t used = 0;
            *it->second = std::stoi(w.substr(eq + 1), &used);
            if (used != w.size() - eq - 1) throw std::invalid_argument("trailing");
        } catch (const std::exception&) {
            throw bad(fmt::format("'{}' is not an integer", w.substr(eq + 1)));
        }
    }
    return c;
}

KernelConfig hopper_config(int bm, int bn, int stages, Schedule schedule, int cluster_m) {
    KernelConfig c;
    c.mainloop = Mainloop::Hopper;
    c.bm = bm;
    c.bn = bn;
    c.bk = 64;
    c.warps_m = 0;  // unused by the Hopper mainloop; zero so that two equal Hopper configs compare equal
    c.warps_n = 0;
    c.stages = stages;
    c.schedule = schedule;
    c.cluster_m = cluster_m;
    return c;
}

const std::vector<NamedConfig>& hopper_named_configs() {
    // Each consumer warpgroup holds a 64 x 256 or 128 x 128 fp32 accumulator (128 registers a thread); the
    // stage counts fill about 200 KB of shared memory (the template drops stages if the epilogue needs room).
    static const std::vector<NamedConfig> configs = {
        {"h128x256", hopper_config(128, 256, 4, Schedule::Cooperative)},
        {"h256x128", hopper_config(256, 128, 4, Schedule::Cooperative)},
        {"h128x128", hopper_config(128, 128, 6, Schedule::Cooperative)},
        {"hp128x128", hopper_config(128, 128, 6, Schedule::PingPong)},
        {"hp64x256", hopper_config(64, 256, 5, Schedule::PingPong)},
        // Pairs of CTAs along M that share B by TMA multicast: half of B's L2 reads.
        {"h128x256c2", hopper_config(128, 256, 4, Schedule::Cooperative, 2)},
        {"hp128x128c2", hopper_config(128, 128, 6, Schedule::PingPong, 2)},
    };
    return configs;
}

}  // namespace coda
