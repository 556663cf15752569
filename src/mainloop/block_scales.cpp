// The one declaration of a block-scaled GEMM's scale tensors (GemmSpec::scales): names, shapes and slots, in the
// order the mainloop reads their parameter slots (kernel_abi.cuh, kBlockScaleSlot). Everything else iterates over it.
#include "mainloop/block_scales.hpp"

#include <fmt/format.h>

#include "coda/error.hpp"

namespace coda {
namespace {

long long blocks(long long extent) { return (extent + kScaleBlock - 1) / kScaleBlock; }

// k-block-major: the mainloop reads one k-block's scales of a tile's rows (or columns) together.
BlockScaleShape per_row_and_k_block_of_a(long long m, long long, long long k) { return {blocks(k), m}; }
BlockScaleShape per_row_and_k_block_of_b(long long, long long n, long long k) { return {blocks(k), n}; }
BlockScaleShape per_block_of_b(long long, long long n, long long k) { return {blocks(n), blocks(k)}; }

constexpr BlockScaleOperand kScalesOfA{"A_scale", "A", "block scales of A",
                                       "f32 [ceil(K / 128) x M]: one per row of A and 128 k", DType::F32,
                                       per_row_and_k_block_of_a};
constexpr BlockScaleOperand kBlockScalesOfB{"B_scale", "B", "block scales of B",
                                            "f32 [ceil(N / 128) x ceil(K / 128)]: one per 128 x 128 block of B",
                                            DType::F32, per_block_of_b};
constexpr BlockScaleOperand kRowScalesOfB{"B_scale", "B", "block scales of B",
                                          "f32 [ceil(K / 128) x N]: one per row of B (as N x K) and 128 k", DType::F32,
                                          per_row_and_k_block_of_b};

}  // namespace

const std::vector<BlockScaleOperand>& block_scale_operands(const GemmSpec& spec) {
    static const std::vector<BlockScaleOperand> none;
    static const std::vector<BlockScaleOperand> block_128x128{kScalesOfA, kBlockScalesOfB};
    static const std::vector<BlockScaleOperand> block_1x128{kScalesOfA, kRowScalesOfB};
    switch (spec.scales) {
        case ScaleMode::Off: return none;
        case ScaleMode::Block128x128: return block_128x128;
        case ScaleMode::Block1x128: return block_1x128;
    }
    throw InternalError(fmt::format("block_scale_operands: unknown scale mode {}", static_cast<int>(spec.scales)));
}

const std::vector<BlockScaleOperand>& block_scale_operands(const Graph& graph) {
    static const std::vector<BlockScaleOperand> none;
    return graph.domain() == Domain::Gemm ? block_scale_operands(graph.spec()) : none;
}

const BlockScaleOperand* find_block_scale(const Graph& graph, std::string_view name) {
    for (const BlockScaleOperand& s : block_scale_operands(graph))
        if (s.name == name) return &s;
    return nullptr;
}

}  // namespace coda
