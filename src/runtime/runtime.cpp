// Runtime::instance(), coda's one global: owns the kernel cache and the modules loaded per context.
// Kernel::launch is the hot path: check the arguments on the host, then one cuLaunchKernel through the mainloop.
#include "coda/runtime.hpp"

#include <array>
#include <map>
#include <mutex>
#include <tuple>

#include <fmt/format.h>

#include "coda/error.hpp"
#include "config/settings.hpp"
#include "driver/cuda_driver.hpp"
#include "ir/check_graph.hpp"
#include "ir/graph_access.hpp"
#include "mainloop/mainloops.hpp"
#include "runtime/config_choice.hpp"
#include "runtime/launch_plan.hpp"
#include "runtime/pipeline.hpp"
#include "util/log.hpp"

namespace coda {

struct LoadedKernel {
    explicit LoadedKernel(CheckedGraph g) : checked(std::move(g)) {}
    CheckedGraph checked;
    const Mainloop* mainloop = nullptr;
    std::optional<KernelConfig> config;
    std::string arch;
    BuildReport report;
    std::string source;
    CUcontext context = nullptr;  // the context the module was loaded in; launches must come from it
    ModuleHandle module;
    KernelInfo info{};
    std::unique_ptr<Launcher> launcher;
    // The kernels of fallback configs (Mainloop::fallback_config), for launches this one cannot run, by config
    // text (compiled on first need): the Hopper mainloop's direct variant, or another mainloop's kernel.
    mutable std::mutex fallback_mutex;
    mutable std::map<std::string, std::shared_ptr<const LoadedKernel>> fallbacks;

    TileShape tile() const { return {info.tile_m, info.tile_n}; }
};

namespace {

// A config as a tuple of ints, so that the fast path's key can order configs without printing them. One overload
// per KernelConfig alternative: a new mainloop's config does not compile here until it has one.
std::array<int, 9> order_of(const PortableConfig& p) {
    return {1, 1, p.bm, p.bn, p.bk, p.warps_m, p.warps_n, p.stages, 0};
}
std::array<int, 9> order_of(const HopperConfig& h) {
    return {1, 2, h.bm, h.bn, h.stages, static_cast<int>(h.schedule), h.cluster_m, h.cluster_n, h.direct ? 1 : 0};
}
std::array<int, 9> config_order(const std::optional<KernelConfig>& config) {
    if (!config) return {0, 0, 0, 0, 0, 0, 0, 0, 0};
    return std::visit([](const auto& c) { return order_of(c); }, config->alternatives());
}

}  // namespace

// The fast path of Runtime::compile: the same graph storage with the same node count, arch, config and context as
// an earlier call. The entry holds the storage weakly: once the user's graph is gone the entry is stale (its
// address may be reused) and is dropped.
struct FastKey {
    const void* storage;
    std::size_t nodes;
    std::string arch;
    std::array<int, 9> config;
    CUcontext context;
    bool operator<(const FastKey& o) const {
        return std::tie(storage, nodes, arch, config, context) < std::tie(o.storage, o.nodes, o.arch, o.config, o.context);
    }
};

struct FastEntry {
    std::weak_ptr<const void> storage;
    std::shared_ptr<const LoadedKernel> kernel;
};

struct Runtime::State {
    std::mutex mutex;
    std::unique_ptr<KernelCache> cache;
    // Loaded modules by (cache key, context): a module belongs to the context it was loaded in.
    std::map<std::pair<std::string, CUcontext>, std::shared_ptr<const LoadedKernel>> loaded;
    std::map<FastKey, FastEntry> fast;
    // Each context's device (name, SM count, arch), looked up once.
    std::map<CUcontext, Driver::DeviceInfo> device_of_context;

    KernelCache& kernel_cache() {
        if (!cache) cache = std::make_unique<KernelCache>(settings().cache_dir, settings().disk_cache);
        return *cache;
    }
};

namespace {

BuildReport make_report(const BuiltKernel& built) {
    BuildReport r;
    r.kernel_name = built.name;
    r.arch = built.target.arch;
    r.cache_key = built.key;
    switch (built.cached.hit) {
        case CacheHit::Memory: r.from = BuildReport::From::Memory; break;
        case CacheHit::Disk: r.from = BuildReport::From::Disk; break;
        case CacheHit::Built: r.from = BuildReport::From::Compiled; break;
    }
    r.seconds = built.seconds;
    if (const ResourceUsage* u = built.cached.entry->kernel_usage()) {
        r.registers = u->registers;
        r.spill_bytes = u->spill_store_bytes + u->spill_load_bytes;
        r.stack_frame_bytes = u->stack_frame_bytes;
    }
    return r;
}

// Loads a built kernel's module in the current context, reads what the kernel says about itself, and hands it to
// its mainloop, which checks the report against the config and makes the launcher.
std::shared_ptr<const LoadedKernel> load(const BuiltKernel& built, CUcontext context) {
    Driver& driver = Driver::instance();
    const Mainloop& mainloop = *built.target.mainloop;
    auto loaded = std::make_shared<LoadedKernel>(built.checked);
    loaded->mainloop = &mainloop;
    loaded->config = built.target.config;
    loaded->arch = built.target.arch;
    loaded->report = make_report(built);
    loaded->source = built.cached.entry->source;
    loaded->context = context;
    loaded->module = ModuleHandle(built.cached.entry->cubin);
    LoadedModule module;
    module.name = built.name;
    module.function = driver.function(loaded->module.get(), built.cached.entry->kernel_name);
    driver.read_global(loaded->module.get(), "coda_kernel_info", &module.info, sizeof module.info);
    const KernelInfo& info = module.info;
    if (info.version != kKernelInfoVersion || info.kernel != mainloop.kind() || info.threads <= 0)
        throw InternalError(fmt::format("kernel '{}' reports kernel-info version {}, kind {} and {} threads; the host "
                                        "expected version {} and kind {} of the {} mainloop",
                                        built.name, info.version, static_cast<int>(info.kernel), info.threads,
                                        kKernelInfoVersion, static_cast<int>(mainloop.kind()), mainloop.name()));
    constexpr int kDefaultSmemLimit = 48 * 1024;  // beyond this a kernel must opt in to more dynamic smem
    if (info.smem_bytes > kDefaultSmemLimit) driver.set_dynamic_smem(module.function, info.smem_bytes);
    loaded->info = info;
    loaded->launcher = mainloop.load(module, loaded->checked, loaded->config);
    return loaded;
}

// The arch a request compiles for: the options', else CODA_ARCH's, else `device_arch` (empty when unknown).
std::string requested_arch(const CompileOptions& options, const std::string& device_arch = {}) {
    if (!options.arch.empty()) return options.arch;
    if (!settings().arch.empty()) return settings().arch;
    return device_arch;
}

// The arch for warm() and source(), which need no GPU: as above, asking the driver only when one is present.
std::string arch_without_gpu(const CompileOptions& options, const Graph& graph) {
    std::string arch = requested_arch(options);
    Driver& driver = Driver::instance();
    if (arch.empty() && driver.available()) {
        driver.ensure_context();
        arch = driver.current_device().arch;
    }
    if (arch.empty())
        throw Error(fmt::format("graph '{}': no arch to compile for: there is no GPU here and neither "
                                "CompileOptions::arch nor CODA_ARCH names one (e.g. \"sm_90a\")",
                                graph.name()));
    return arch;
}

BuildTarget target_for(const Runtime& rt, const Graph& graph, const std::string& arch, const CompileOptions& o) {
    BuildTarget t;
    t.arch = arch;
    t.config = o.config ? o.config : rt.default_config(graph, arch, o.shape);
    t.mainloop = &mainloop_for(graph, t.config, arch);
    return t;
}

}  // namespace

Runtime::Runtime() : state_(std::make_unique<State>()) {}
Runtime::~Runtime() = default;

Runtime& Runtime::instance() {
    static Runtime runtime;
    return runtime;
}

std::string Runtime::source(const Graph& graph, const CompileOptions& options) {
    const BuildTarget target = target_for(*this, graph, arch_without_gpu(options, graph), options);
    return generate_kernel_source(prepare_graph(graph), *target.mainloop, target.config, target.arch).source;
}

BuildReport Runtime::warm(const Graph& graph, const CompileOptions& options) {
    const BuildTarget target = target_for(*this, graph, arch_without_gpu(options, graph), options);
    KernelCache* cache = nullptr;
    {
        std::lock_guard<std::mutex> lock(state_->mutex);
        cache = &state_->kernel_cache();
    }
    return make_report(build_kernel(graph, target, *cache));
}

Kernel Runtime::compile(const Graph& graph, const CompileOptions& options) {
    Driver& driver = Driver::instance();
    // Graph mistakes come first, also on a machine without a GPU (the fast path below needs a context).
    if (!driver.available()) check_graph(graph);
    const CUcontext context = driver.ensure_context();  // one driver call on the fast path

    std::unique_lock<std::mutex> lock(state_->mutex);
    Driver::DeviceInfo& device = state_->device_of_context[context];
    if (device.arch.empty()) device = driver.current_device();
    const std::string arch = requested_arch(options, device.arch);
    // The default config from the device known for this context, not asked of the driver on every call; a
    // tuned record applies only when compiling for that device's own arch.
    const TargetDevice on = device.arch == arch ? TargetDevice{device.name, device.sm_count} : TargetDevice{};
    const std::optional<KernelConfig> config = options.config ? options.config
                                                              : default_config_on(graph, arch, options.shape, on);
    const std::weak_ptr<const void> storage = detail::GraphAccess::storage(graph);
    const FastKey fast_key{storage.lock().get(), graph.nodes().size(), arch, config_order(config), context};
    Kernel kernel;
    kernel.pinned_ = options.config.has_value();
    if (auto it = state_->fast.find(fast_key); it != state_->fast.end()) {
        if (!it->second.storage.expired()) {
            kernel.impl_ = it->second.kernel;
            return kernel;
        }
        state_->fast.erase(it);
    }
    KernelCache& cache = state_->kernel_cache();
    lock.unlock();  // compiles of different kernels may run in parallel
    const BuildTarget target{arch, &mainloop_for(graph, config, arch), config};
    BuiltKernel built = build_kernel(graph, target, cache);

    lock.lock();
    auto& slot = state_->loaded[{built.key, context}];
    if (!slot) slot = load(built, context);
    for (auto it = state_->fast.begin(); it != state_->fast.end();)
        it = it->second.storage.expired() ? state_->fast.erase(it) : std::next(it);
    state_->fast[fast_key] = FastEntry{storage, slot};
    kernel.impl_ = slot;
    return kernel;
}

const LoadedKernel& Kernel::loaded() const {
    if (!impl_) throw Error("this coda::Kernel is empty (default-constructed); get one from Runtime::compile");
    return *impl_;
}

// The kernel that runs `plan` for `k`, which cannot (`why`): the fallback config's for `k`'s graph, compiled (or
// found in the cache) on first need. A variant of k's own config (same mainloop) is taken even when the user gave the
// config (`pinned`); another mainloop's is not.
const LoadedKernel* Kernel::fallback_of(const LoadedKernel& k, const LaunchPlan& plan, const std::string& why,
                                        bool pinned) {
    const std::optional<KernelConfig> config = k.config ? k.mainloop->fallback_config(*k.config, plan) : std::nullopt;
    if (!config) return nullptr;
    const bool variant = &mainloop_of(*config) == k.mainloop;
    if (pinned && !variant) return nullptr;
    const std::string text = config->to_text();
    std::lock_guard<std::mutex> lock(k.fallback_mutex);
    std::shared_ptr<const LoadedKernel>& slot = k.fallbacks[text];
    if (!slot) {
        if (variant)
            logger("coda.runtime")
                ->info("kernel '{}' ({}): {}; this launch and others like it run on config '{}' (compiled now)",
                       k.report.kernel_name, k.config->to_text(), why, text);
        else
            logger("coda.runtime")
                ->warn("kernel '{}' ({} mainloop): {}; this launch and others like it run on the {} mainloop instead "
                       "(config '{}'), which is slower; pass a config to CompileOptions to make this an error",
                       k.report.kernel_name, k.mainloop->name(), why, mainloop_of(*config).name(), text);
        CompileOptions options;
        options.arch = k.arch;
        options.config = config;
        slot = Runtime::instance().compile(k.checked.graph, options).impl_;
    }
    return slot.get();
}

namespace {

// Launches must come from the context the kernel's module was loaded in. A thread with no current context gets device
// 0's primary one, as Runtime::compile binds it (Driver::ensure_context): PyTorch's autograd worker has none until its
// first CUDA runtime call, and a backward pass may launch a coda kernel first.
void expect_context(const LoadedKernel& k) {
    const CUcontext current = Driver::instance().ensure_context();
    if (current != k.context)
        throw Error(fmt::format("kernel '{}' was loaded in another CUDA context (another device or context) than the "
                                "calling thread's; call Runtime::compile with that context current to get its kernel",
                                k.report.kernel_name));
}

// Names the kernel in a launch's driver error.
template <class Launch>
void launch_naming(const LoadedKernel& run, Launch&& launch) {
    try {
        launch();
    } catch (const Error& e) {
        throw Error(fmt::format("kernel '{}' ({}): {}", run.report.kernel_name, run.report.arch, e.what()));
    }
}

}  // namespace

const LoadedKernel& Kernel::runner(const LaunchPlan& plan) const {
    const LoadedKernel& k = loaded();
    const std::string why = k.launcher->unsupported(plan);
    if (why.empty()) return k;
    const LoadedKernel* fallback = fallback_of(k, plan, why, pinned_);
    const bool could_fall_back = k.config && k.mainloop->fallback_config(*k.config).has_value() &&
                                 size_of(k.checked.graph.spec().input) == 2;
    if (fallback == nullptr)
        throw Error(fmt::format("kernel '{}' ({}): {}{}", k.report.kernel_name, k.mainloop->key_text(k.config), why,
                                could_fall_back ? "; without a config in CompileOptions coda runs such launches on "
                                                  "another mainloop (or pass one that takes these operands)"
                                                : ""));
    if (const std::string also = fallback->launcher->unsupported(plan); !also.empty())
        throw Error(fmt::format("kernel '{}' ({}): {}", fallback->report.kernel_name,
                                fallback->mainloop->key_text(fallback->config), also));
    return *fallback;
}

void Kernel::launch(const Args& args, CUstream_st* stream) const {
    const LoadedKernel& k = loaded();
    const LaunchPlan plan = plan_launch(k.checked, k.tile(), args, k.report.kernel_name);
    expect_context(k);
    const LoadedKernel& run = runner(plan);
    launch_naming(run, [&] { run.launcher->launch(plan, stream); });
}

struct BoundLaunch::State {
    Kernel kernel;
    const LoadedKernel* run = nullptr;  // the kernel's own, or its fallback (which the kernel holds)
    std::unique_ptr<PackedLaunch> packed;

    // Packs a checked plan for the kernel that runs it.
    void pack(const LaunchPlan& plan) {
        const LoadedKernel& runs = kernel.runner(plan);
        auto p = std::make_unique<PackedLaunch>();
        p->plan = plan;
        launch_naming(runs, [&] { runs.launcher->pack(*p); });
        run = &runs;
        packed = std::move(p);
    }
};

BoundLaunch Kernel::bind(const Args& args) const {
    const LoadedKernel& k = loaded();
    const LaunchPlan plan = plan_launch(k.checked, k.tile(), args, k.report.kernel_name);
    expect_context(k);  // a fallback compiles for the current context
    BoundLaunch bound;
    bound.state_ = std::make_unique<BoundLaunch::State>();
    bound.state_->kernel = *this;
    bound.state_->pack(plan);
    return bound;
}

BoundLaunch::BoundLaunch() = default;
BoundLaunch::BoundLaunch(BoundLaunch&&) noexcept = default;
BoundLaunch& BoundLaunch::operator=(BoundLaunch&&) noexcept = default;
BoundLaunch::~BoundLaunch() = default;

const Kernel& BoundLaunch::kernel() const {
    if (!state_) throw Error("this coda::BoundLaunch is empty (default-constructed or moved from); get one from Kernel::bind");
    return state_->kernel;
}

void BoundLaunch::launch(CUstream_st* stream) const {
    const LoadedKernel& k = kernel().loaded();
    expect_context(k);
    const State& s = *state_;
    launch_naming(*s.run, [&] { s.packed->launch(stream); });
}

BoundLaunch& BoundLaunch::rebind(const std::string& name, const void* data) {
    const LoadedKernel& k = kernel().loaded();
    LaunchPlan plan = state_->packed->plan;
    rebind_pointer(k.checked, plan, name, data, k.report.kernel_name);
    state_->pack(plan);
    return *this;
}

BoundLaunch& BoundLaunch::rebind(const std::string& name, float value) {
    const LoadedKernel& k = kernel().loaded();
    LaunchPlan plan = state_->packed->plan;
    rebind_scalar(k.checked, plan, name, value, k.report.kernel_name);
    state_->pack(plan);
    return *this;
}

BoundLaunch& BoundLaunch::rebind(const std::string& name, const DeviceScalar& value) {
    const LoadedKernel& k = kernel().loaded();
    LaunchPlan plan = state_->packed->plan;
    rebind_scalar(k.checked, plan, name, value, k.report.kernel_name);
    state_->pack(plan);
    return *this;
}

const Graph& Kernel::graph() const { return loaded().checked.graph; }
const std::optional<KernelConfig>& Kernel::config() const { return loaded().config; }
const BuildReport& Kernel::report() const { return loaded().report; }
TileShape Kernel::tile() const { return loaded().tile(); }
const std::string& Kernel::source() const { return loaded().source; }

std::vector<std::int64_t> Kernel::partials_shape(const std::string& name, std::int64_t m, std::int64_t n) const {
    const LoadedKernel& k = loaded();
    for (const Binding& b : k.checked.bindings)
        if (b.name == name) return coda::partials_shape(b, k.tile(), m, n);
    throw Error(fmt::format("kernel '{}' has no binding named '{}'", k.report.kernel_name, name));
}

}  // namespace coda
