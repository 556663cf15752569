// Graph hash: SHA-256 over the canonical text, so it is stable across compilers, platforms and runs
// (unlike std::hash) and changes whenever the printed graph changes.
#include "ir/hash.hpp"

#include "ir/text.hpp"
#include "util/sha256.hpp"

namespace coda {

std::string graph_hash(const Graph& g) { return sha256_hex(to_text(g)).substr(0, 16); }

}  // namespace coda
