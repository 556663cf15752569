// The finalizer's host side: one thread per element, in a grid-stride loop beyond kMaxBlocks blocks.
#include "mainloop/finalize_program.hpp"

#include <algorithm>

#include "coda/error.hpp"
#include "driver/cuda_driver.hpp"

namespace coda {
namespace {

constexpr long long kMaxBlocks = 4096;  // a grid-stride loop beyond this: enough blocks to fill any GPU

class FinalizeLauncher final : public Launcher {
public:
    explicit FinalizeLauncher(const LoadedModule& module) : module_(module) {}

    std::string unsupported(const LaunchPlan&) const override { return ""; }

    void launch(const LaunchPlan& plan, CUstream stream) const override {
        void* params[] = {const_cast<FinalizeProblem*>(&plan.finalize), const_cast<std::uint64_t*>(plan.slots.data())};
        Driver::instance().launch(module_.function, blocks(plan), 1, 1, static_cast<unsigned>(module_.info.threads),
                                  static_cast<unsigned>(module_.info.smem_bytes), stream, params);
    }

    void pack(PackedLaunch& out) const override {
        out.function = module_.function;
        out.grid_x = blocks(out.plan);
        out.threads = static_cast<unsigned>(module_.info.threads);
        out.smem_bytes = static_cast<unsigned>(module_.info.smem_bytes);
        out.params = {&out.plan.finalize, out.plan.slots.data()};
    }

private:
    static unsigned blocks(const LaunchPlan& plan) {
        return static_cast<unsigned>(std::min(kMaxBlocks, (plan.m + kFinalizeThreads - 1) / kFinalizeThreads));
    }

    LoadedModule module_;
};

class FinalizeMainloop final : public Mainloop {
public:
    std::string_view name() const override { return "finalizer"; }
    Domain domain() const override { return Domain::Finalize; }
    KernelKind kind() const override { return KernelKind::Finalize; }

    void validate(const Graph&, const std::optional<KernelConfig>&, const std::string&) const override {}

    KernelTemplate instantiate(const Graph&, const std::optional<KernelConfig>&) const override {
        return {"coda/finalize_program.cuh", "coda::finalize_program<coda_gen::Program>",
                "coda::FinalizeTraits<coda_gen::Program>"};
    }

    std::string key_text(const std::optional<KernelConfig>&) const override { return "finalize"; }

    std::unique_ptr<Launcher> load(const LoadedModule& module, const CheckedGraph&,
                                   const std::optional<KernelConfig>&) const override {
        expect_reported(module, "threads", module.info.threads, kFinalizeThreads);
        return std::make_unique<FinalizeLauncher>(module);
    }
};

}  // namespace

const Mainloop& finalize_program_mainloop() {
    static const FinalizeMainloop mainloop;
    return mainloop;
}

}  // namespace coda
