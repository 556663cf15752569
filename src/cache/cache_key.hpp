// Cache keys: a SHA-256 over everything that determines a kernel's cubin (the generated source, which holds the graph
// and the tile config, the templates, NVRTC version, arch, flags), so that a key hit can never hand back a kernel
// built from other inputs, also after an upgrade of coda's code generator.
#pragma once

#include <string>
#include <vector>

namespace coda {

// Bumped whenever the on-disk entry format or the key recipe changes; old entries then simply miss.
// 4: the key no longer repeats the graph's text and the config beside the source that holds both.
constexpr int kCacheFormatVersion = 4;

// The graph and its tile config enter through the source alone: its banner holds the graph's canonical text, hash and
// config, and its code everything generated from them (each line of the functor, the template's parameters).
struct CacheKeyParts {
    std::string source_digest;    // SHA-256 of the whole generated CUDA source: graph, config and code generator
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
