// Encodes and decodes the cache file format. Layout:
//   "CODAKERN" | u32 version | u64 length x 6 | key, kernel_name, description, source, cubin, resources | sha256
#include "cache/kernel_file.hpp"

#include "cache/cache_key.hpp"
#include "util/sha256.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <optional>

namespace coda {
namespace {

constexpr std::string_view kMagic = "CODAKERN";
constexpr std::size_t kFields = 6;
constexpr std::size_t kHeaderBytes = kMagic.size() + 4 + 8 * kFields;
constexpr std::size_t kChecksumBytes = 64;  // sha256 in hex

void put_u32(std::string& out, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_u64(std::string& out, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// Reads fixed-size integers and byte strings from a bounded buffer; any read past the end fails.
class Reader {
public:
    explicit Reader(std::string_view bytes) : bytes_(bytes) {}

    std::optional<std::uint64_t> u64() { return integer(8); }
    std::optional<std::uint32_t> u32() {
        auto v = integer(4);
        return v ? std::optional<std::uint32_t>(static_cast<std::uint32_t>(*v)) : std::nullopt;
    }
    std::optional<std::string_view> bytes(std::uint64_t n) {
        if (n > bytes_.size() - at_) return std::nullopt;
        std::string_view s = bytes_.substr(at_, static_cast<std::size_t>(n));
        at_ += static_cast<std::size_t>(n);
        return s;
    }
    bool done() const { return at_ == bytes_.size(); }

private:
    std::optional<std::uint64_t> integer(std::size_t width) {
        auto raw = bytes(width);
        if (!raw) return std::nullopt;
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < width; ++i) v |= std::uint64_t(static_cast<unsigned char>((*raw)[i])) << (8 * i);
        return v;
    }

    std::string_view bytes_;
    std::size_t at_ = 0;
};

std::string encode_resources(const std::vector<ResourceUsage>& resources) {
    std::string out;
    put_u32(out, static_cast<std::uint32_t>(resources.size()));
    for (const ResourceUsage& r : resources) {
        put_u32(out, static_cast<std::uint32_t>(r.function.size()));
        out += r.function;
        for (int v : {r.registers, r.spill_store_bytes, r.spill_load_bytes, r.stack_frame_bytes, r.shared_bytes,
                      r.wgmma_serialized})
            put_u32(out, static_cast<std::uint32_t>(v));
    }
    return out;
}

std::optional<std::vector<ResourceUsage>> decode_resources(std::string_view blob) {
    Reader in(blob);
    auto count = in.u32();
    if (!count) return std::nullopt;
    std::vector<ResourceUsage> resources;
    for (std::uint32_t i = 0; i < *count; ++i) {
        auto length = in.u32();
        auto name = length ? in.bytes(*length) : std::nullopt;
        if (!name) return std::nullopt;
        ResourceUsage r;
        r.function = std::string(*name);
        for (int* field : {&r.registers, &r.spill_store_bytes, &r.spill_load_bytes, &r.stack_frame_bytes,
                           &r.shared_bytes, &r.wgmma_serialized}) {
            auto v = in.u32();
            if (!v) return std::nullopt;
            *field = static_cast<int>(*v);
        }
        resources.push_back(std::move(r));
    }
    if (!in.done()) return std::nullopt;
    return resources;
}

}  // namespace

std::string encode_kernel_file(const std::string& key, const CacheEntry& entry) {
    const std::string resources = encode_resources(entry.resources);
    const std::array<const std::string*, kFields> fields{&key, &entry.kernel_name, &entry.description,
                                                         &entry.source, &entry.cubin, &resources};
    std::string out(kMagic);
    put_u32(out, static_cast<std::uint32_t>(kCacheFormatVersion));
    for (const std::string* f : fields) put_u64(out, f->size());
    for (const std::string* f : fields) out += *f;
    out += sha256_hex(out);
    return out;
}

std::variant<CacheEntry, std::string> decode_kernel_file(std::string_view bytes, std::string_view expected_key) {
    if (bytes.size() < kHeaderBytes + kChecksumBytes)
        return fmt::format("truncated: {} bytes, shorter than any entry", bytes.size());
    const std::string_view body = bytes.substr(0, bytes.size() - kChecksumBytes);
    Reader in(body);
    if (in.bytes(kMagic.size()) != kMagic) return std::string("not a coda kernel file (bad magic)");
    const std::uint32_t version = *in.u32();
    if (version != static_cast<std::uint32_t>(kCacheFormatVersion))
        return fmt::format("format version {}, expected {}", version, kCacheFormatVersion);

    std::array<std::uint64_t, kFields> lengths{};
    std::uint64_t total = 0;
    for (std::uint64_t& length : lengths) {
        length = *in.u64();
        if (length > body.size() || total + length > body.size())
            return fmt::format("truncated: field lengths exceed the {} bytes of the file", bytes.size());
        total += length;
    }
    if (total != body.size() - kHeaderBytes)
        return fmt::format("truncated or padded: fields need {} bytes, file has {}", kHeaderBytes + total +
                           kChecksumBytes, bytes.size());
    if (sha256_hex(body) != bytes.substr(body.size())) return std::string("checksum mismatch");

    std::array<std::string_view, kFields> fields;
    for (std::size_t i = 0; i < kFields; ++i) fields[i] = *in.bytes(lengths[i]);
    if (fields[0] != expected_key) return fmt::format("holds key {}, not {}", fields[0], expected_key);
    auto resources = decode_resources(fields[5]);
    if (!resources) return std::string("malformed resource table");

    CacheEntry entry;
    entry.kernel_name = std::string(fields[1]);
    entry.description = std::string(fields[2]);
    entry.source = std::string(fields[3]);
    entry.cubin = std::string(fields[4]);
    entry.resources = std::move(*resources);
    return entry;
}

}  // namespace coda
