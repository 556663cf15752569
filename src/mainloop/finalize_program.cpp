// The finalizer's host side: G threads per element (finalize_strands), in a grid-stride loop beyond kMaxBlocks
// blocks.
#include "mainloop/finalize_program.hpp"

#include <algorithm>
#include <atomic>
#include <string>

#include "coda/error.hpp"
#include "config/settings.hpp"
#include "driver/cuda_driver.hpp"

namespace coda {
namespace {

constexpr long long kMaxBlocks = 4096;  // a grid-stride loop beyond this: enough blocks to fill any GPU
// The threads an H100 / H200 holds at once (132 SMs x 2048): the vector is split until it comes nearest to filling
// them. A fixed number rather than the device's, so that G, and with it the order of every fold, depends on the shape
// alone.
constexpr long long kFillThreads = 132 * 2048;

// A warp's load reads G partial rows of 128 / G bytes; past 8 strands a 32-byte sector carries 8 or 4 bytes it
// uses. Measured on an H200 (docs/PERFORMANCE.md, 2026-12-05, tenth session; `CODA_FINALIZE_STRANDS=G coda bench
// block --only ...`), L = 16384, T = 256: ce_finalize 19.6 / 16.4 / 21.7 / 39.8 us at G = 4 / 8 / 16 / 32,
// rms_backward_finalize 7.6 / 8.1 / 12.6 / 23.3 us. The short vectors (rms_finalize, dgamma_finalize: 1 MB) ran
// 5-8 us at every G.
constexpr int kMaxFinalizeStrands = 8;

std::atomic<int> strands_override{0};  // 0: none

// The problem a launch passes: the plan's, with the strands its grid is sized for (an override's, or
// CODA_FINALIZE_STRANDS's, for timing one G against another).
FinalizeProblem with_strands(FinalizeProblem problem) {
    const int overridden = strands_override.load(std::memory_order_relaxed);
    const int forced = overridden > 0 ? overridden : settings().finalize_strands;
    problem.strands = forced > 0 ? forced : finalize_strands(problem.l, problem.t);
    return problem;
}

class FinalizeLauncher final : public Launcher {
public:
    explicit FinalizeLauncher(const LoadedModule& module) : module_(module) {}

    std::string unsupported(const LaunchPlan&) const override { return ""; }

    void launch(const LaunchPlan& plan, CUstream stream) const override {
        FinalizeProblem problem = with_strands(plan.finalize);
        void* params[] = {&problem, const_cast<std::uint64_t*>(plan.slots.data())};
        Driver::instance().launch(module_.function, finalize_blocks(problem.l, problem.strands), 1, 1,
                                  static_cast<unsigned>(module_.info.threads),
                                  static_cast<unsigned>(module_.info.smem_bytes), stream, params);
    }

    void pack(PackedLaunch& out) const override {
        out.plan.finalize = with_strands(out.plan.finalize);
        out.function = module_.function;
        out.grid_x = finalize_blocks(out.plan.finalize.l, out.plan.finalize.strands);
        out.threads = static_cast<unsigned>(module_.info.threads);
        out.smem_bytes = static_cast<unsigned>(module_.info.smem_bytes);
        out.params = {&out.plan.finalize, out.plan.slots.data()};
    }

private:
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

int finalize_strands(long long l, long long t) {
    // Doubling while L * G is under 2/3 of the target: the power of two nearest it (within a factor 1.5 below,
    // 1.33 above), up to kMaxFinalizeStrands. ce_finalize (L = 16384) takes 8.
    int strands = 1;
    while (strands < kMaxFinalizeStrands && strands < t && 3 * l * strands < 2 * kFillThreads) strands *= 2;
    return strands;
}

void set_finalize_strands_override(std::optional<int> strands) {
    if (strands && (*strands < 1 || *strands > kFinalizeWarpLanes || (*strands & (*strands - 1)) != 0))
        throw Error("finalizer strands must be 1, 2, 4, 8, 16 or 32, got " + std::to_string(*strands));
    strands_override.store(strands ? *strands : 0, std::memory_order_relaxed);
}

unsigned finalize_blocks(long long l, int strands) {
    const long long per_warp = kFinalizeWarpLanes / strands;
    const long long warps = (l + per_warp - 1) / per_warp;
    constexpr long long kWarpsPerBlock = kFinalizeThreads / kFinalizeWarpLanes;
    return static_cast<unsigned>(std::min(kMaxBlocks, (warps + kWarpsPerBlock - 1) / kWarpsPerBlock));
}

}  // namespace coda
