// Quoting user text for messages (quoted.hpp): escapes make invisible and unprintable bytes visible (a UTF-8
// look-alike of an ASCII letter shows as its bytes), and cutting keeps a message readable.
#include "util/quoted.hpp"

#include <fmt/format.h>

namespace coda {

std::string quoted(std::string_view text, char quote, std::size_t max_bytes) {
    const bool cut = text.size() > max_bytes;
    std::string out(1, quote);
    for (const char c : text.substr(0, max_bytes)) {
        const auto byte = static_cast<unsigned char>(c);
        if (c == '\\')
            out += "\\\\";
        else if (byte < 0x20 || byte >= 0x7f)
            out += fmt::format("\\x{:02x}", byte);
        else
            out += c;
    }
    if (cut) out += "...";
    out += quote;
    if (cut) out += fmt::format(" ({} bytes, cut)", text.size());
    return out;
}

}  // namespace coda
