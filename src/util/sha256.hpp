// SHA-256 (FIPS 180-4), for cache keys and the checksums of cached binaries: a stable hash that does not
// depend on the compiler or platform, unlike std::hash.
#pragma once

#include <string>
#include <string_view>

namespace coda {

// The digest of `data` as 64 lowercase hex characters.
std::string sha256_hex(std::string_view data);

}  // namespace coda
