// The Hopper mainloop's host side: HopperConfig's text and rules (templates/coda/hopper_rules.cuh, shared with the
// template), the configs `coda tune` times and the default, the template arguments, and a persistent launch whose
// operands and staged tile tensors travel as TMA tensor maps (hopper_tma.cpp).
#include "mainloop/hopper.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "coda/error.hpp"
#include "coda/hopper_rules.cuh"
#include "coda/limits.hpp"
#include "driver/cuda_driver.hpp"
#include "mainloop/config_words.hpp"
#include "mainloop/epilogue_cost.hpp"
#include "mainloop/hopper_tma.hpp"
#include "mainloop/stream_k_workspace.hpp"
#include "util/arch.hpp"
#include "util/log.hpp"

namespace coda {
namespace {

bool has_op(const Graph& graph, Op op) {
    for (const Node& n : graph.nodes())
        if (n.op == op) return true;
    return false;
}

bool reads_double_width(const Graph& graph) {
    for (const Node& n : graph.nodes())
        if (n.op == Op::TileInput && n.width == Width::Double) return true;
    return false;
}


namespace rules = hopper_rules;

constexpr int kThreads = 384;    // a producer warpgroup and two consumer warpgroups

// coda::check bounds every kernel's parameters by this kernel's fixed part (include/coda/limits.hpp): the problem,
// up to 56 bytes of padding before the 64-byte aligned tensor maps, and the maps of A, B and the tile tensors.
static_assert(limits::kKernelFixedParamBytes >=
                  static_cast<int>(sizeof(GemmProblem) + 56 + (2 + rules::kMaxTileMaps) * sizeof(CUtensorMap)),
              "limits::kKernelFixedParamBytes must cover the Hopper kernel's fixed parameters");
constexpr int kTmaAlignment = 16;  // bytes: TMA's rule for a tensor's base and the pitch of its rows
static_assert(HopperConfig::bk == rules::kBK, "HopperConfig's K step is the template's");

std::string rule_text(rules::Rule r) {
    switch (r) {
        case rules::Rule::Ok: return "";
        case rules::Rule::BN:
            return fmt::format("bn must be {} or {} (one wgmma instruction covers the tile's columns)", rules::kNarrowBN,
                               rules::kWideBN);
        case rules::Rule::BM:
            return fmt::format("bm must be a multiple of {} from {} to {}", rules::kRowsPerM64, rules::kRowsPerM64,
                               rules::kMaxBM);
        case rules::Rule::ConsumerRows:
            return fmt::format("each consumer warpgroup must hold {} or {} rows (bm for ping-pong, bm / 2 for "
                               "cooperative)",
                               rules::kMinConsumerRows, rules::kMaxConsumerRows);
        case rules::Rule::Accumulators:
            return fmt::format("a consumer warpgroup's accumulator (rows x bn) must not exceed {} elements (128 x 128: "
                               "128 registers a thread)",
                               rules::kMaxAccumulators);
        case rules::Rule::Stages:
            return fmt::format("stages must be between {} and {}", rules::kMinStages, rules::kMaxStages);
        case rules::Rule::Cluster:
            return fmt::format("a cluster holds at most {} CTAs, along M (cluster, which share B by TMA multicast) "
                               "or along N (cluster_n, which share A)",
                               rules::kMaxClusterCtas);
        case rules::Rule::ClusterSplit:
            return "the CTAs of a cluster each load an equal share of the operand they share: an M- or N-major one "
                   "in 64-element boxes, so its tile side must hold a multiple of cluster (cluster_n) such boxes";
    }
    return "unknown rule";
}

const HopperConfig& hopper_of(const KernelConfig& config, const char* where) {
    return config_as<HopperConfig>(config, "Hopper", where);
}
const HopperConfig& hopper_of(const std::optional<KernelConfig>& config, const char* where) {
    return config_as<HopperConfig>(config, "Hopper", where);
}


// The template's spelling of an operand dtype (GemmSpec::input; validation admits no other).
const char* operand_type(DType d) {
    switch (d) {
        case DType::BF16: return "coda::bf16";
        case DType::F16: return "coda::f16";
        case DType::E4M3: return "coda::e4m3";
        case DType::E5M2: return "coda::e5m2";
        case DType::F32:
        case DType::I32: break;
    }
    throw InternalError(fmt::format("GEMM operands of dtype {} reached the Hopper mainloop", to_string(d)));
}

// The template's element type for A and B: their own type, or for two FP8 types (validation admits no other pair)
// a tag that names both, so that a same-type kernel's source reads as it always did.
std::string operand_type(const GemmSpec& spec) {
    const std::string operands =
        spec.b_input() == spec.input
            ? std::string(operand_type(spec.input))
            : fmt::format("coda::fp8_operands<{}, {}>", operand_type(spec.input), operand_type(spec.b_input()));
    // Block-scaled FP8: the same operands, promoted a k-block at a time with its scales (hopper_mma_tile_promoted).
    // With Block1x128, B's scales per row and k-block as A's (one per column of the tile instead of per block).
    // Promoted accumulation: the same loop with unit scales.
    switch (spec.scales) {
        case ScaleMode::Block128x128: return fmt::format("coda::block_scaled<{}>", operands);
        case ScaleMode::Block1x128: return fmt::format("coda::block_scaled<{}, true>", operands);
        case ScaleMode::Off: break;
    }
    if (spec.accumulation == Accumulation::Promoted) return fmt::format("coda::promoted<{}>", operands);
    return operands;
}

static_assert(kScaleBlock == kScaleBlockK, "the host's and the kernels' scale block must agree");

// rules::block_scaled_tile's words (any BN, stages and cluster), for the two GEMMs that promote each k-block.
std::string promoted_tile_rule(const GemmSpec& spec) {
    return fmt::format("{} takes cooperative 128 x 128 or 128 x 256 tiles: each consumer thread keeps a 128-k block's "
                       "sum of 128 columns beside its accumulator ('hopper bm=128 bn=128 cooperative', 'hopper bm=128 "
                       "bn=256 cooperative')",
                       spec.block_scaled() ? fmt::format("block-scaled FP8 (scales={})", to_string(spec.scales))
                                           : std::string("promoted FP8 accumulation (acc=promoted)"));
}

bool block_scaled_tile(const HopperConfig& c) { return rules::block_scaled_tile(c.bm, c.schedule == Schedule::PingPong); }

// Why TMA cannot read operand `name`, or "".
std::string tma_rule(const char* name, const void* base, long long ld, int element_bytes) {
    if (reinterpret_cast<std::uintptr_t>(base) % kTmaAlignment != 0)
        return fmt::format("operand {}: pointer {} is not {}-byte aligned; the Hopper mainloop loads operands with TMA, "
                           "which needs {}-byte aligned bases",
                           name, base, kTmaAlignment, kTmaAlignment);
    if (ld * element_bytes % kTmaAlignment != 0)
        return fmt::format("operand {}: leading dimension {} is not a multiple of {} elements ({} bytes); the Hopper "
                           "mainloop loads operands with TMA, which needs {}-byte aligned rows",
                           name, ld, kTmaAlignment / element_bytes, kTmaAlignment, kTmaAlignment);
    return "";
}

// Why TMA cannot read A or B, or "".
std::string operand_rule(const LaunchPlan& plan) {
    std::string why = tma_rule("A", plan.gemm.a, plan.gemm.lda, plan.operand_bytes);
    if (why.empty()) why = tma_rule("B", plan.gemm.b, plan.gemm.ldb, plan.operand_bytes);
    return why;
}

constexpr const char* kUnstageableTiles =
    "a tile tensor is not 16-byte aligned in base and row pitch, or a stored row ends inside a 16-byte unit (a "
    "transposed output's rows are M elements); this kernel moves its tile tensors through shared memory by TMA, which "
    "needs both";

// Whether a kernel stages tile tensors (its self-report, KernelInfo::tma).
bool stages_tiles(const TmaTileInfo& how) { return how.inputs_by_tma != 0 || how.outputs > 0 || how.transposed > 0; }

// Persistent: at most one CTA per SM (the pipeline fills most of shared memory), or as many clusters as fit at once;
// each CTA walks its tiles (hopper_gemm.cuh's TileOrder). Operands and staged tile tensors go as tensor maps,
// encoded again only when the problem or the bound tensors change: a training step launches a kernel on the same
// buffers again and again, and encoding costs more than the rest of the launch.
class HopperLauncher final : public Launcher {
public:
    HopperLauncher(const LoadedModule& module, const CheckedGraph& graph, int max_ctas, bool stream_k)
        : module_(module), graph_(graph), max_ctas_(max_ctas), stream_k_(stream_k) {}

    std::string unsupported(const LaunchPlan& plan) const override {
        std::string why = operand_rule(plan);
        if (why.empty() && stages_tiles(module_.info.tma) &&
            !tile_tensors_stageable(graph_, plan, module_.info.tma.transposed > 0))
            why = kUnstageableTiles;
        return why;
    }

    void launch(const LaunchPlan& plan, CUstream stream) const override {
        // Copies of the cached maps, so that the launch reads no state another thread may re-encode.
        TmaOperands tma;
        std::array<CUtensorMap, rules::kMaxTileMaps> tile_maps;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (maps_.empty() || slots_ != plan.slots || std::memcmp(&problem_, &plan.gemm, sizeof plan.gemm) != 0) {
                tma_ = encode_tma_operands(plan.gemm, graph_.graph.spec(), module_.info);
                maps_ = encode_tile_maps(graph_, plan, module_.info.tma);
                problem_ = plan.gemm;
                slots_ = plan.slots;
            }
            tma = tma_;
            std::copy(maps_.begin(), maps_.end(), tile_maps.begin());
        }
        const unsigned grid_x = grid(plan);
        GemmProblem problem = plan.gemm;
        if (const std::size_t bytes = stream_k_bytes(plan, grid_x)) {
            const StreamKWorkspace workspace = stream_k_workspace(stream, bytes);
            problem.partials = workspace.partials;
            problem.partial_flags = workspace.partial_flags;
        }
        void* params[] = {&problem, const_cast<std::uint64_t*>(plan.slots.data()), &tma.a, &tma.b, tile_maps.data()};
        Driver::instance().launch(module_.function, grid_x, 1, 1, static_cast<unsigned>(module_.info.threads),
                                  static_cast<unsigned>(module_.info.smem_bytes), stream, params);
    }

    // Its own maps, encoded once: the shared ones above may be re-encoded for another launch at any time.
    void pack(PackedLaunch& out) const override {
        const TmaOperands tma = encode_tma_operands(out.plan.gemm, graph_.graph.spec(), module_.info);
        const std::vector<CUtensorMap> tile_maps = encode_tile_maps(graph_, out.plan, module_.info.tma);
        out.maps.assign(2 + rules::kMaxTileMaps, CUtensorMap{});
        out.maps[0] = tma.a;
        out.maps[1] = tma.b;
        std::copy(tile_maps.begin(), tile_maps.end(), out.maps.begin() + 2);
        out.function = module_.function;
        out.grid_x = grid(out.plan);
        // (Bound launches take whole tiles: their packed problem carries no stream-K workspace, which belongs to the
        // stream each launch names.)
        out.threads = static_cast<unsigned>(module_.info.threads);
        out.smem_bytes = static_cast<unsigned>(module_.info.smem_bytes);
        out.params = {&out.plan.gemm, out.plan.slots.data(), &out.maps[0], &out.maps[1], &out.maps[2]};
    }

private:
    // Stream-K's partial sums (one tile a CTA), or 0 where the kernel takes whole tiles only.
    std::size_t stream_k_bytes(const LaunchPlan& plan, unsigned grid_x) const {
        const KernelInfo& info = module_.info;
        if (!stream_k_) return 0;
        const auto tiles = [](long long extent, int tile) { return (extent + tile - 1) / tile; };
        if (!stream_k_shares(tiles(plan.m, info.tile_m) * tiles(plan.n, info.tile_n), grid_x,
                             tiles(plan.gemm.k, rules::kBK)))
            return 0;
        if (grid_x * 2 > static_cast<unsigned>(kStreamKFlags))
            throw InternalError(fmt::format("a stream-K grid of {} CTAs needs more than the workspace's {} flags",
                                            grid_x, kStreamKFlags));
        return static_cast<std::size_t>(grid_x) * static_cast<std::size_t>(info.tile_m) *
               static_cast<std::size_t>(info.tile_n) * sizeof(float);
    }

    // A cluster walks units of cluster_m M-tiles or cluster_n N-tiles (TileOrder), so the grid is whole clusters.
    unsigned grid(const LaunchPlan& plan) const {
        const KernelInfo& info = module_.info;
        const std::uint64_t c = static_cast<std::uint64_t>(info.cluster_m * info.cluster_n);
        const auto units_of = [](long long extent, int tile, int per_unit) {
            const std::uint64_t tiles = static_cast<std::uint64_t>((extent + tile - 1) / tile);
            return (tiles + static_cast<std::uint64_t>(per_unit) - 1) / static_cast<std::uint64_t>(per_unit);
        };
        const std::uint64_t units =
            units_of(plan.m, info.tile_m, info.cluster_m) * units_of(plan.n, info.tile_n, info.cluster_n);
        return static_cast<unsigned>(std::min<std::uint64_t>(units, static_cast<std::uint64_t>(max_ctas_) / c) * c);
    }

    LoadedModule module_;
    const CheckedGraph& graph_;  // the loaded kernel's, which owns this launcher
    int max_ctas_;
    bool stream_k_;  // the kernel can share its last rounds (hopper_rules::stream_k)
    mutable std::mutex mutex_;
    mutable GemmProblem problem_{};
    mutable std::vector<std::uint64_t> slots_;
    mutable TmaOperands tma_{};
    mutable std::vector<CUtensorMap> maps_;
};

class HopperMainloop final : public Mainloop {
public:
    std::string_view name() const override { return "hopper"; }
    Domain domain() const override { return Domain::Gemm; }
    KernelKind kind() const override { return KernelKind::HopperGemm; }
    std::string_view config_word() const override { return "hopper"; }
    bool owns(const KernelConfig& config) const override { return config.hopper() != nullptr; }

    std::string config_to_text(const KernelConfig& config) const override {
        const HopperConfig& c = hopper_of(config, "config_to_text");
        // cluster_n only where it is not 1, so that the texts of configs without it stay as they were.
        return fmt::format("hopper bm={} bn={} bk={} stages={} {} cluster={}{}{}", c.bm, c.bn, HopperConfig::bk,
                           c.stages, c.schedule == Schedule::Cooperative ? "cooperative" : "pingpong", c.cluster_m,
                           c.cluster_n != 1 ? fmt::format(" cluster_n={}", c.cluster_n) : "",
                           c.direct ? " direct" : "");
    }

    KernelConfig parse_config(const std::vector<std::string>& words, const std::string& text) const override {
        HopperConfig c;
        int bk = HopperConfig::bk;
        ConfigWords known;
        known.fields = {{"bm", &c.bm}, {"bn", &c.bn}, {"bk", &bk}, {"stages", &c.stages}, {"cluster", &c.cluster_m},
                        {"cluster_n", &c.cluster_n}};
        known.flags = {{"cooperative", [&c] { c.schedule = Schedule::Cooperative; }},
                       {"pingpong", [&c] { c.schedule = Schedule::PingPong; }},
                       {"direct", [&c] { c.direct = true; }}};
        const std::string example = config_to_text(HopperConfig{});
        read_config_words(words, known, text, example);
        if (bk != HopperConfig::bk)
            throw Error(fmt::format("kernel config '{}': bk must be {} on the Hopper mainloop (one 128-byte swizzle "
                                    "row of 16-bit elements), got {}; expected e.g. '{}'",
                                    text, HopperConfig::bk, bk, example));
        return c;
    }

    bool default_on(const std::string& arch) const override { return arch == kHopperArch; }
    // HopperConfig{} is also the default at every shape (Mainloop::default_config): ping-pong 128 x 128, 6 stages.
    // Measured with `coda tune` on an H200 over the benchmark shape set (docs/PERFORMANCE.md, 2026-12-03, third
    // session: lean mainloop, clocks settled before timing): out-proj ran fastest on it at 11 of 12 shapes (0.5%
    // behind at the twelfth); the identity at all 12 in one call (1-8% ahead of cooperative 128 x 256) and within
    // 2.3% of the winner in another. One consumer's epilogue runs during the other's mainloop, and its shared memory
    // leaves room to stage tile inputs and outputs. Other shapes and GPUs: `coda tune`.
    KernelConfig base_config() const override { return HopperConfig{}; }

    // Ping-pong overlaps one consumer's epilogue with the other's mainloop, so the epilogue's shared-memory
    // traffic competes with the wgmma operand reads; tile tensors that move by a shared-memory access per visit
    // (f32, half- or double-width) cost most. When they are heavy against the mainloop's length (K), cooperative
    // 128 x 128 runs the epilogue on both consumer warpgroups between mainloops instead. The fifth session's
    // epilogues (docs/PERFORMANCE.md, 2026-12-03) put the threshold at 640 K per byte: swiglu_backward (8 such bytes
    // an element) then ran 1.71x faster cooperative at K = 2048. Since its epilogue was shortened and its tile
    // inputs staged, every measured point favours ping-pong, each config timed alone (`coda tune --solo`, H200,
    // docs/PERFORMANCE.md, 2026-12-05, tenth session): swiglu_backward 1.13x at K = 2048 (256 K per byte) and
    // 1.13x at K = 4096 (512), rmsnorm_backward 1.05x at K = 6144 (768). Cooperative is kept only below the
    // lowest K per byte measured, where the older data favoured it and nothing newer exists.
    //
    // A vocabulary-sized N (an LM head's) gets no rule of its own. Cooperative 256 x 128 in pairs along N was the
    // default there for N >= 98304 without per-visit traffic, on one `coda tune` call (2026-12-04); measured again
    // side by side (`coda tune --config`, docs/PERFORMANCE.md, 2026-12-04, third session) it ran the identity within
    // 3% of ping-pong 128 x 128 either way between calls, and lm_head_ce_stats, whose online log-sum-exp makes its
    // epilogue long though it has no tile tensors, 20% slower at 8192 x 128256 x 4096 and 36% at 4096 x 128256 x 4096:
    // a cooperative tile's epilogue stalls both consumers, which ping-pong hides behind the other's mainloop.
    //
    // A plain GEMM (the epilogue only stores the accumulator, in a 16-bit type) with K >= 5120, M >= 4096, N >= 2048
    // and both operands K-major (a forward projection) or both M/N-major (a weight gradient, K = tokens) takes
    // cooperative 256 x 128 tiles in pairs along N that share A: the region measured, where the tile grid leaves no
    // pair half empty. Each operand byte from L2 feeds twice the MMAs of a 128 x 128 tile, and at the power cap the
    // GPU then holds a 50-100 MHz higher clock. Measured on an H200 with each config run alone, clocks settled
    // (docs/PERFORMANCE.md, 2026-12-04, fourth and fifth sessions; `coda bench gemm --identity-only --config`, `coda
    // tune --solo`): from K = 5120 ahead of ping-pong at 20 of 24 points, both layouts (up to 5.1%), and behind by at
    // most 0.7% at the other four; at K = 4096 and 2048 -4.4% to +2.3%, no side ahead. M/N-major at K = 16384 (`coda
    // tune --config`, one config a run, twice) 2.6-8.7% faster at five weight-gradient shapes. Any
    // epilogue with work of its own ran 9-41% slower on it than on ping-pong (`coda bench block --config`). Timed in
    // interleaved rounds with another config (`coda tune` without --solo) it loses its clock advantage: 1-8% behind
    // ping-pong there.
    KernelConfig default_config(const Graph& graph, const ProblemShape& shape) const override {
        constexpr double kPingPongKPerByte = 256;  // ping-pong when K >= this x per-visit bytes an element
        constexpr long long kUnknownK = 4096;      // a typical hidden size, for a shape not given
        constexpr long long kLongK = 5120;         // plain GEMMs from here on: cooperative 256 x 128 pairs ...
        constexpr long long kPairsMinM = 4096;     // ... on a grid of tiles this large at least
        constexpr long long kPairsMinN = 2048;
        constexpr long long kFp8PairsMinK = 4096;            // FP8 at shorter K: the pairs also where the grid is ...
        constexpr long long kFp8PairsMinElements = 1 << 27;  // ... at least M x N (16384 x 8192)
        const HopperConfig pairs{256, 128, 4, Schedule::Cooperative, 1, 2};
        // Block-scaled FP8: cooperative 128 x 256, whose two 128-column blocks take turns in one block sum. Against
        // 128 x 128 (H100, docs/PERFORMANCE.md, 2026-12-06, twenty-third session): 0.80-0.87x the time of the plain
        // GEMM (`tools/ab_builds.py`, `coda tune --config`), 0.85x gate/up + SwiGLU's, 0.91x QKV + RoPE's, 0.99x
        // the down projection's with a bf16 h. 128 x 128 for epilogues that quantize in 128-column groups
        // (reduce_group): their scales' row partials, one per tile, are the next GEMM's A_scale only on 128-column
        // tiles (and two of the block's spill on 128 x 256); and for column reductions, whose state grows with the
        // tile's width beside 128 accumulators and a block sum (the norm backward's dgamma: 1.09x on 128 x 256).
        // Promoted per-tensor FP8 runs the same loop without scales, so it takes the same tiles (not yet timed); and
        // 128 x 128 for epilogues that read a double-width tile (SwiGLU's backward, z), which spilled 304-484 bytes on
        // 128 x 256 beside the loop's block sum (ptxas, sm_90a, 2026-12-08).
        if (graph.spec().promotes())
            return has_op(graph, Op::ReduceGroup) || has_op(graph, Op::ReduceCol) || reads_double_width(graph)
                       ? HopperConfig{128, 128, 6, Schedule::Cooperative, 1}
                       : HopperConfig{128, 256, 4, Schedule::Cooperative, 1};
        // store_transposed writes each element to global memory itself; beside the 128 accumulators a thread of the
        // other tiles the FP8 block's norm and SwiGLU backwards with it spilled 16-56 bytes (ptxas).
        if (has_op(graph, Op::StoreTransposed)) return HopperConfig{128, 128, 6, Schedule::Cooperative, 1};
        const long long k = shape.k > 0 ? shape.k : kUnknownK;
        const double per_visit_bytes = epilogue_traffic(graph).per_visit_bytes;
        // A per-tensor FP8 GEMM (the accumulator times scalars, stored in 16 bits): the same pairs, where the
        // 16-bit rule below puts them and on grids of 16384 x 8192 and more from K = 4096. Measured with each config
        // run alone (`coda tune --solo`, docs/PERFORMANCE.md, 2026-12-06, H100), against ping-pong 128 x 128: 0.83x
        // the time at 16384 x 4096 x 14336, 0.91x at 16384 x 14336 x 4096, 0.93x at 16384 x 8192 x 8192, 0.75x at
        // the LM head's 8192 x 128256 x 4096, 0.96x at 8192 x 4096 x 11008; 1.03x at 4096 x 4096 x 4096 (stays).
        // FP8 epilogues with work of their own keep ping-pong: against cooperative 128 x 256 and the pairs (`coda tune
        // --solo`, H100, docs/PERFORMANCE.md, 2026-12-06, twenty-first session) the winner changed from one epilogue to
        // the next at the same shape (the pairs 0.81x gate/up + SwiGLU's time, 1.06x its row-wise variant's; every
        // backward 1.01-1.54x), and at d = 2048 neither won. The measured winners ship as tuning records instead
        // (src/tune/builtin_tuning.cpp).
        if (size_of(graph.spec().input) == 1) {
            const bool wide = shape.m >= kPairsMinM && shape.n >= kPairsMinN;
            const bool long_k = k >= kLongK;
            const bool large_grid = k >= kFp8PairsMinK && shape.m * shape.n >= kFp8PairsMinElements;
            if (wide && (long_k || large_grid) && per_visit_bytes == 0 && stores_scaled_accumulator_only(graph))
                return pairs;
            return base_config();
        }
        if (per_visit_bytes * kPingPongKPerByte > static_cast<double>(k))
            return HopperConfig{128, 128, 6, Schedule::Cooperative, 1};
        // A weight gradient added into an f32 buffer (D += acc and nothing else: coda.torch's 16-bit weight
        // gradients into their gradient buffers; its f32 read-modify-write is per-visit traffic) takes the pairs in
        // the same region. Against ping-pong 128 x 128 at the d = 4096 layer's four weight gradients, M/N-major at K
        // = 16384 (`coda tune --solo`, H100, docs/PERFORMANCE.md, 2026-12-07, twenty-eighth session): 0.77-0.97x
        // the time; cooperative 128 x 256 within 1% of them at 28672 x 4096, 3-11% behind at the other three.
        const bool plain =
            (per_visit_bytes == 0 && stores_accumulator_only(graph)) || accumulates_accumulator_only(graph);
        if (k >= kLongK && shape.m >= kPairsMinM && shape.n >= kPairsMinN && graph.spec().a == graph.spec().b && plain)
            return pairs;
        return base_config();
    }

    // Each consumer warpgroup holds a 64 x 256 or 128 x 128 fp32 accumulator (128 registers a thread); the stage
    // counts fill about 200 KB of shared memory (the template drops stages if the epilogue needs room).
    std::vector<NamedConfig> candidates() const override {
        return {
            {"h128x256", HopperConfig{128, 256, 4, Schedule::Cooperative, 1}},
            {"h256x128", HopperConfig{256, 128, 4, Schedule::Cooperative, 1}},
            {"h128x128", HopperConfig{128, 128, 6, Schedule::Cooperative, 1}},
            {"hp128x128", HopperConfig{128, 128, 6, Schedule::PingPong, 1}},
            {"hp64x256", HopperConfig{64, 256, 5, Schedule::PingPong, 1}},
            // Pairs of CTAs along M that share B by TMA multicast: half of B's L2 reads.
            {"h128x256c2", HopperConfig{128, 256, 4, Schedule::Cooperative, 2}},
            {"hp128x128c2", HopperConfig{128, 128, 6, Schedule::PingPong, 2}},
            {"h256x128c2", HopperConfig{256, 128, 4, Schedule::Cooperative, 2}},
            // Pairs along N that share A: a 256-row tile's A is twice its B.
            {"h256x128n2", HopperConfig{256, 128, 4, Schedule::Cooperative, 1, 2}},
            {"hp128x128n2", HopperConfig{128, 128, 6, Schedule::PingPong, 1, 2}},
        };
    }

    // For a launch a staging kernel cannot run only because of its tile tensors: the same config's direct variant.
    // For operands TMA cannot read: the portable mainloop (below).
    std::optional<KernelConfig> fallback_config(const KernelConfig& config, const LaunchPlan& plan) const override {
        const HopperConfig& h = hopper_of(config, "fallback_config");
        if (!h.direct && operand_rule(plan).empty()) {
            HopperConfig direct = h;
            direct.direct = true;
            return direct;
        }
        // The portable mainloop multiplies 16-bit operands only: FP8 ones that TMA cannot read have nowhere to go.
        if (plan.operand_bytes != 2) return std::nullopt;
        return fallback_config(config);
    }

    // The portable mainloop with the same tile, in 64 x 64 warp tiles (valid for every Hopper tile): it reads
    // operands that TMA cannot (misaligned bases, odd leading dimensions) with 2-byte loads.
    std::optional<KernelConfig> fallback_config(const KernelConfig& config) const override {
        const HopperConfig& h = hopper_of(config, "fallback_config");
        PortableConfig p;
        p.bm = h.bm;
        p.bn = h.bn;
        p.warps_m = h.bm / 64;
        p.warps_n = h.bn / 64;
        return p;
    }

    // Measured with ptxas (docs/GUIDE.md, "Limits"): a consumer thread keeps every column reduction's state for its
    // bn / 8 column pairs beside its accumulators, 128 registers in every candidate but cooperative 128 x 128 (64).
    std::string spill_advice() const override {
        return "on the Hopper mainloop each consumer thread keeps every column reduction's state (bn / 8 column "
               "pairs x the values of a pair, twice for lse) beside 128 accumulators; beyond 64 such floats a thread "
               "it spills. 'hopper bm=128 bn=128 cooperative' keeps 64 accumulators a thread and room for 128 "
               "floats; a PortableConfig keeps a quarter of the column pairs (README \"Limits\")";
    }

    void validate(const Graph& graph, const std::optional<KernelConfig>& config,
                  const std::string& arch) const override {
        const HopperConfig& c = hopper_of(config, "validate");
        const auto fail = [&](const std::string& rule) {
            return Error(fmt::format("graph '{}': kernel config '{}' is not valid for the Hopper mainloop: {} (its "
                                     "default is '{}')",
                                     graph.name(), config->to_text(), rule, config_to_text(HopperConfig{})));
        };
        if (arch != kHopperArch)
            throw fail(fmt::format("it needs {} (wgmma, setmaxnreg), not {}; use a PortableConfig for other targets",
                                   kHopperArch, arch));
        const rules::Rule r = rules::check(c.bm, c.bn, c.stages, c.schedule == Schedule::PingPong, c.cluster_m,
                                           c.cluster_n, graph.spec().a == Major::K, graph.spec().b == Major::K);
        if (r != rules::Rule::Ok) throw fail(rule_text(r));
        if (graph.spec().promotes() && !block_scaled_tile(c)) throw fail(promoted_tile_rule(graph.spec()));
    }

    KernelTemplate instantiate(const Graph& graph, const std::optional<KernelConfig>& config) const override {
        const HopperConfig& c = hopper_of(config, "instantiate");
        const GemmSpec& spec = graph.spec();
        const std::string args = fmt::format(
            "{}, {}, {}, {}, {}, {}, {}", operand_type(spec),
            spec.a == Major::K ? "true" : "false", spec.b == Major::K ? "true" : "false", c.bm, c.bn, c.stages,
            c.schedule == Schedule::PingPong ? "true" : "false");
        // The cluster's size is the entry point's (__cluster_dims__), so it is not a kernel argument; a pair says
        // which operand it shares.
        // The direct variant's last template argument; the staging kernel leaves it at its default.
        const char* direct = c.direct ? ", true" : "";
        const std::string entry = c.cluster_m * c.cluster_n == 1
                                      ? fmt::format("coda::hopper_gemm<{}, coda_gen::Epilogue{}>", args, direct)
                                      : fmt::format("coda::hopper_gemm_pair<{}, {}, coda_gen::Epilogue{}>", args,
                                                    c.cluster_n > 1 ? "true" : "false", direct);
        return {"coda/hopper_gemm.cuh", entry,
                fmt::format("coda::HopperGemmTraits<{}, {}, {}, coda_gen::Epilogue{}>", args, c.cluster_m,
                            c.cluster_n, direct)};
    }

    std::string key_text(const std::optional<KernelConfig>& config) const override {
        return config_to_text(hopper_of(config, "key_text"));
    }

    std::unique_ptr<Launcher> load(const LoadedModule& module, const CheckedGraph& graph,
                                   const std::optional<KernelConfig>& config) const override {
        const HopperConfig& c = hopper_of(config, "load");
        expect_reported(module, "tile rows", module.info.tile_m, c.bm);
        expect_reported(module, "tile columns", module.info.tile_n, c.bn);
        expect_reported(module, "threads", module.info.threads, kThreads);
        expect_reported(module, "cluster rows", module.info.cluster_m, c.cluster_m);
        expect_reported(module, "cluster columns", module.info.cluster_n, c.cluster_n);
        if (module.info.tma.maps < 1 || module.info.tma.maps > rules::kMaxTileMaps)
            throw InternalError(fmt::format("kernel '{}' takes {} tile maps; the host passes 1 to {}", module.name,
                                            module.info.tma.maps, rules::kMaxTileMaps));
        Driver& driver = Driver::instance();
        int max_ctas = driver.current_device().sm_count;
        const int ctas = c.cluster_m * c.cluster_n;
        if (ctas > 1) {
            const int clusters = driver.max_active_clusters(module.function, static_cast<unsigned>(ctas),
                                                            static_cast<unsigned>(module.info.threads),
                                                            static_cast<unsigned>(module.info.smem_bytes));
            if (clusters < 1)
                throw Error(fmt::format("kernel '{}': no cluster of {} CTAs with {} bytes of shared memory each fits on "
                                        "this device; use a config with cluster=1 cluster_n=1",
                                        module.name, ctas, module.info.smem_bytes));
            max_ctas = clusters * ctas;
            logger("coda.runtime")->debug("{}: {} clusters of {} CTAs fit at once", module.name, clusters, ctas);
        }
        return std::make_unique<HopperLauncher>(
            module, graph, max_ctas,
            rules::stream_k(c.cluster_m, c.cluster_n, c.bm, c.schedule == Schedule::PingPong));
    }
};

}  // namespace

const Mainloop& hopper_mainloop() {
    static const HopperMainloop mainloop;
    return mainloop;
}

}  // namespace coda
