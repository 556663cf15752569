// Runtime::instance(), coda's one global: owns the kernel cache and the modules loaded per context.
// Kernel::launch is the hot path: check the arguments on the host, then one cuLaunchKernel.
#include "coda/runtime.hpp"

#include <tuple>
#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "coda/error.hpp"
#include "config/settings.hpp"
#include "driver/cuda_driver.hpp"
#include "ir/check_graph.hpp"
#include "runtime/config_choice.hpp"
#include "runtime/launch_plan.hpp"
#include "runtime/pipeline.hpp"
#include "runtime/tma_operands.hpp"
#include "util/log.hpp"

namespace coda {

struct LoadedKernel {
    explicit LoadedKernel(CheckedGraph g) : checked(std::move(g)) {}
    CheckedGraph checked;
    KernelConfig config;
    TileShape tile;
    BuildReport report;
    std::string source;
    CUcontext context = nullptr;  // the context the module was loaded in; launches must come from it
    ModuleHandle module;
    CUfunction function = nullptr;
    int threads = 0;
    int smem_bytes = 0;
    // The Hopper mainloop: persistent (at most one CTA per SM), operands through TMA tensor maps; with clusters
    // of `cluster` CTAs along M, at most max_ctas CTAs (the clusters that fit at once).
    bool hopper = false;
    int sm_count = 0;
    int cluster = 1;
    int max_ctas = 0;
    // The tensor maps of the last launch (operands and tile inputs), keyed by the problem and parameter slots they
    // were encoded for: training steps launch a kernel on the same buffers again and again, and encoding costs
    // more than the rest of the launch.
    TileTensorMaps tile_maps_plan;
    mutable std::mutex tma_mutex;
    mutable abi::GemmProblem tma_problem{};
    mutable std::vector<std::uint64_t> tma_slots;
    mutable TmaOperands tma{};
    mutable std::vector<CUtensorMap> tile_maps;
};

// The fast path of Runtime::compile: the same graph storage with the same node count, options and context
// as an earlier call. The entry holds the storage weakly: once the user's graph is gone the entry is stale
// (its address may be reused) and is dropped.
struct FastKey {
    const void* storage;
    std::size_t nodes;
    std::string arch;
    KernelConfig config;
    CUcontext context;
    bool operator<(const FastKey& o) const {
        const auto tie = [](const FastKey& k) {
            const KernelConfig& c = k.config;
            return std::tie(k.storage, k.nodes, k.arch, c.bm, c.bn, c.bk, c.warps_m, c.warps_n, c.stages, c.mainloop,
                            c.schedule, c.cluster_m, k.context);
        };
        return tie(*this) < tie(o);
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

// Loads a built kernel's module in the current context and reads back what the kernel says about itself.
std::shared_ptr<const LoadedKernel> load(const BuiltKernel& built, const KernelConfig& config, CUcontext context) {
    Driver& driver = Driver::instance();
    const Domain domain = built.checked.graph.domain();
    auto loaded = std::make_shared<LoadedKernel>(built.checked);
    loaded->config = config;
    loaded->tile = tile_shape(domain, config);
    loaded->report = make_report(built);
    loaded->source = built.cached.entry->source;
    loaded->context = context;
    loaded->module = ModuleHandle(built.cached.entry->cubin);
    loaded->function = driver.function(loaded->module.get(), built.cached.entry->kernel_name);
    // threads, dynamic smem bytes, tile rows, tile columns, mainloop (1: Hopper), pipeline stages, tile maps, tile
    // inputs loaded by TMA, chunk columns, CTAs of a cluster, tile outputs stored by TMA, rows of their box
    // (kernel_source.cpp)
    int info[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    driver.read_global(loaded->module.get(), "coda_kernel_info", info, sizeof info);
    loaded->threads = info[0];
    loaded->smem_bytes = info[1];
    loaded->hopper = info[4] == 1;
    if (loaded->hopper != (domain == Domain::Gemm && config.mainloop == Mainloop::Hopper))
        throw InternalError(fmt::format("kernel '{}' reports mainloop {}, the host expected config '{}'", built.name,
                                        info[4], config.to_text()));
    loaded->sm_count = driver.current_device().sm_count;
    loaded->cluster = info[9];
    if (loaded->cluster != (loaded->hopper ? config.cluster_m : 1))
        throw InternalError(fmt::format("kernel '{}' reports clusters of {} CTAs, the host expected config '{}'",
                                        built.name, info[9], config.to_text()));
    loaded->tile_maps_plan = TileTensorMaps{info[6], info[7] == 1, info[8], info[2], info[10], info[11]};
    if (loaded->hopper && (info[6] < 1 || info[6] > kMaxTileMaps))
        throw InternalError(fmt::format("kernel '{}' takes {} tile maps; the host passes 1 to {}", built.name, info[6],
                                        kMaxTileMaps));
    // The host cuts partials and sizes grids with its own copy of the tile; it must be the kernel's.
    if (info[0] <= 0 || (domain != Domain::Finalize && (info[2] != loaded->tile.bm || info[3] != loaded->tile.bn)))
        throw InternalError(fmt::format("kernel '{}' reports {} threads and a {}x{} tile; the host expected a {}x{} "
                                        "tile", built.name, info[0], info[2], info[3], loaded->tile.bm,
                                        loaded->tile.bn));
    constexpr int kDefaultSmemLimit = 48 * 1024;  // beyond this a kernel must opt in to more dynamic smem
    if (loaded->smem_bytes > kDefaultSmemLimit) driver.set_dynamic_smem(loaded->function, loaded->smem_bytes);
    loaded->max_ctas = loaded->sm_count;
    if (loaded->cluster > 1) {
        const int clusters =
            driver.max_active_clusters(loaded->function, static_cast<unsigned>(loaded->cluster),
                                       static_cast<unsigned>(loaded->threads), static_cast<unsigned>(loaded->smem_bytes));
        if (clusters < 1)
            throw Error(fmt::format("kernel '{}': no cluster of {} CTAs with {} bytes of shared memory each fits on this "
                                    "device; use a config with cluster=1",
                                    built.name, loaded->cluster, loaded->smem_bytes));
        loaded->max_ctas = clusters * loaded->cluster;
        logger("coda.runtime")->debug("{}: {} clusters of {} CTAs fit at once", built.name, clusters, loaded->cluster);
    }
    return loaded;
}

KernelConfig resolve_config(const Runtime& rt, const Graph& graph, const std::string& arch, const CompileOptions& o) {
    return o.use_default_config ? rt.default_config(graph, arch, o.shape) : o.config;
}

}  // namespace

Runtime::Runtime() : state_(std::make_unique<State>()) {}
Runtime::~Runtime() = default;

Runtime& Runtime::instance() {
    static Runtime runtime;
    return runtime;
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
    // Graph mistakes come first, also on a machine without a GPU (the fast path below needs a context).
    if (!driver.available()) check_graph(graph);
    driver.ensure_context();
    const CUcontext context = driver.current_context();
    std::string arch = options.arch.empty() ? settings().arch : options.arch;

    std::unique_lock<std::mutex> lock(state_->mutex);
    Driver::DeviceInfo& device = state_->device_of_context[context];
    if (device.arch.empty()) device = driver.current_device();
    if (arch.empty()) arch = device.arch;
    // The default config from the device known for this context, not asked of the driver on every call; a
    // tuned record applies only when compiling for that device's own arch.
    const TargetDevice target = device.arch == arch ? TargetDevice{device.name, device.sm_count} : TargetDevice{};
    const KernelConfig config =
        options.use_default_config ? default_config_on(graph, arch, options.shape, target) : options.config;
    const std::weak_ptr<const void> storage = graph.storage();
    const FastKey fast_key{storage.lock().get(), graph.nodes().size(), arch, config, context};
    if (auto it = state_->fast.find(fast_key); it != state_->fast.end()) {
        if (!it->second.storage.expired()) {
            Kernel kernel;
            kernel.impl_ = it->second.kernel;
            return kernel;
        }
        state_->fast.erase(it);
    }
    KernelCache& cache = state_->kernel_cache();
    lock.unlock();  // compiles of different kernels may run in parallel
    BuiltKernel built = build_kernel(graph, config, arch, cache);

    lock.lock();
    auto& slot = state_->loaded[{built.key, context}];
    if (!slot) slot = load(built, config, context);
    for (auto it = state_->fast.begin(); it != state_->fast.end();)
        it = it->second.storage.expired() ? state_->fast.erase(it) : std::next(it);
    state_->fast[fast_key] = FastEntry{storage, slot};
    Kernel kernel;
    kernel.impl_ = slot;
    return kernel;
}

const LoadedKernel& Kernel::loaded() const {
    if (!impl_) throw Error("this coda::Kernel is empty (default-constructed); get one from Runtime::compile");
    return *impl_;
}

void Kernel::launch(const Args& args, CUstream_st* stream) const {
    const LoadedKernel& k = loaded();
    LaunchPlan plan = plan_launch(k.checked, k.tile, args, k.report.kernel_name, k.hopper);
    Driver& driver = Driver::instance();
    CUcontext current = nullptr;
    driver.check(driver.api().cuCtxGetCurrent(&current), "cuCtxGetCurrent");
    if (current != k.context)
        throw Error(fmt::format("kernel '{}' was loaded in another CUDA context (another device or context) than the "
                                "calling thread's; call Runtime::compile with that context current to get its kernel",
                                k.report.kernel_name));
    void* problem = nullptr;
    switch (k.checked.graph.domain()) {
        case Domain::Gemm: problem = &plan.gemm; break;
        case Domain::Tile: problem = &plan.tile; break;
        case Domain::Finalize: problem = &plan.finalize; break;
    }
    // Copies of the cached maps, so that the launch reads no state another thread may re-encode.
    TmaOperands tma;
    std::array<CUtensorMap, kMaxTileMaps> tile_maps;
    void* params[5] = {problem, plan.slots.data(), &tma.a, &tma.b, tile_maps.data()};
    if (k.hopper) {
        {
            std::lock_guard<std::mutex> lock(k.tma_mutex);
            if (k.tile_maps.empty() || k.tma_slots != plan.slots ||
                std::memcmp(&k.tma_problem, &plan.gemm, sizeof plan.gemm) != 0) {
                k.tma = encode_tma_operands(plan.gemm, k.checked.graph.spec(), k.tile, k.cluster);
                k.tile_maps = encode_tile_maps(k.checked, plan, k.tile_maps_plan);
                k.tma_problem = plan.gemm;
                k.tma_slots = plan.slots;
            }
            tma = k.tma;
            std::copy(k.tile_maps.begin(), k.tile_maps.end(), tile_maps.begin());
        }
        // Persistent: one CTA per SM (the pipeline fills most of shared memory), each walking its tiles; a cluster
        // walks units of `cluster` M-tiles (hopper_gemm.cuh's TileOrder), so the grid is whole clusters. The plan's
        // grid counts the tiles: grid_x along M, grid_y along N.
        const std::uint64_t c = static_cast<std::uint64_t>(k.cluster);
        const std::uint64_t units = (plan.grid_x + c - 1) / c * plan.grid_y;
        plan.grid_x = static_cast<unsigned>(std::min<std::uint64_t>(units, static_cast<std::uint64_t>(k.max_ctas) / c) * c);
        plan.grid_y = 1;
    }
    try {
        driver.launch(k.function, plan.grid_x, plan.grid_y, 1, static_cast<unsigned>(k.threads),
                      static_cast<unsigned>(k.smem_bytes), stream, params);
    } catch (const Error& e) {
        throw Error(fmt::format("kernel '{}' ({}): {}", k.report.kernel_name, k.report.arch, e.what()));
    }
}

const Graph& Kernel::graph() const { return loaded().checked.graph; }
const KernelConfig& Kernel::config() const { return loaded().config; }
const BuildReport& Kernel::report() const { return loaded().report; }
const std::string& Kernel::source() const { return loaded().source; }

std::vector<std::int64_t> Kernel::partials_shape(const std::string& name, std::int64_t m, std::int64_t n) const {
    const LoadedKernel& k = loaded();
    for (const Binding& b : k.checked.bindings)
        if (b.name == name) return coda::partials_shape(b, k.tile, m, n);
    throw Error(fmt::format("kernel '{}' has no binding named '{}'", k.report.kernel_name, name));
}

}  // namespace coda
