// The defaults of the Mainloop interface (what a mainloop without configs answers when asked about them), and the
// candidates a graph can take.
#include "mainloop/mainloop.hpp"

#include <fmt/format.h>

#include "coda/error.hpp"
#include "driver/cuda_driver.hpp"

namespace coda {

std::string Mainloop::config_to_text(const KernelConfig& config) const {
    throw InternalError(fmt::format("the {} mainloop was asked to print config '{}', which it does not own", name(),
                                    config.to_text()));
}

KernelConfig Mainloop::parse_config(const std::vector<std::string>&, const std::string& text) const {
    throw InternalError(fmt::format("the {} mainloop takes no config, yet was asked to parse '{}'", name(), text));
}

KernelConfig Mainloop::base_config() const {
    throw InternalError(fmt::format("the {} mainloop takes no config, yet was asked for its defaults", name()));
}

std::vector<NamedConfig> Mainloop::candidates_for(const Graph& graph, const std::string& arch) const {
    std::vector<NamedConfig> out;
    for (NamedConfig& named : candidates()) {
        try {
            validate(graph, named.config, arch);
        } catch (const Error&) {
            continue;  // a rule of the template's that this graph's kernel would break
        }
        out.push_back(std::move(named));
    }
    return out;
}

namespace {

constexpr long long kMaxGridY = 65535;  // CUDA's limit on gridDim.y, which counts the column tiles

long long tiles(long long extent, int tile) { return (extent + tile - 1) / tile; }

class TileGridLauncher final : public Launcher {
public:
    TileGridLauncher(const LoadedModule& module, TileGridProblem problem) : module_(module), problem_(problem) {}

    std::string unsupported(const LaunchPlan& plan) const override {
        const long long tiles_n = tiles(plan.n, module_.info.tile_n);
        if (tiles_n > kMaxGridY)
            return fmt::format("N = {} needs {} column tiles of {}, more than the {} a grid allows", plan.n, tiles_n,
                               module_.info.tile_n, kMaxGridY);
        return "";
    }

    void launch(const LaunchPlan& plan, CUstream stream) const override {
        void* params[] = {problem_of(plan), const_cast<std::uint64_t*>(plan.slots.data())};
        Driver::instance().launch(module_.function, static_cast<unsigned>(tiles(plan.m, module_.info.tile_m)),
                                  static_cast<unsigned>(tiles(plan.n, module_.info.tile_n)), 1,
                                  static_cast<unsigned>(module_.info.threads),
                                  static_cast<unsigned>(module_.info.smem_bytes), stream, params);
    }

    void pack(PackedLaunch& out) const override {
        out.function = module_.function;
        out.grid_x = static_cast<unsigned>(tiles(out.plan.m, module_.info.tile_m));
        out.grid_y = static_cast<unsigned>(tiles(out.plan.n, module_.info.tile_n));
        out.threads = static_cast<unsigned>(module_.info.threads);
        out.smem_bytes = static_cast<unsigned>(module_.info.smem_bytes);
        out.params = {problem_of(out.plan), out.plan.slots.data()};
    }

private:
    void* problem_of(const LaunchPlan& plan) const {
        return problem_ == TileGridProblem::Gemm ? static_cast<void*>(const_cast<GemmProblem*>(&plan.gemm))
                                                 : static_cast<void*>(const_cast<TileProblem*>(&plan.tile));
    }

    LoadedModule module_;
    TileGridProblem problem_;
};

}  // namespace

void PackedLaunch::launch(CUstream stream) const {
    Driver::instance().launch(function, grid_x, grid_y, 1, threads, smem_bytes, stream,
                              const_cast<void**>(params.data()));
}

std::unique_ptr<Launcher> tile_grid_launcher(const LoadedModule& module, TileGridProblem problem) {
    return std::make_unique<TileGridLauncher>(module, problem);
}

void throw_wrong_config(std::string_view mainloop, const char* where) {
    throw InternalError(fmt::format("the {} mainloop's {} was given another mainloop's config, or none", mainloop, where));
}

void expect_reported(const LoadedModule& module, const char* what, int reported, int expected) {
    if (reported != expected)
        throw InternalError(fmt::format("kernel '{}' reports {} = {}; its config asked for {}", module.name, what,
                                        reported, expected));
}

}  // namespace coda
