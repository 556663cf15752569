// SHA-256 against the FIPS 180-4 example vectors, and across the padding boundaries (55/56 and 119/120
// bytes need one more block for the length; 63/64 fill a block exactly).
#include <catch2/catch.hpp>

#include <string>

#include "util/sha256.hpp"

using coda::sha256_hex;

TEST_CASE("sha256 matches the FIPS 180-4 test vectors", "[util]") {
    CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    CHECK(sha256_hex(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("sha256 pads correctly around block boundaries", "[util]") {
    CHECK(sha256_hex(std::string(55, 'a')) == "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    CHECK(sha256_hex(std::string(56, 'a')) == "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
    CHECK(sha256_hex(std::string(63, 'a')) == "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34");
    CHECK(sha256_hex(std::string(64, 'a')) == "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
    CHECK(sha256_hex(std::string(119, 'a')) == "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb");
    CHECK(sha256_hex(std::string(120, 'a')) == "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c");
}

TEST_CASE("sha256 digests are 64 lowercase hex characters and depend on every byte", "[util]") {
    std::string data(200, '\0');
    const std::string base = sha256_hex(data);
    REQUIRE(base.size() == 64);
    for (char c : base) CHECK(((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')));
    for (std::size_t i : {0u, 63u, 64u, 199u}) {
        std::string changed = data;
        changed[i] = '\x80';
        CHECK(sha256_hex(changed) != base);
    }
}
