// The tile program's host side: a fixed tile (kernel_abi.cuh), one CTA per tile.
#include "mainloop/tile_program.hpp"

#include <fmt/format.h>

#include "coda/error.hpp"

namespace coda {
namespace {

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
        return tile_grid_launcher(module, TileGridProblem::Tile);
    }
};

}  // namespace

const Mainloop& tile_program_mainloop() {
    static const TileProgramMainloop mainloop;
    return mainloop;
}

}  // namespace coda
