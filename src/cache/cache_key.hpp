// Cache keys: a SHA-256 over everything that determines a kernel's cubin (graph, tile config, the generated source,
// templates, NVRTC version, arch, flags), so that a key hit can never hand back a kernel built from other inputs,
// also after an upgrade of coda's code generator.
#pragma once

#include <string>
#include <vector>

namespace coda {

// Bumped whenever the on-disk entry format or the key recipe changes; old entries then simply miss.
constexpr int kCacheFormatVersion = 3;

struct CacheKeyParts {
    std::string graph_text;       // canonical text of the graph
    std::string config_text;      // canonical text of the tile configuration
    std::string source_digest;    // SHA-256 of the whole generated CUDA source: covers the code generator
    std::string template_digest;  // templates_digest()
    std::string nvrtc_version;    // nvrtc_version()
    std::string arch;             // e.g. "sm_90a"
    std::vector<std::string> flags;  // compile_flags(arch)
};

// SHA-256 (hex) over every embedded template, path and content; computed once per process.
std::string templates_digest();

// SHA-256 (hex, 64 characters) of a labelled, length-prefixed concatenation of the parts and
// kCacheFormatVersion: two different sets of parts never share a serialization. Only the parts enter the
// key: no path, host name or time, so every machine and cache directory agrees on it.
std::string cache_key(const CacheKeyParts& parts);

}  // namespace coda
