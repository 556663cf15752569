// User text as error messages show it: quoted, with bytes outside printable ASCII escaped and long text cut,
// so that a NUL byte cannot end a message early, nor a 10 MB token fill the screen.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace coda {

// The most bytes of user text a message shows; beyond, the message shows these and says how long the text was.
inline constexpr std::size_t kShownBytes = 64;

// A node's canonical line in messages (`%x = add %a %b`) holds up to four names besides its op and attributes.
inline constexpr std::size_t kShownLineBytes = 5 * kShownBytes;

// 'text' between `quote` characters: a byte outside printable ASCII (a NUL, a tab, the bytes of a UTF-8
// character or byte-order mark) as \xNN, a backslash as \\. Longer than `max_bytes`: its first `max_bytes`
// bytes, "...", and after the closing quote " (N bytes, cut)".
std::string quoted(std::string_view text, char quote = '\'', std::size_t max_bytes = kShownBytes);

}  // namespace coda
