// Lowering of one graph node to CUDA statements: the body of Epilogue::visit (gemm and tile graphs) or of
// Program::element (finalize graphs) is these statements in node order.
#pragma once

#include <string>
#include <vector>

#include "ir/checked_graph.hpp"

namespace coda::codegen {

// Where the statements run. Visit: one column pair (locals `m` = global row as long long, `pair` = c.n / 2).
// Element: one element `l` of a finalized vector, with the FinalizeProblem `p` and this thread's share of the
// element, the FinalizeLane `lane` (only lane.writes may write).
enum class Site { Visit, Element };

struct LoweringContext {
    const CheckedGraph* graph = nullptr;
    Site site = Site::Visit;
    std::vector<int> slot;  // first parameter slot of each node's binding; -1 for nodes without a binding
    // Visit site: tile inputs are read from `in` (an Epilogue::Inputs that Epilogue::load
    // filled) instead of being loaded where they are lowered.
    bool sources_from_inputs = false;
    // Number of each tile_input node among the graph's tile inputs (Epilogue::kTileInputs), and of each store
    // at the visit site among the tile outputs (Epilogue::kTileOutputs); -1 for other nodes.
    std::vector<int> tile_input_index;
    std::vector<int> tile_output_index;
    // Number of each store_transposed node among the graph's transposed outputs (Epilogue::kTransposedStores); -1
    // for other nodes.
    std::vector<int> transposed_index;
};

LoweringContext make_lowering_context(const CheckedGraph& g);

// Whether the statements of `op` at the visit site read the local `m` / the local `pair`.
bool uses_row(Op op);
bool uses_pair(Op op);

// The State<L> member that holds the running partials of reduce_row / reduce_col node `id`, or reduce_group's
// values of the tile's row groups.
std::string state_field(const CheckedGraph& g, int id);

// Appends the statements of node `id`, each line prefixed by `indent`, preceded by a comment holding the
// node's canonical text line.
void lower_node(const LoweringContext& cx, int id, const std::string& canonical_line, const std::string& indent,
                std::string& out);

// Whether node `op` reads a tile tensor at the visit (tile_input, accumulate), and the L2 prefetch of that
// read for Epilogue::prefetch (nothing for other nodes).
bool reads_tile(Op op);
// Whether `op` loads an input tensor at the visit (tile, row, column input); its Inputs member declaration and
// the load into `in.<member>` that Epilogue::load emits (tile inputs through `tiles`, which may have staged them).
bool reads_input(Op op);
void input_member(const LoweringContext& cx, int id, const std::string& indent, std::string& out);
void load_input(const LoweringContext& cx, int id, const std::string& indent, std::string& out);
void prefetch_node(const LoweringContext& cx, int id, const std::string& indent, std::string& out);

}  // namespace coda::codegen
