// The validation and typing pass: one walk over the nodes that types every value, collects every problem
// in the user's names (never stopping at the first) and lists the kernel's bindings.
#include "ir/check_graph.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "coda/error.hpp"
#include "ir/graph_limits.hpp"
#include "ir/pass_counts.hpp"
#include "ir/text.hpp"
#include "mainloop/block_scales.hpp"
#include "util/quoted.hpp"

namespace coda {
namespace {

std::string_view to_string(Scalar s) {
    switch (s) {
        case Scalar::F32: return "f32";
        case Scalar::I32: return "i32";
        case Scalar::None: return "valueless";
    }
    return "?";
}

Scalar scalar_of(DType d) { return d == DType::I32 ? Scalar::I32 : Scalar::F32; }

std::string describe(const ValueType& t) {
    switch (t.kind) {
        case Kind::Tile: return fmt::format("{} {}-width tile", to_string(t.scalar), to_string(t.width));
        case Kind::Row: return fmt::format("{} row vector", to_string(t.scalar));
        case Kind::Col: return fmt::format("{} {}-width column vector", to_string(t.scalar), to_string(t.width));
        case Kind::Scalar: return fmt::format("{} scalar", to_string(t.scalar));
        case Kind::Sink: return "sink";
    }
    return "?";
}

bool has_width(Kind k) { return k == Kind::Tile || k == Kind::Col; }

bool is_fp8(DType d) { return d == DType::E4M3 || d == DType::E5M2; }

class Checker {
public:
    explicit Checker(const Graph& g)
        : g_(g), n_(static_cast<int>(g.nodes().size())), types_(n_), ok_(n_, false), notes_(n_) {}

    Typing run() {
        std::vector<Problem> graph_level = check_header();
        for (Problem& p : size_problems(g_)) graph_level.push_back(std::move(p));
        std::vector<bool> used(n_, false);
        int sinks = 0, accumulators = 0;
        for (int id = 0; id < n_; ++id) {
            const Node& n = g_.node(id);
            for (int arg : n.args) used[arg] = true;
            if (op_info(n.op).category == OpCategory::Sink) ++sinks;
            if (n.op == Op::Accumulator) ++accumulators;
        }
        for (int id = 0; id < n_; ++id) {
            check_name(id);
            bad_ = false;
            const std::optional<ValueType> t = type_node(id);
            check_fp8(id);
            ok_[id] = t.has_value() && !bad_;
            if (t) types_[id] = *t;
            if (!used[id] && op_info(g_.node(id).op).category != OpCategory::Sink)
                note(id, "computed but never used: store it, reduce it or remove it");
        }
        if (sinks == 0)
            graph_level.push_back({-1, "nothing would be written: add a store, accumulate, reduce_row or reduce_col"});
        if (g_.domain() == Domain::Gemm && accumulators == 0)
            graph_level.push_back({-1, "a gemm graph must use its accumulator (the GEMM result): add "
                                       "`%acc = accumulator` and use it"});

        // Bindings need every node's type; the parameter bytes need the bindings.
        std::vector<Binding> bound;
        if (std::all_of(ok_.begin(), ok_.end(), [](bool ok) { return ok; })) {
            bound = bindings();
            if (std::optional<Problem> p = parameter_problem(bound, block_scale_slots(g_)))
                graph_level.push_back(std::move(*p));
        }

        Typing out;
        out.problems = std::move(graph_level);
        for (int id = 0; id < n_; ++id)
            for (std::string& m : notes_[id]) out.problems.push_back({id, std::move(m)});
        out.types = types_;
        if (out.problems.empty()) out.bindings = std::move(bound);
        return out;
    }

private:
    // FP8 (e4m3, e5m2) tensors: GEMM operands, and tile tensors of full or double width (a tile_input, or a store
    // in a tile-shaped graph). A half-width one would stage 16-byte rows of a chunk, under TMA's smallest swizzle.
    void check_fp8(int id) {
        const Node& n = g_.node(id);
        if (!is_fp8(n.dtype)) return;
        if (n.op == Op::StoreTransposed) return;  // written element by element, unstaged: any width
        const bool tile_tensor = n.op == Op::TileInput || n.op == Op::TileInputTransposed ||
                                 (n.op == Op::Store && g_.domain() != Domain::Finalize);
        if (!tile_tensor) {
            fail(id, fmt::format("{} is a GEMM operand (GemmSpec input) or tile tensor (tile_input, store) type: {} "
                                 "takes bf16, f16, f32 or i32",
                                 to_string(n.dtype), op_name(id)));
            return;
        }
        const int value = n.op == Op::Store ? n.args.at(0) : id;
        const Width width = n.op == Op::Store ? types_[value].width : n.width;
        if (width == Width::Half)
            fail(id, fmt::format("{} tile tensors are full or double width; a half-width one is too narrow to stage "
                                 "(store the full-width value, or use bf16)",
                                 to_string(n.dtype)));
    }

    std::vector<Problem> check_header() const {
        std::vector<Problem> out;
        if (g_.domain() == Domain::Gemm) {
            const GemmSpec& spec = g_.spec();
            if (spec.input == DType::F32 || spec.input == DType::I32)
                out.push_back({-1, fmt::format("GEMM operands must be bf16, f16, e4m3 or e5m2, got in={}",
                                               to_string(spec.input))});
            // wgmma mixes e4m3 and e5m2 (either way round) but no other pair of types.
            if (spec.b_input() != spec.input && !(is_fp8(spec.input) && is_fp8(spec.b_input())))
                out.push_back({-1, fmt::format("GEMM operands of two types must both be FP8 (e4m3 or e5m2), got "
                                               "in={} for A and in_b={} for B; give B A's type, or make both FP8",
                                               to_string(spec.input), to_string(spec.b_input()))});
            // wgmma takes 8-bit operands only from K-major shared memory (it transposes 16-bit ones alone).
            else if (is_fp8(spec.input) && (spec.a != Major::K || spec.b != Major::K))
                out.push_back({-1, fmt::format("{} operands must both be K-major (A stored M x K, B stored N x K): "
                                               "Hopper's FP8 MMA reads no other layout; got a={}, b={}",
                                               spec.b_input() == spec.input
                                                   ? std::string(to_string(spec.input))
                                                   : fmt::format("{} x {}", to_string(spec.input),
                                                                 to_string(spec.b_input())),
                                               to_string(spec.a), to_string(spec.b))});
            // The scales come per 128 k of FP8 data, DeepSeek-V3's recipe; 16-bit operands need none.
            if (spec.block_scaled() && !(is_fp8(spec.input) && is_fp8(spec.b_input())))
                out.push_back({-1, fmt::format("block scales (scales={}) are for FP8 operands (e4m3 or e5m2), "
                                               "got in={} for A and {} for B; make both FP8, or drop the block scales",
                                               to_string(spec.scales), to_string(spec.input),
                                               to_string(spec.b_input()))});
            // 16-bit wgmma accumulates in f32 already; a block-scaled GEMM promotes every k-block with its scales.
            if (spec.accumulation == Accumulation::Promoted && !(is_fp8(spec.input) && is_fp8(spec.b_input())))
                out.push_back({-1, fmt::format("promoted accumulation (acc=promoted) is for FP8 operands (e4m3 or "
                                               "e5m2), got in={} for A and {} for B, which wgmma sums in f32 already; "
                                               "drop acc=promoted (accumulation Fast, the default)",
                                               to_string(spec.input), to_string(spec.b_input()))});
            else if (spec.accumulation == Accumulation::Promoted && spec.block_scaled())
                out.push_back({-1, "promoted accumulation (acc=promoted) with block scales (scales=block) is "
                                   "redundant: a block-scaled GEMM adds every 128-k block into f32 with its scales "
                                   "already; drop acc=promoted (accumulation Fast, the default)"});
        }
        if (!is_identifier(g_.name()))
            out.push_back({-1, fmt::format("graph name {} is not an identifier: use letters, digits and '_', "
                                           "starting with a letter",
                                           quoted(g_.name()))});
        return out;
    }

    void note(int id, std::string message) { notes_[id].push_back(std::move(message)); }

    // A typing problem: the node gets an error type, so its users stay silent.
    void fail(int id, std::string message) {
        note(id, std::move(message));
        bad_ = true;
    }

    std::string ref(int id) const { return quoted("%" + g_.display_name(id)); }
    std::string_view op_name(int id) const { return op_info(g_.node(id).op).text; }

    void check_name(int id) {
        const Node& n = g_.node(id);
        if (n.name.empty()) {
            if (is_binding(n.op))
                note(id, fmt::format("a {} must be named: the name is what it is bound to at launch",
                                     op_info(n.op).text));
            return;
        }
        if (n.name[0] == '_')
            note(id, fmt::format("names starting with '_' are reserved for unnamed nodes (printed as %_<id>); "
                                 "rename {}",
                                 quoted(n.name)));
        else if (!is_identifier(n.name))
            note(id, fmt::format("name {} is not an identifier: use letters, digits and '_', starting with a "
                                 "letter",
                                 quoted(n.name)));
        if (g_.domain() == Domain::Gemm && (n.name == "A" || n.name == "B"))
            note(id, fmt::format("the name '{}' is reserved for the GEMM operand {} in gemm graphs; choose another "
                                 "name",
                                 n.name, n.name));
        if (const BlockScaleOperand* scales = find_block_scale(g_, n.name))
            note(id, fmt::format("the name '{}' is reserved for {}'s block scales in block-scaled gemm graphs; "
                                 "choose another name",
                                 n.name, scales->operand));
        const auto [it, inserted] = first_of_name_.emplace(n.name, id);
        if (!inserted)
            note(id, fmt::format("the name {} is already taken by an earlier node ({}); names must be unique "
                                 "within a graph",
                                 quoted(n.name), quoted(node_to_text(g_, it->second), '`', kShownLineBytes)));
    }

    std::optional<ValueType> type_node(int id) {
        const Node& n = g_.node(id);
        const OpInfo& info = op_info(n.op);
        if (static_cast<int>(n.args.size()) != info.arity) {
            fail(id, fmt::format("{} takes {} operand{}, got {}", info.text, info.arity, info.arity == 1 ? "" : "s",
                                 n.args.size()));
            return std::nullopt;
        }
        for (int arg : n.args)
            if (!ok_[arg]) return std::nullopt;  // the operand's own problem is reported already
        for (int arg : n.args) {
            if (types_[arg].kind != Kind::Sink) continue;
            const Op sink = g_.node(arg).op;
            const bool reduce = sink == Op::ReduceRow || sink == Op::ReduceCol;
            fail(id, fmt::format("operand {} is a {} sink and has no value; {}", ref(arg), op_info(sink).text,
                                 reduce ? "partials are read by a finalize graph with partials(...)"
                                        : fmt::format("use its operand {} instead", ref(g_.node(arg).args[0]))));
            return std::nullopt;
        }
        switch (info.category) {
            case OpCategory::Source: return type_source(id);
            case OpCategory::Unary: return type_unary(id);
            case OpCategory::Binary: return type_binary(id);
            case OpCategory::Compare: return type_compare(id);
            case OpCategory::Select: return type_select(id);
            case OpCategory::Pair: return type_pair(id);
            case OpCategory::Sink: return type_sink(id);
        }
        throw InternalError(fmt::format("op '{}' has no category", info.text));
    }

    // Sources that read per-column or per-tile data have nothing to read in a finalize graph.
    bool not_in_finalize(int id) {
        if (g_.domain() != Domain::Finalize) return false;
        fail(id, fmt::format("{} is not available in a finalize graph: a finalize graph works on row vectors "
                             "(partials, row_input, row_index, scalar, const)",
                             op_name(id)));
        return true;
    }

    std::optional<ValueType> type_source(int id) {
        const Node& n = g_.node(id);
        switch (n.op) {
            case Op::Accumulator:
                if (g_.domain() != Domain::Gemm) {
                    fail(id, fmt::format("accumulator exists only in gemm graphs; a {} graph reads its data with "
                                         "tile_input, row_input and col_input",
                                         to_string(g_.domain())));
                    return std::nullopt;
                }
                if (accumulator_ >= 0)
                    fail(id, fmt::format("a graph has one accumulator and {} already reads it; use that node",
                                         ref(accumulator_)));
                else
                    accumulator_ = id;
                return ValueType{Kind::Tile, Width::Full, Scalar::F32};
            case Op::TileInput:
                if (not_in_finalize(id)) return std::nullopt;
                return ValueType{Kind::Tile, n.width, scalar_of(n.dtype)};
            case Op::TileInputTransposed:
                // Staged transposed through shared memory by the tile program alone; a GEMM's epilogue reads its
                // tile tensors in the accumulator's layout, row by row.
                if (g_.domain() != Domain::Tile) {
                    fail(id, fmt::format("tile_input_transposed is read by tile programs only (Graph::tile); in a {} "
                                         "graph, read the tensor with tile_input as stored, or transpose it first",
                                         to_string(g_.domain())));
                    return std::nullopt;
                }
                return ValueType{Kind::Tile, Width::Full, scalar_of(n.dtype)};
            case Op::RowInput: return ValueType{Kind::Row, Width::Full, scalar_of(n.dtype)};
            case Op::ColInput:
                if (not_in_finalize(id)) return std::nullopt;
                return ValueType{Kind::Col, n.width, scalar_of(n.dtype)};
            case Op::Scalar: return ValueType{Kind::Scalar, Width::Full, Scalar::F32};
            case Op::Const:
                if (std::isnan(n.value)) fail(id, "the constant is NaN; use a number, inf or -inf");
                return ValueType{Kind::Scalar, Width::Full, Scalar::F32};
            case Op::RowIndex: return ValueType{Kind::Row, Width::Full, Scalar::I32};
            case Op::ColIndex:
                if (not_in_finalize(id)) return std::nullopt;
                return ValueType{Kind::Col, n.width, Scalar::I32};
            case Op::Partials:
                if (g_.domain() != Domain::Finalize) {
                    fail(id, fmt::format("partials exist only in finalize graphs; in a {} graph, write partials "
                                         "with reduce_row or reduce_col and combine them in a finalize graph",
                                         to_string(g_.domain())));
                    return std::nullopt;
                }
                if (n.reduce == ReduceOp::SumSq)
                    fail(id, "partials cannot combine with sumsq: the partials of a sumsq reduction are sums "
                             "already, so combine them with sum");
                return ValueType{Kind::Row, Width::Full, Scalar::F32};
            default: break;
        }
        throw InternalError(fmt::format("'{}' is not a source", op_name(id)));
    }

    // reduce_group's values are made in a pass before the visits: the Hopper mainloop's over the accumulator in
    // registers, reading the tile inputs it needs from global memory (the visits read them again, staged), a tile
    // program's over its inputs. Its operand cannot come from another group reduction, which that pass has not made.
    void check_group_reduction(int id, const ValueType& t) {
        const Node& n = g_.node(id);
        if (g_.domain() == Domain::Finalize) {
            fail(id, "reduce_group reduces a tile's row groups: gemm graphs and tile programs only, not finalize graphs");
            return;
        }
        if (t.kind != Kind::Tile)
            fail(id, fmt::format("reduce_group reduces over a row's 128-column groups of a tile, but {} is an {}",
                                 ref(n.args[0]), describe(t)));
        if (n.reduce != ReduceOp::Sum && n.reduce != ReduceOp::Max && n.reduce != ReduceOp::Min)
            fail(id, fmt::format("reduce_group takes sum, max or min, not {}", to_string(n.reduce)));
        std::vector<int> pending = {n.args[0]};
        std::vector<bool> seen(g_.nodes().size(), false);
        while (!pending.empty()) {
            const int v = pending.back();
            pending.pop_back();
            if (seen[static_cast<std::size_t>(v)]) continue;
            seen[static_cast<std::size_t>(v)] = true;
            if (g_.node(v).op == Op::ReduceGroup) {
                fail(id, fmt::format("reduce_group's operand depends on {}: a group value cannot depend on another "
                                     "(all of them are made in one pass before the visits)",
                                     ref(v)));
                return;
            }
            for (int a : g_.node(v).args) pending.push_back(a);
        }
    }

    std::optional<ValueType> type_unary(int id) {
        const Node& n = g_.node(id);
        const int x = n.args[0];
        ValueType t = types_[x];
        if (n.op == Op::ToF32) {
            if (t.scalar != Scalar::I32)
                fail(id, fmt::format("to_f32 converts i32 values, but {} is an {}: remove the to_f32", ref(x),
                                     describe(t)));
            t.scalar = Scalar::F32;
            return t;
        }
        if (t.scalar != Scalar::F32)
            fail(id, fmt::format("{} needs an f32 operand, but {} is an {}: convert it with to_f32 first",
                                 op_name(id), ref(x), describe(t)));
        if (n.op == Op::ReduceGroup) check_group_reduction(id, t);
        if (n.op == Op::Round && n.dtype == DType::I32)
            fail(id, "round targets bf16, f16 or f32, not i32 (values inside a kernel are f32; store indices as "
                     "i32 instead)");
        return t;
    }

    // The broadcast of operand kinds: tiles absorb rows and columns, rows x columns is an outer product,
    // scalars go with anything. Widths must agree wherever both sides have one.
    std::optional<ValueType> broadcast(int id, const std::vector<int>& operands) {
        ValueType out = types_[operands[0]];
        int width_from = has_width(out.kind) ? operands[0] : -1;
        for (std::size_t i = 1; i < operands.size(); ++i) {
            const ValueType& t = types_[operands[i]];
            if (has_width(t.kind)) {
                if (width_from >= 0 && types_[width_from].width != t.width) {
                    const Width a = types_[width_from].width, b = t.width;
                    const bool ordered = static_cast<int>(a) < static_cast<int>(b);
                    fail(id, fmt::format("{}/{} width mixing: {} is an {} and {} is an {}; use even/odd or join to "
                                         "bring them to one width",
                                         to_string(ordered ? a : b), to_string(ordered ? b : a), ref(width_from),
                                         describe(types_[width_from]), ref(operands[i]), describe(t)));
                    return std::nullopt;
                }
                if (width_from < 0) width_from = operands[i];
            }
            const Kind a = out.kind, b = t.kind;
            if (a == Kind::Scalar)
                out.kind = b;
            else if (b != Kind::Scalar && a != b)
                out.kind = Kind::Tile;  // tile with row or column, or row x column (outer product)
            if (width_from >= 0) out.width = types_[width_from].width;
        }
        if (!has_width(out.kind)) out.width = Width::Full;
        return out;
    }

    std::optional<ValueType> type_binary(int id) {
        const Node& n = g_.node(id);
        for (int x : n.args)
            if (types_[x].scalar != Scalar::F32) {
                fail(id, fmt::format("{} needs f32 operands, but {} is an {}: convert it with to_f32 first",
                                     op_name(id), ref(x), describe(types_[x])));
                return std::nullopt;
            }
        return broadcast(id, n.args);
    }

    std::optional<ValueType> type_compare(int id) {
        const Node& n = g_.node(id);
        const int a = n.args[0], b = n.args[1];
        if (types_[a].scalar != types_[b].scalar) {
            fail(id, fmt::format("{} compares values of one type, but {} is an {} and {} is an {}: convert the i32 "
                                 "one with to_f32",
                                 op_name(id), ref(a), describe(types_[a]), ref(b), describe(types_[b])));
            return std::nullopt;
        }
        std::optional<ValueType> t = broadcast(id, n.args);
        if (t) t->scalar = Scalar::F32;
        return t;
    }

    std::optional<ValueType> type_select(int id) {
        const Node& n = g_.node(id);
        const int mask = n.args[0], a = n.args[1], b = n.args[2];
        if (types_[mask].scalar != Scalar::F32) {
            fail(id, fmt::format("the mask of select must be f32 (a compare result), but {} is an {}", ref(mask),
                                 describe(types_[mask])));
            return std::nullopt;
        }
        if (types_[a].scalar != types_[b].scalar) {
            fail(id, fmt::format("select chooses between values of one type, but {} is an {} and {} is an {}: "
                                 "convert the i32 one with to_f32",
                                 ref(a), describe(types_[a]), ref(b), describe(types_[b])));
            return std::nullopt;
        }
        std::optional<ValueType> t = broadcast(id, n.args);
        if (t) t->scalar = types_[a].scalar;
        return t;
    }

    std::optional<ValueType> type_pair(int id) {
        const Node& n = g_.node(id);
        for (int x : n.args) {
            const ValueType& t = types_[x];
            if (!has_width(t.kind)) {
                fail(id, fmt::format("{} works on adjacent column pairs of a tile or column vector, but {} is an {}",
                                     op_name(id), ref(x), describe(t)));
                return std::nullopt;
            }
            if (t.scalar != Scalar::F32) {
                fail(id, fmt::format("{} needs f32 values, but {} is an {}: convert it with to_f32 first",
                                     op_name(id), ref(x), describe(t)));
                return std::nullopt;
            }
        }
        ValueType t = types_[n.args[0]];
        if (n.op != Op::Join) {
            if (t.width == Width::Half) {
                fail(id, fmt::format("{} needs a full or double width value, but {} is an {}: it is one half of a "
                                     "pair already",
                                     op_name(id), ref(n.args[0]), describe(t)));
                return std::nullopt;
            }
            t.width = t.width == Width::Double ? Width::Full : Width::Half;
            return t;
        }
        const int odd = n.args[1];
        const ValueType& u = types_[odd];
        if (t.kind != u.kind) {
            fail(id, fmt::format("join needs two tiles or two column vectors, but {} is an {} and {} is an {}",
                                 ref(n.args[0]), describe(t), ref(odd), describe(u)));
            return std::nullopt;
        }
        std::optional<ValueType> r = broadcast(id, n.args);
        if (!r) return std::nullopt;
        if (t.width == Width::Double) {
            fail(id, fmt::format("join of two double-width values would be four times as wide; {} and {} are {}s",
                                 ref(n.args[0]), ref(odd), describe(t)));
            return std::nullopt;
        }
        r->width = t.width == Width::Half ? Width::Full : Width::Double;
        return r;
    }

    std::optional<ValueType> type_sink(int id) {
        const Node& n = g_.node(id);
        const int x = n.args[0];
        const ValueType& t = types_[x];
        const bool finalize = g_.domain() == Domain::Finalize;
        const ValueType sink{Kind::Sink, Width::Full, Scalar::None};
        if (n.op == Op::ReduceRow || n.op == Op::ReduceCol) {
            if (finalize) {
                fail(id, fmt::format("{} is not available in a finalize graph: finalize graphs combine partials "
                                     "and store row vectors",
                                     op_name(id)));
            } else if (t.kind != Kind::Tile) {
                fail(id, fmt::format("{} reduces a tile, but {} is an {}", op_name(id), ref(x), describe(t)));
            } else if (t.scalar != Scalar::F32) {
                fail(id, fmt::format("{} needs an f32 tile, but {} is an {}: convert it with to_f32 first",
                                     op_name(id), ref(x), describe(t)));
            }
            return sink;
        }
        const Kind wanted = finalize ? Kind::Row : Kind::Tile;
        if (finalize && n.op == Op::StoreTransposed) {
            fail(id, "store_transposed writes a tile transposed: gemm graphs and tile programs only, not finalize "
                     "graphs");
        } else if (t.kind != wanted) {
            fail(id, fmt::format("in a {} graph {} writes a {}, but {} is an {}", to_string(g_.domain()), op_name(id),
                                 finalize ? "row vector" : "tile", ref(x), describe(t)));
        } else if (n.op == Op::Accumulate && t.scalar != Scalar::F32) {
            fail(id, fmt::format("accumulate adds into a float tensor, but {} is an {}: convert it with to_f32 first",
                                 ref(x), describe(t)));
        } else if (t.scalar == Scalar::F32 && n.dtype == DType::I32) {
            fail(id, fmt::format("{} is f32 and cannot be written as i32: use bf16, f16 or f32", ref(x)));
        } else if (t.scalar == Scalar::I32 && n.dtype != DType::I32) {
            fail(id, fmt::format("{} is i32 and can only be stored as i32, not {}: convert it with to_f32 to store a "
                                 "float",
                                 ref(x), to_string(n.dtype)));
        }
        return sink;
    }

    std::vector<Binding> bindings() const {
        std::vector<Binding> out;
        for (int id = 0; id < n_; ++id) {
            const Node& n = g_.node(id);
            Binding b;
            b.name = n.name;
            b.node = id;
            b.dtype = n.dtype;
            const ValueType* operand = n.args.empty() ? nullptr : &types_[n.args[0]];
            switch (n.op) {
                case Op::TileInput: b.role = BindingRole::Input, b.kind = Kind::Tile, b.width = n.width; break;
                case Op::TileInputTransposed:
                    b.role = BindingRole::Input, b.kind = Kind::Tile, b.transposed = true;
                    break;
                case Op::RowInput: b.role = BindingRole::Input, b.kind = Kind::Row; break;
                case Op::ColInput: b.role = BindingRole::Input, b.kind = Kind::Col, b.width = n.width; break;
                case Op::Scalar: b.role = BindingRole::ScalarArg, b.kind = Kind::Scalar, b.dtype = DType::F32; break;
                case Op::Partials: b.role = BindingRole::Partials, b.kind = Kind::Row, b.dtype = DType::F32; break;
                case Op::Store:
                case Op::StoreTransposed:
                case Op::Accumulate:
                    b.role = n.op == Op::Accumulate ? BindingRole::InOut : BindingRole::Output;
                    b.kind = operand->kind;
                    b.width = operand->width;
                    b.transposed = n.op == Op::StoreTransposed;
                    break;
                case Op::ReduceRow:
                case Op::ReduceCol:
                    b.role = n.op == Op::ReduceRow ? BindingRole::RowPartials : BindingRole::ColPartials;
                    b.kind = n.op == Op::ReduceRow ? Kind::Row : Kind::Col;
                    b.width = operand->width;
                    b.dtype = DType::F32;
                    break;
                default: continue;
            }
            out.push_back(std::move(b));
        }
        return out;
    }

    const Graph& g_;
    int n_;
    std::vector<ValueType> types_;
    std::vector<bool> ok_;
    std::vector<std::vector<std::string>> notes_;
    std::map<std::string, int> first_of_name_;
    int accumulator_ = -1;
    bool bad_ = false;  // the node being typed has a typing problem
};

}  // namespace

Typing type_graph(const Graph& g) {
    detail::count_typing();
    return Checker(g).run();
}

std::string format_problems(const Graph& g, const std::vector<Problem>& problems, const SourceMap* where) {
    std::string out;
    for (const Problem& p : problems) {
        if (!out.empty()) out += '\n';
        if (where) {
            const bool known = p.node >= 0 && p.node < static_cast<int>(where->node_lines.size());
            const int line = known ? where->node_lines[static_cast<std::size_t>(p.node)] : where->header_line;
            out += p.node >= 0 ? fmt::format("{}:{}: node {}: {}", where->source_name, line,
                                             quoted("%" + g.display_name(p.node)), p.message)
                               : fmt::format("{}:{}: graph {}: {}", where->source_name, line, quoted(g.name()), p.message);
        } else {
            out += p.node >= 0 ? fmt::format("graph {}, node {} ({}): {}", quoted(g.name()),
                                             quoted("%" + g.display_name(p.node)), quoted(node_to_text(g, p.node), '`', kShownLineBytes),
                                             p.message)
                               : fmt::format("graph {}: {}", quoted(g.name()), p.message);
        }
    }
    return out;
}

CheckedGraph check_graph(const Graph& g, const SourceMap* where) {
    Typing t = type_graph(g);
    if (!t.problems.empty()) throw Error(format_problems(g, t.problems, where));
    // A clone: the user may keep adding nodes to g, which must not change what was checked.
    return CheckedGraph{g.clone(), std::move(t.types), std::move(t.bindings)};
}

}  // namespace coda
