// KernelConfig::to_text / parse: the canonical one-line form of a tile config, which appears in generated sources'
// banners, cache listings and the tuning database. The first word names the mainloop; the mainloop reads the rest.
#include "coda/kernel_config.hpp"

#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "coda/error.hpp"
#include "mainloop/mainloops.hpp"

namespace coda {

std::string KernelConfig::to_text() const { return mainloop_of(*this).config_to_text(*this); }

KernelConfig KernelConfig::parse(const std::string& text) {
    std::istringstream in(text);
    std::vector<std::string> words;
    for (std::string w; in >> w;) words.push_back(w);
    std::string examples;
    for (const Mainloop* m : all_mainloops()) {
        if (m->config_word().empty()) continue;
        if (!words.empty() && words[0] == m->config_word())
            return m->parse_config(std::vector<std::string>(words.begin() + 1, words.end()), text);
        examples += fmt::format("{}'{}'", examples.empty() ? "" : " or ", m->base_config().to_text());
    }
    if (words.empty()) throw Error(fmt::format("kernel config '{}': empty; expected e.g. {}", text, examples));
    // Bare fields are the portable mainloop's (the text form before configs named their mainloop).
    if (words[0].find('=') != std::string::npos) return mainloop_of(PortableConfig{}).parse_config(words, text);
    throw Error(fmt::format("kernel config '{}': '{}' names no mainloop; expected e.g. {}", text, words[0], examples));
}

}  // namespace coda
