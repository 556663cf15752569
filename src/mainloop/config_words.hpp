// Reading a config text's words ("bm=128", "pingpong") into a mainloop's config struct, with the errors every
// mainloop words alike: "kernel config 'TEXT': what is wrong; expected e.g. 'EXAMPLE'".
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace coda {

struct ConfigWords {
    std::vector<std::pair<std::string, int*>> fields;                  // "name=<integer>"
    std::vector<std::pair<std::string, std::function<void()>>> flags;  // a bare word and what it sets
};

// Applies every word of `words` through `known`; throws coda::Error for a word that is neither a known flag nor a
// known field with an integer value. `text` is the whole config text and `example` a valid one, for messages.
void read_config_words(const std::vector<std::string>& words, const ConfigWords& known, const std::string& text,
                       const std::string& example);

}  // namespace coda
