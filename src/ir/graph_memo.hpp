// A per-graph memo of values derived from a whole graph (its hash, its epilogue's cost), for decisions that run
// on every Runtime::compile call. Graphs only grow, so (storage, node count) names one graph for as long as its
// storage lives; entries of graphs that are gone are dropped now and then.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "coda/graph.hpp"
#include "ir/graph_access.hpp"

namespace coda {

template <class T>
class GraphMemo {
public:
    // The memoized compute(graph); compute runs outside the lock (it may be slow) and at most once per graph
    // unless two threads ask for a new graph at the same moment (both compute; the values are equal).
    template <class Compute>
    T get(const Graph& graph, Compute compute) {
        const std::weak_ptr<const void> storage = detail::GraphAccess::storage(graph);
        const Key key{storage.lock().get(), graph.nodes().size()};
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (auto it = memo_.find(key); it != memo_.end()) {
                if (!it->second.storage.expired()) return it->second.value;
                memo_.erase(it);
            }
        }
        T value = compute(graph);
        std::lock_guard<std::mutex> lock(mutex_);
        constexpr std::size_t kPruneAbove = 256;
        if (memo_.size() > kPruneAbove)
            for (auto it = memo_.begin(); it != memo_.end();)
                it = it->second.storage.expired() ? memo_.erase(it) : std::next(it);
        memo_[key] = Entry{storage, value};
        return value;
    }

private:
    using Key = std::pair<const void*, std::size_t>;
    struct Entry {
        std::weak_ptr<const void> storage;
        T value;
    };
    std::mutex mutex_;
    std::map<Key, Entry> memo_;
};

}  // namespace coda
