// The result of validation: a graph whose every node has a known type, plus the list of the
// kernel's bindings (what the user passes at launch). Codegen, the reference and the runtime read this.
#pragma once

#include <string>
#include <vector>

#include "coda/graph.hpp"

namespace coda {

// The shape class of a value inside a kernel.
enum class Kind {
    Tile,    // one value per (row, column) of the tile, of some Width
    Row,     // one value per row (length M); in a finalize graph, one value per element of the vector
    Col,     // one value per column (length columns(width, N))
    Scalar,  // one value for the whole launch
    Sink,    // a sink: produces no value
};

enum class Scalar { F32, I32, None };

struct ValueType {
    Kind kind = Kind::Scalar;
    Width width = Width::Full;  // meaningful for Tile and Col
    Scalar scalar = Scalar::F32;
    bool operator==(const ValueType& o) const {
        return kind == o.kind && scalar == o.scalar && ((kind != Kind::Tile && kind != Kind::Col) || width == o.width);
    }
};

// How a binding is used by the kernel.
enum class BindingRole {
    Input,        // tile_input, row_input, col_input: read
    ScalarArg,    // scalar: an f32 passed by value
    Partials,     // finalize partials: f32 [T x L], read
    Output,       // store: written
    InOut,        // accumulate: read, then written
    RowPartials,  // reduce_row: f32 [ceil(N / BN) x M], written
    ColPartials,  // reduce_col: f32 [ceil(M / BM) x columns(width, N)], written
};

struct Binding {
    std::string name;
    int node = -1;
    BindingRole role = BindingRole::Input;
    Kind kind = Kind::Tile;      // Tile, Row, Col or Scalar: the shape of the tensor bound
    Width width = Width::Full;   // for Tile and Col tensors, and for the columns of ColPartials
    DType dtype = DType::F32;
    bool transposed = false;  // stored N x M (a tile's columns by rows): a store_transposed output, a tile_input_transposed
};

struct CheckedGraph {
    Graph graph;
    std::vector<ValueType> types;   // one per node
    std::vector<Binding> bindings;  // in node order; the kernel's parameter slots follow this order
};

// Ops whose node's name is what the user binds a tensor or scalar to at launch: each gives one Binding.
bool is_binding(Op op);

// Kernel parameter slots (64-bit words, coda::EpilogueArgs): a tile tensor takes two (pointer, leading
// dimension in elements), a vector or partials tensor one (pointer), a scalar one (f32 bits in the low word,
// or a device pointer to the f32 tagged with bit 63).
bool is_tile_tensor(const Binding& b);  // an M x columns(width, N) input, output or accumulate tensor
int slot_count(const Binding& b);
int first_slot(const CheckedGraph& g, std::size_t binding_index);
int total_slots(const CheckedGraph& g);  // the bindings' slots, at least 0
// A block-scaled GEMM's scales take their slots after the bindings' (BlockScaleOperand::kSlots each, in the order of
// coda::block_scale_operands); other graphs none.
int block_scale_slots(const Graph& g);
int args_slots(const CheckedGraph& g);  // total_slots + block_scale_slots: the kernel declares max(1, this)

std::string_view to_string(Kind k);
std::string_view to_string(BindingRole r);

}  // namespace coda
