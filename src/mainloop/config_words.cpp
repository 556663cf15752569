// One reader for every mainloop's config words, so that their errors read the same.
#include "mainloop/config_words.hpp"

#include <fmt/format.h>

#include "coda/error.hpp"

namespace coda {

void read_config_words(const std::vector<std::string>& words, const ConfigWords& known, const std::string& text,
                       const std::string& example) {
    const auto bad = [&](const std::string& why) {
        return Error(fmt::format("kernel config '{}': {}; expected e.g. '{}'", text, why, example));
    };
    for (const std::string& w : words) {
        bool flag = false;
        for (const auto& [name, set] : known.flags)
            if (w == name) {
                set();
                flag = true;
            }
        if (flag) continue;
        const auto eq = w.find('=');
        if (eq == std::string::npos) throw bad(fmt::format("'{}' is not a field=value pair", w));
        const std::string name = w.substr(0, eq), value = w.substr(eq + 1);
        int* field = nullptr;
        for (const auto& [known_name, target] : known.fields)
            if (known_name == name) field = target;
        if (field == nullptr) throw bad(fmt::format("unknown field '{}'", name));
        try {
            std::size_t used = 0;
            *field = std::stoi(value, &used);
            if (used != value.size()) throw std::invalid_argument("trailing characters");
        } catch (const std::exception&) {
            throw bad(fmt::format("'{}' is not an integer", value));
        }
    }
}

}  // namespace coda
