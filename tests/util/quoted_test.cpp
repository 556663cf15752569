// Quoting user text for messages: printable ASCII as is, every other byte as \xNN, long text cut with its length.
#include <catch2/catch.hpp>

#include <string>

#include "util/quoted.hpp"

using coda::quoted;

TEST_CASE("quoted escapes unprintable bytes and cuts long text", "[util]") {
    CHECK(quoted("x1_value") == "'x1_value'");
    CHECK(quoted("a b", '`') == "`a b`");
    CHECK(quoted(std::string("a\0b", 3)) == "'a\\x00b'");
    CHECK(quoted("\t\r\n\x7f") == "'\\x09\\x0d\\x0a\\x7f'");
    CHECK(quoted("back\\slash") == "'back\\\\slash'");
    CHECK(quoted("\xef\xbb\xbfgraph") == "'\\xef\\xbb\\xbfgraph'");  // a UTF-8 byte-order mark
    CHECK(quoted(std::string(64, 'a')) == "'" + std::string(64, 'a') + "'");
    CHECK(quoted(std::string(65, 'a')) == "'" + std::string(64, 'a') + "...' (65 bytes, cut)");
    CHECK(quoted(std::string(10485760, 'a')) == "'" + std::string(64, 'a') + "...' (10485760 bytes, cut)");
    CHECK(quoted("abcdef", '\'', 3) == "'abc...' (6 bytes, cut)");
}
