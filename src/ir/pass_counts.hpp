// How many times this process ran the two whole-graph passes a build needs: rendering the canonical text (to_text)
// and typing (type_graph, behind check_graph). Tests read them to hold a build to one of each; relaxed atomics, so
// counting costs an uncontended increment and orders nothing.
#pragma once

#include <cstdint>

namespace coda::detail {

struct PassCounts {
    std::int64_t text_renderings = 0;  // to_text(graph)
    std::int64_t typings = 0;          // type_graph(graph)
};

PassCounts pass_counts();
void count_text_rendering();
void count_typing();

}  // namespace coda::detail
