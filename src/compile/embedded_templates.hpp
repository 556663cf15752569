// The headers of templates/, embedded into the library at build time (cmake/embed_templates.cmake).
#pragma once

#include <string>
#include <vector>

namespace coda {

struct EmbeddedTemplate {
    std::string path;     // relative to templates/, e.g. "coda/portable_gemm.cuh"
    std::string content;
};

const std::vector<EmbeddedTemplate>& embedded_templates();

}  // namespace coda
