// The block catalog and the llama_block* lists, from the one list blocks.def: a graph added there reaches them, the
// Python module and the tools/graphs check without another edit.
#include <type_traits>

#include "coda/blocks.hpp"

namespace coda::blocks {
namespace {

// One signature for both kinds of block function: a GEMM epilogue takes its spec, a tile program or finalizer none.
Graph call(Graph (*f)(GemmSpec), GemmSpec spec) { return f(spec); }
Graph call(Graph (*f)(), GemmSpec) { return f(); }

// blocks.def's spec None exactly where the function takes no spec.
#define CODA_BLOCK(name, recipe, spec)                                                              \
    static_assert((BlockSpec::spec == BlockSpec::None) == std::is_invocable_v<decltype(name)>, \
                  "blocks.def: " #name " takes a GemmSpec exactly when its spec is not None");
#include "coda/blocks.def"
#undef CODA_BLOCK

std::vector<Graph> graphs_of(BlockRecipe recipe) {
    std::vector<Graph> graphs;
    for (const BlockEntry& e : catalog())
        if (e.recipe == recipe) graphs.push_back(e.make());
    return graphs;
}

}  // namespace

std::optional<GemmSpec> default_spec(BlockSpec spec) {
    switch (spec) {
        case BlockSpec::None: return std::nullopt;
        case BlockSpec::Bf16: return GemmSpec{};
        case BlockSpec::Bf16Backward: return GemmSpec{DType::BF16, Major::K, Major::MN};
        case BlockSpec::Fp8: return GemmSpec{DType::E4M3, Major::K, Major::K};
        case BlockSpec::Fp8Backward: return GemmSpec{DType::E5M2, Major::K, Major::K, DType::E4M3};
        case BlockSpec::Fp8Block128x128:
            return GemmSpec{DType::E4M3, Major::K, Major::K, std::nullopt, ScaleMode::Block128x128};
        case BlockSpec::Fp8Block1x128:
            return GemmSpec{DType::E4M3, Major::K, Major::K, std::nullopt, ScaleMode::Block1x128};
    }
    return std::nullopt;
}

Graph BlockEntry::make() const { return build(default_spec(spec).value_or(GemmSpec{})); }

const std::vector<BlockEntry>& catalog() {
    static const std::vector<BlockEntry> entries{
#define CODA_BLOCK(name, recipe, spec) \
    {#name, BlockRecipe::recipe, BlockSpec::spec, [](GemmSpec s) { return call(name, s); }},
#include "coda/blocks.def"
#undef CODA_BLOCK
    };
    return entries;
}

std::vector<Graph> llama_block() { return graphs_of(BlockRecipe::Bf16); }
std::vector<Graph> llama_block_fp8() { return graphs_of(BlockRecipe::Fp8Tensorwise); }
std::vector<Graph> llama_block_fp8_blockwise() { return graphs_of(BlockRecipe::Fp8Blockwise); }
std::vector<Graph> llama_block_fp8_rowwise() { return graphs_of(BlockRecipe::Fp8Rowwise); }

}  // namespace coda::blocks
