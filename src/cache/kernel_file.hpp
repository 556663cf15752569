// The on-disk format of one cache entry (<dir>/<key>.kernel): a magic, the format version, the key, the
// field lengths, the fields, then a SHA-256 of everything before it. Decoding trusts nothing in the file.
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include "cache/cache_entry.hpp"

namespace coda {

// The bytes of the file for `entry` under `key`. Integers are little-endian whatever the host, so a cache
// directory can be shared between machines.
std::string encode_kernel_file(const std::string& key, const CacheEntry& entry);

// The entry stored in `bytes`, or a one-line reason why they are not a valid entry for `expected_key`
// (bad magic, other format version, truncated, checksum mismatch, other key). Every length read from the
// file is checked against the bytes actually present before it is used.
std::variant<CacheEntry, std::string> decode_kernel_file(std::string_view bytes, std::string_view expected_key);

}  // namespace coda
