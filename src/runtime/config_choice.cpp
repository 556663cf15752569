// Runtime::default_config and the decision behind it. Runtime::compile asks on every call (the config is part
// of its fast-path key), so this is a memory lookup: the tuning database is read only when its file changed,
// and each graph is hashed once (memoized_identity, which the build that follows reuses).
#include "runtime/config_choice.hpp"

#include "coda/error.hpp"
#include "driver/cuda_driver.hpp"
#include "ir/prepared_graph.hpp"
#include "mainloop/mainloops.hpp"
#include "tune/builtin_tuning.hpp"
#include "util/log.hpp"

namespace coda {
namespace {

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

std::optional<KernelConfig> choose_config(const Graph& graph, const std::string& arch, const ProblemShape& shape,
                                          const TargetDevice& device, const TuningDb* db, const TuningDb* shipped) {
    // Tile programs and finalizers have a fixed tile.
    if (graph.domain() != Domain::Gemm) return std::nullopt;
    const Mainloop& mainloop = default_gemm_mainloop(arch);
    // The user's records first, then the shipped ones. Most lookups miss on GPU or shape class; only a possible hit
    // pays for the graph's hash, and the shape class is spelled only where a database holds records.
    std::optional<std::string> cls;
    for (const TuningDb* records : {db, shipped}) {
        if (records == nullptr || device.name.empty() || records->records().empty()) continue;
        if (!cls) cls = shape_class(shape);
        if (!records->has(device.name, *cls)) continue;
        if (const TuningRecord* r = records->find(device.name, memoized_identity(graph)->hash, *cls))
            if (mainloop.owns(r->config)) return r->config;
    }
    return mainloop.default_config(graph, shape);
}

std::optional<KernelConfig> default_config_on(const Graph& graph, const std::string& arch, const ProblemShape& shape,
                                              const TargetDevice& device) {
    if (graph.domain() != Domain::Gemm || device.name.empty()) return choose_config(graph, arch, shape, device, nullptr);
    const std::shared_ptr<const TuningDb> db = process_tuning_db().current();
    return choose_config(graph, arch, shape, device, db.get(), &builtin_tuning_db());
}

std::optional<KernelConfig> Runtime::default_config(const Graph& graph, const std::string& arch,
                                                    const ProblemShape& shape) const {
    return default_config_on(graph, arch, shape, graph.domain() == Domain::Gemm ? device_for(arch) : TargetDevice{});
}

}  // namespace coda
