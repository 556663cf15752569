// KernelConfig::to_text: the canonical one-line form of a tile configuration. It appears in the banner of
// generated sources and in the cache key, so its spelling must never depend on anything but the fields.
#include "coda/kernel_config.hpp"

#include <fmt/format.h>

namespace coda {

std::string KernelConfig::to_text() const {
    return fmt::format("bm={} bn={} bk={} wm={} wn={} stages={}", bm, bn, bk, warps_m, warps_n, stages);
}

}  // namespace coda
