// Runtime::default_config and the decision behind it. Runtime::compile asks on every call (the config is part
// of its fast-path key), so this is a memory lookup: the tuning database is read only when its file changed,
// and each graph is hashed once.
#include "runtime/config_choice.hpp"

#include <map>
#include <memory>
#include <mutex>

#include "coda/error.hpp"
#include "driver/cuda_driver.hpp"
#include "ir/hash.hpp"
#include "util/arch.hpp"
#include "util/log.hpp"

namespace coda {
namespace {

// H100 SXM and H200 have 132 SMs: the wave size to assume when no device says otherwise.
constexpr int kHopperDefaultSms = 132;

// graph_hash prints and hashes the whole graph (microseconds); a compile loop asks for the same graph again and
// again. Keyed like the runtime's fast path: graphs only grow, so (storage, node count) names one graph for as
// long as the storage lives.
class GraphHashMemo {
public:
    std::string hash(const Graph& graph) {
        const std::weak_ptr<const void> storage = graph.storage();
        const Key key{storage.lock().get(), graph.nodes().size()};
        std::lock_guard<std::mutex> lock(mutex_);
        if (auto it = memo_.find(key); it != memo_.end()) {
            if (!it->second.storage.expired()) return it->second.hash;
            memo_.erase(it);
        }
        constexpr std::size_t kPruneAbove = 256;  // drop entries of graphs that are gone, now and then
        if (memo_.size() > kPruneAbove)
            for (auto it = memo_.begin(); it != memo_.end();)
                it = it->second.storage.expired() ? memo_.erase(it) : std::next(it);
        Entry& entry = memo_[key];
        entry = Entry{storage, graph_hash(graph)};
        return entry.hash;
    }

private:
    using Key = std::pair<const void*, std::size_t>;
    struct Entry {
        std::weak_ptr<const void> storage;
        std::string hash;
    };
    std::mutex mutex_;
    std::map<Key, Entry> memo_;
};

GraphHashMemo& graph_hash_memo() {
    static GraphHashMemo memo;
    return memo;
}

// The process's view of the tuning database: created on first use from settings, shared by every Runtime call.
TuningDbWatcher& process_tuning_db() {
    static TuningDbWatcher watcher(tuning_file());
    return watcher;
}

// The current device when it is the one `arch` is compiled for; never creates a context without a GPU.
TargetDevice device_for(const std::string& arch) {
    Driver& driver = Driver::instance();
    if (!driver.available()) return {};
    try {
        driver.ensure_context();
        const Driver::DeviceInfo info = driver.current_device();
        if (info.arch != arch) return {};
        return {info.name, info.sm_count};
    } catch (const Error& e) {
        // Compiling does not need the device; the launch that does will report the problem.
        logger("coda.tune")->debug("no device for choosing a config: {}", e.what());
        return {};
    }
}

}  // namespace

KernelConfig hopper_heuristic(const ProblemShape& shape, int sm_count, bool reads_tile_inputs) {
    // From `coda bench gemm` on an H200 (docs/PERFORMANCE.md, 2026-12-02): cooperative 128 x 256 tiles do the
    // most work per byte of shared memory and win when each tile's mainloop is long (K large, or M moderate).
    // Ping-pong 128 x 128 wins when mainloops are short relative to the epilogue and the per-tile prologue
    // (narrow outputs, N <= 2048; tall problems with K <= 4096), because one consumer's epilogue runs while the
    // other computes; and when 128 x 256 tiles would leave SMs idle (fewer tiles than SMs). 2-CTA clusters
    // (cluster=2) measured no faster beyond run-to-run noise on the shape set (2026-12-03): neither default uses them.
    // Epilogues that read tile inputs (out-proj's residual): ping-pong 128 x 128 at every shape. Its shared memory
    // leaves room to stage the inputs by TMA and its epilogue overlaps the other consumer's mainloop; the
    // cooperative tiles read them from global memory with the tensor cores idle. Measured 2026-12-03 on an H200
    // (docs/PERFORMANCE.md): at the 7 benchmark shapes where the rules below pick cooperative 128 x 256, out-proj
    // on ping-pong took 0.79-0.93x its time at 6 and 1.002x at the seventh (4096 x 4096 x 14336).
    const KernelConfig big = hopper_config(128, 256, 4, Schedule::Cooperative);
    const KernelConfig pingpong = hopper_config(128, 128, 6, Schedule::PingPong);
    if (reads_tile_inputs) return pingpong;
    if (shape.m <= 0 || shape.n <= 0) return big;
    const std::int64_t tiles = (shape.m + big.bm - 1) / big.bm * ((shape.n + big.bn - 1) / big.bn);
    const int sms = sm_count > 0 ? sm_count : kHopperDefaultSms;
    if (tiles < sms || shape.n <= 2048) return pingpong;
    if (shape.m >= 8192 && shape.k > 0 && shape.k <= 4096) return pingpong;
    return big;
}

KernelConfig choose_config(const Graph& graph, const std::string& arch, const ProblemShape& shape,
                           const TargetDevice& device, const TuningDb* db) {
    // Tile programs and finalizers have a fixed tile; their templates ignore the config.
    if (graph.domain() != Domain::Gemm) return KernelConfig{};
    // The portable mainloop's all-round tile: 128 x 128 x 32, four warps of 64 x 64, four stages.
    if (arch != kHopperArch) return KernelConfig{};
    if (db != nullptr && !device.name.empty() && !db->records().empty()) {
        const std::string cls = shape_class(shape);
        // Most lookups miss on GPU or shape class; only a possible hit pays for the graph's hash.
        if (db->has(device.name, cls))
            if (const TuningRecord* r = db->find(device.name, graph_hash_memo().hash(graph), cls)) return r->config;
    }
    bool reads_tile_inputs = false;
    for (const Node& n : graph.nodes()) reads_tile_inputs = reads_tile_inputs || n.op == Op::TileInput;
    return hopper_heuristic(shape, device.sm_count, reads_tile_inputs);
}

KernelConfig default_config_on(const Graph& graph, const std::string& arch, const ProblemShape& shape,
                               const TargetDevice& device) {
    if (graph.domain() != Domain::Gemm || arch != kHopperArch || device.name.empty())
        return choose_config(graph, arch, shape, device, nullptr);
    const std::shared_ptr<const TuningDb> db = process_tuning_db().current();
    return choose_config(graph, arch, shape, device, db.get());
}

KernelConfig Runtime::default_config(const Graph& graph, const std::string& arch, const ProblemShape& shape) const {
    const bool asks_device = graph.domain() == Domain::Gemm && arch == kHopperArch;
    return default_config_on(graph, arch, shape, asks_device ? device_for(arch) : TargetDevice{});
}

}  // namespace coda
