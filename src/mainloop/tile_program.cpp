// The tile program's host side: a fixed tile (kernel_abi.cuh), one CTA per tile.
#include "mainloop/tile_program.hpp"

#include <fmt/format.h>

#include "coda/error.hpp"
#include "driver/cuda_driver.hpp"

namespace coda {
namespace {

constexpr long long kMaxGridY = 65535;  // CUDA's limit on gridDim.y, which counts the column tiles

unsigned tiles(long long extent, int tile) { return static_cast<unsigned>((extent + tile - 1) / tile); }

class TileProgramLauncher final : public Launcher {
public:
    explicit TileProgramLauncher(const LoadedModule& module) : module_(module) {}

    std::string unsupported(const LaunchPlan& plan) const override {
        if (tiles(plan.n, kTileProgramBN) > kMaxGridY)
            return fmt::format("N = {} needs {} column tiles of {}, more than the {} a grid allows", plan.n,
                               tiles(plan.n, kTileProgramBN), kTileProgramBN, kMaxGridY);
        return "";
    }

    void launch(const LaunchPlan& plan, CUstream stream) const override {
        void* params[] = {const_cast<TileProblem*>(&plan.tile), const_cast<std::uint64_t*>(plan.slots.data())};
        Driver::instance().launch(module_.function, tiles(plan.m, kTileProgramBM), tiles(plan.n, kTileProgramBN), 1,
                                  static_cast<unsigned>(module_.info.threads),
                                  static_cast<unsigned>(module_.info.smem_bytes), stream, params);
    }

private:
    LoadedModule module_;
};

class TileProgramMainloop final : public Mainloop {
public:
    std::string_view name() const override { return "tile program"; }
    Domain domain() const override { return Domain::Tile; }
    KernelKind kind() const override { return KernelKind::TileProgram; }

    void validate(const Graph&, const std::optional<KernelConfig>&, const std::string&) const override {}

    KernelTemplate instantiate(const Graph&, const std::optional<KernelConfig>&) const override {
        return {"coda/tile_program.cuh", "coda::tile_program<coda_gen::Epilogue>",
                "coda::TileProgramTraits<coda_gen::Epilogue>"};
    }

    std::string key_text(const std::optional<KernelConfig>&) const override {
        return fmt::format("tile bm={} bn={}", kTileProgramBM, kTileProgramBN);
    }

    std::unique_ptr<Launcher> load(const LoadedModule& module, const CheckedGraph&,
                                   const std::optional<KernelConfig>&) const override {
        expect_reported(module, "tile rows", module.info.tile_m, kTileProgramBM);
        expect_reported(module, "tile columns", module.info.tile_n, kTileProgramBN);
        expect_reported(module, "threads", module.info.threads, kTileProgramThreads);
        return std::make_unique<TileProgramLauncher>(module);
    }
};

}  // namespace

const Mainloop& tile_program_mainloop() {
    static const TileProgramMainloop mainloop;
    return mainloop;
}

}  // namespace coda
