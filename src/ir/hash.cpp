// Graph hash: SHA-256 over the canonical text, so it is stable across compilers, platforms and runs
// (unlike std::hash) and changes whenever the printed graph changes.
#include "ir/hash.hpp"

#include "ir/text.hpp"
#include "util/sha256.hpp"

namespace coda {

std::string text_hash(const std::string& canonical_text) { return sha256_hex(canonical_text).substr(0, 16); }

std::string graph_hash(const Graph& g) { return text_hash(to_text(g)); }

}  // namespace coda
