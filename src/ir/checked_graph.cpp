// Names of kinds and binding roles, which ops bind, and the parameter-slot rule shared by codegen and the runtime.
#include "ir/checked_graph.hpp"

#include "mainloop/block_scales.hpp"

namespace coda {

std::string_view to_string(Kind k) {
    switch (k) {
        case Kind::Tile: return "tile";
        case Kind::Row: return "row";
        case Kind::Col: return "col";
        case Kind::Scalar: return "scalar";
        case Kind::Sink: return "sink";
    }
    return "?";
}

std::string_view to_string(BindingRole r) {
    switch (r) {
        case BindingRole::Input: return "input";
        case BindingRole::ScalarArg: return "scalar";
        case BindingRole::Partials: return "partials";
        case BindingRole::Output: return "output";
        case BindingRole::InOut: return "accumulate";
        case BindingRole::RowPartials: return "row partials";
        case BindingRole::ColPartials: return "column partials";
    }
    return "?";
}

bool is_binding(Op op) {
    switch (op) {
        case Op::TileInput:
        case Op::TileInputTransposed:
        case Op::RowInput:
        case Op::ColInput:
        case Op::Scalar:
        case Op::Partials:
        case Op::Store:
        case Op::StoreTransposed:
        case Op::Accumulate:
        case Op::ReduceRow:
        case Op::ReduceCol: return true;
        default: return false;
    }
}

bool is_tile_tensor(const Binding& b) {
    return b.kind == Kind::Tile &&
           (b.role == BindingRole::Input || b.role == BindingRole::Output || b.role == BindingRole::InOut);
}

int slot_count(const Binding& b) {
    // A tile tensor travels as (pointer, leading dimension); everything else as one word.
    return is_tile_tensor(b) ? 2 : 1;
}

int first_slot(const CheckedGraph& g, std::size_t binding_index) {
    int slot = 0;
    for (std::size_t i = 0; i < binding_index; ++i) slot += slot_count(g.bindings[i]);
    return slot;
}

int total_slots(const CheckedGraph& g) { return first_slot(g, g.bindings.size()); }

int block_scale_slots(const Graph& g) {
    return static_cast<int>(block_scale_operands(g).size()) * BlockScaleOperand::kSlots;
}

int args_slots(const CheckedGraph& g) { return total_slots(g) + block_scale_slots(g.graph); }

}  // namespace coda
