// The on-disk entry format: exact round trip, and every truncation, flipped byte, or foreign key rejected
// with a reason instead of a crash or a wrong entry.
#include <catch2/catch.hpp>

#include "cache/kernel_file.hpp"

#include <string>

namespace {

coda::CacheEntry sample_entry() {
    coda::CacheEntry e;
    e.cubin = std::string("\x7f" "ELF\0\1\2\3 binary", 15);
    e.kernel_name = "_ZN4coda12tile_programIN3gen8EpilogueEEEvNS_11TileProblemENT_4ArgsE";
    e.resources = {{"_ZN4coda12tile_program", 64, 0, 0, 16, 1024, 0}, {"other", 255, 8, 12, 48, 0, 1}};
    e.description = "rmsnorm-3f2a9c sm_90a tile bm=64 bn=128";
    e.source = "// generated\n#include \"coda/tile_program.cuh\"\n";
    return e;
}

const std::string kKey(64, 'a');

}  // namespace

TEST_CASE("a kernel file round-trips every field", "[cache]") {
    const coda::CacheEntry e = sample_entry();
    const std::string bytes = coda::encode_kernel_file(kKey, e);
    auto decoded = coda::decode_kernel_file(bytes, kKey);
    INFO((std::holds_alternative<std::string>(decoded) ? std::get<std::string>(decoded) : ""));
    REQUIRE(std::holds_alternative<coda::CacheEntry>(decoded));
    const auto& d = std::get<coda::CacheEntry>(decoded);
    CHECK(d.cubin == e.cubin);
    CHECK(d.kernel_name == e.kernel_name);
    CHECK(d.description == e.description);
    CHECK(d.source == e.source);
    REQUIRE(d.resources.size() == 2);
    CHECK(d.resources[1].function == "other");
    CHECK(d.resources[1].registers == 255);
    CHECK(d.resources[1].spill_store_bytes == 8);
    CHECK(d.resources[1].spill_load_bytes == 12);
    CHECK(d.resources[1].stack_frame_bytes == 48);
    CHECK(d.resources[0].shared_bytes == 1024);
    CHECK(d.resources[0].wgmma_serialized == 0);
    CHECK(d.resources[1].wgmma_serialized == 1);
    CHECK(bytes.compare(0, 8, "CODAKERN") == 0);
}

TEST_CASE("every truncation of a kernel file is rejected", "[cache]") {
    const std::string bytes = coda::encode_kernel_file(kKey, sample_entry());
    for (std::size_t n = 0; n < bytes.size(); ++n) {
        INFO("kept " << n << " of " << bytes.size() << " bytes");
        auto decoded = coda::decode_kernel_file(std::string_view(bytes).substr(0, n), kKey);
        REQUIRE(std::holds_alternative<std::string>(decoded));
    }
    auto padded = coda::decode_kernel_file(bytes + "x", kKey);
    CHECK(std::holds_alternative<std::string>(padded));
}

TEST_CASE("every flipped byte of a kernel file is rejected", "[cache]") {
    const std::string bytes = coda::encode_kernel_file(kKey, sample_entry());
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        std::string corrupt = bytes;
        corrupt[i] = static_cast<char>(corrupt[i] ^ 0x20);
        INFO("flipped byte " << i);
        REQUIRE(std::holds_alternative<std::string>(coda::decode_kernel_file(corrupt, kKey)));
    }
}

TEST_CASE("a kernel file is rejected under another key, and huge lengths are caught", "[cache]") {
    const std::string bytes = coda::encode_kernel_file(kKey, sample_entry());
    auto other = coda::decode_kernel_file(bytes, std::string(64, 'b'));
    REQUIRE(std::holds_alternative<std::string>(other));
    CHECK(std::get<std::string>(other).find("key") != std::string::npos);

    std::string huge = bytes;
    for (int i = 0; i < 8; ++i) huge[12 + i] = '\xff';  // first field length: 2^64 - 1
    auto decoded = coda::decode_kernel_file(huge, kKey);
    REQUIRE(std::holds_alternative<std::string>(decoded));
    CHECK(std::get<std::string>(decoded).find("truncated") != std::string::npos);

    std::string version = bytes;
    version[8] = 99;
    auto old = coda::decode_kernel_file(version, kKey);
    REQUIRE(std::holds_alternative<std::string>(old));
    CHECK(std::get<std::string>(old).find("version") != std::string::npos);
}
