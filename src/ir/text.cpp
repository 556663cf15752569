// The canonical text printer. Its output is part of every cache key (through graph_hash), so it must be
// deterministic and change only when the graph changes; text_parse.cpp reads the same format back.
#include "ir/text.hpp"

#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "coda/error.hpp"
#include "ir/pass_counts.hpp"

namespace coda {

std::vector<Attr> attributes_of(Op op) {
    switch (op) {
        case Op::TileInput:
        case Op::ColInput: return {Attr::DType, Attr::Width};
        case Op::RowInput:
        case Op::TileInputTransposed:
        case Op::Round:
        case Op::Store:
        case Op::StoreTransposed:
        case Op::Accumulate: return {Attr::DType};
        case Op::Const: return {Attr::Value};
        case Op::ColIndex: return {Attr::Width};
        case Op::Partials:
        case Op::ReduceGroup:
        case Op::ReduceRow:
        case Op::ReduceCol: return {Attr::Reduce};
        default: return {};
    }
}

bool is_identifier(std::string_view s) {
    if (s.empty() || !std::isalpha(static_cast<unsigned char>(s[0]))) return false;
    for (char c : s)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
    return true;
}

std::string const_to_text(float value) {
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
    // fmt prints a float as the shortest decimal that reads back (std::from_chars) to the same bits.
    return fmt::format("{}", value);
}

std::string header_to_text(const Graph& g) {
    std::string out = fmt::format("graph {} {}", g.name(), to_string(g.domain()));
    if (g.domain() == Domain::Gemm) {
        const GemmSpec& s = g.spec();
        out += fmt::format(" in={} a={} b={}", to_string(s.input), to_string(s.a), to_string(s.b));
        // Only where B's type is not A's, so that every other graph's text (and hash) reads as before.
        if (s.b_input() != s.input) out += fmt::format(" in_b={}", to_string(s.b_input()));
        // Likewise only where set.
        if (s.block_scaled()) out += fmt::format(" scales={}", to_string(s.scales));
        if (s.accumulation != Accumulation::Fast) out += fmt::format(" acc={}", to_string(s.accumulation));
    }
    return out;
}

std::string node_to_text(const Graph& g, int id) {
    const Node& n = g.node(id);
    std::string out = fmt::format("%{} = {}", g.display_name(id), op_info(n.op).text);
    for (Attr a : attributes_of(n.op)) {
        switch (a) {
            case Attr::DType: out += fmt::format(" {}", to_string(n.dtype)); break;
            case Attr::Width: out += fmt::format(" {}", to_string(n.width)); break;
            case Attr::Reduce: out += fmt::format(" {}", to_string(n.reduce)); break;
            case Attr::Value: out += " " + const_to_text(n.value); break;
        }
    }
    for (int arg : n.args) out += fmt::format(" %{}", g.display_name(arg));
    return out;
}

std::string to_text(const Graph& g) {
    detail::count_text_rendering();
    std::string out = header_to_text(g) + "\n";
    for (int id = 0; id < static_cast<int>(g.nodes().size()); ++id) out += node_to_text(g, id) + "\n";
    return out;
}

std::string target_to_text(const std::string& arch, const std::string& config_text) {
    return config_text.empty() ? fmt::format("target arch={}\n", arch)
                               : fmt::format("target arch={} config={}\n", arch, config_text);
}

}  // namespace coda
