// The counters behind pass_counts(): two relaxed atomics, read only by tests.
#include "ir/pass_counts.hpp"

#include <atomic>

namespace coda::detail {
namespace {

std::atomic<std::int64_t> text_renderings{0};
std::atomic<std::int64_t> typings{0};

}  // namespace

PassCounts pass_counts() {
    return {text_renderings.load(std::memory_order_relaxed), typings.load(std::memory_order_relaxed)};
}

void count_text_rendering() { text_renderings.fetch_add(1, std::memory_order_relaxed); }

void count_typing() { typings.fetch_add(1, std::memory_order_relaxed); }

}  // namespace coda::detail
