// Runtime::instance(), coda's one global: owns the kernel cache and the modules loaded per context.
// Kernel::launch is the hot path: check the arguments on the host, then one cuLaunchKernel.
#include "coda/runtime.hpp"

#include <tuple>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "coda/error.hpp"
#include "config/settings.hpp"
#include "driver/cuda_driver.hpp"
#include "ir/check_graph.hpp"
#include "runtime/launch_plan.hpp"
#include "runtime/pipeline.hpp"

namespace coda {

struct LoadedKernel {
    explicit LoadedKernel(CheckedGraph g) : checked(std::move(g)) {}
    CheckedGraph checked;
    KernelConfig config;
    TileShape tile;
    BuildReport report;
    std::string source;
    ModuleHandle module;
    CUfunction function = nullptr;
    int threads = 0;
    int smem_bytes = 0;
};

// The fast path of Runtime::compile: the same graph object (same node count), options and context as an
// earlier call. The Graph copy held in the key keeps its storage alive, so its address cannot be reused.
struct FastKey {
    Graph graph;
    std::size_t nodes;
    std::string arch;
    std::string config;
    CUcontext context;
    bool operator<(const FastKey& o) const {
        return std::forward_as_tuple(graph_id(), nodes, arch, config, context) <
               std::forward_as_tuple(o.graph_id(), o.nodes, o.arch, o.config, o.context);
    }
    const void* graph_id() const { return graph.identity(); }
};

struct Runtime::State {
    std::mutex mutex;
    std::unique_ptr<KernelCache> cache;
    // Loaded modules by (cache key, context): a module belongs to the context it was loaded in.
    std::map<std::pair<std::string, CUcontext>, std::shared_ptr<const LoadedKernel>> loaded;
    std::map<FastKey, std::shared_ptr<const LoadedKernel>> fast;
    // The arch of each context's device, looked up once.
    std::map<CUcontext, std::string> arch_of_context;

    KernelCache& kernel_cache() {
        if (!cache) cache = std::make_unique<KernelCache>(settings().cache_dir, settings().disk_cache);
        return *cache;
    }
};

namespace {

TileShape tile_shape(Domain domain, const KernelConfig& config) {
    switch (domain) {
        case Domain::Gemm: return {config.bm, config.bn};
        case Domain::Tile: return {kTileProgramBM, kTileProgramBN};
        case Domain::Finalize: return {1, 1};
    }
    return {1, 1};
}

BuildReport make_report(const BuiltKernel& built) {
    BuildReport r;
    r.kernel_name = built.name;
    r.arch = built.arch;
    r.cache_key = built.key;
    switch (built.cached.hit) {
        case CacheHit::Memory: r.from = BuildReport::From::Memory; break;
        case CacheHit::Disk: r.from = BuildReport::From::Disk; break;
        case CacheHit::Built: r.from = BuildReport::From::Compiled; break;
    }
    r.seconds = built.seconds;
    for (const ResourceUsage& u : built.cached.entry->resources) {
        if (u.function != built.cached.entry->kernel_name) continue;
        r.registers = u.registers;
        r.spill_bytes = u.spill_store_bytes + u.spill_load_bytes;
        r.stack_frame_bytes = u.stack_frame_bytes;
    }
    return r;
}

KernelConfig resolve_config(const Runtime& rt, const Graph& graph, const std::string& arch, const CompileOptions& o) {
    return o.use_default_config ? rt.default_config(graph, arch) : o.config;
}

}  // namespace

Runtime::Runtime() : state_(std::make_unique<State>()) {}
Runtime::~Runtime() = default;

Runtime& Runtime::instance() {
    static Runtime runtime;
    return runtime;
}

KernelConfig Runtime::default_config(const Graph&, const std::string&) const {
    // The portable mainloop's all-round tile: 128 x 128 x 32, four warps of 64 x 64, four stages.
    return KernelConfig{};
}

std::string Runtime::source(const Graph& graph, const std::string& arch, const CompileOptions& options) {
    const KernelConfig config = resolve_config(*this, graph, arch, options);
    return generate_kernel_source(check_graph(graph), config, arch).source;
}

BuildReport Runtime::warm(const Graph& graph, const std::string& arch, const CompileOptions& options) {
    const KernelConfig config = resolve_config(*this, graph, arch, options);
    KernelCache* cache = nullptr;
    {
        std::lock_guard<std::mutex> lock(state_->mutex);
        cache = &state_->kernel_cache();
    }
    return make_report(build_kernel(graph, config, arch, *cache));
}

Kernel Runtime::compile(const Graph& graph, const CompileOptions& options) {
    Driver& driver = Driver::instance();
    driver.ensure_context();
    const CUcontext context = driver.current_context();
    std::string arch = options.arch.empty() ? settings().arch : options.arch;

    std::unique_lock<std::mutex> lock(state_->mutex);
    if (arch.empty()) {
        auto& known = state_->arch_of_context[context];
        if (known.empty()) known = driver.current_device().arch;
        arch = known;
    }
    const KernelConfig config = resolve_config(*this, graph, arch, options);
    FastKey fast_key{graph, graph.nodes().size(), arch, config.to_text(), context};
    if (auto it = state_->fast.find(fast_key); it != state_->fast.end()) {
        Kernel kernel;
        kernel.impl_ = it->second;
        return kernel;
    }
    KernelCache& cache = state_->kernel_cache();
    lock.unlock();  // compiles of different kernels may run in parallel
    BuiltKernel built = build_kernel(graph, config, arch, cache);

    lock.lock();
    auto& slot = state_->loaded[{built.key, context}];
    if (!slot) {
        auto loaded = std::make_shared<LoadedKernel>(built.checked);
        loaded->config = config;
        loaded->tile = tile_shape(graph.domain(), config);
        loaded->report = make_report(built);
        loaded->source = built.cached.entry->source;
        loaded->module = ModuleHandle(built.cached.entry->cubin);
        loaded->function = driver.function(loaded->module.get(), built.cached.entry->kernel_name);
        int info[2] = {0, 0};
        driver.read_global(loaded->module.get(), "coda_kernel_info", info, sizeof info);
        loaded->threads = info[0];
        loaded->smem_bytes = info[1];
        if (loaded->smem_bytes > 48 * 1024) driver.set_dynamic_smem(loaded->function, loaded->smem_bytes);
        slot = std::move(loaded);
    }
    state_->fast[fast_key] = slot;
    Kernel kernel;
    kernel.impl_ = slot;
    return kernel;
}

void Kernel::launch(const Args& args, CUstream_st* stream) const {
    if (!impl_) throw Error("launch of an empty coda::Kernel; get one from Runtime::compile");
    const LoadedKernel& k = *impl_;
    LaunchPlan plan = plan_launch(k.checked, k.tile, args, k.report.kernel_name);
    void* problem = nullptr;
    switch (k.checked.graph.domain()) {
        case Domain::Gemm: problem = &plan.gemm; break;
        case Domain::Tile: problem = &plan.tile; break;
        case Domain::Finalize: problem = &plan.finalize; break;
    }
    void* params[2] = {problem, plan.slots.data()};
    Driver::instance().launch(k.function, plan.grid_x, plan.grid_y, 1, static_cast<unsigned>(k.threads),
                              static_cast<unsigned>(k.smem_bytes), stream, params);
}

const Graph& Kernel::graph() const { return impl_->checked.graph; }
const KernelConfig& Kernel::config() const { return impl_->config; }
const BuildReport& Kernel::report() const { return impl_->report; }
const std::string& Kernel::source() const { return impl_->source; }

std::vector<std::int64_t> Kernel::partials_shape(const std::string& name, std::int64_t m, std::int64_t n) const {
    for (const Binding& b : impl_->checked.bindings)
        if (b.name == name) return coda::partials_shape(b, impl_->tile, m, n);
    throw Error(fmt::format("kernel '{}' has no binding named '{}'", impl_->report.kernel_name, name));
}

}  // namespace coda
