// The canonical text parser: reads files of graphs (as written by to_text, or by hand) back into Graphs,
// with a SourceMap so that validation can point at file lines. Syntax errors name the file, line and node.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "coda/error.hpp"
#include "ir/graph_access.hpp"
#include "ir/text.hpp"
#include "util/quoted.hpp"

namespace coda {
namespace {

constexpr std::string_view kOpNames[] = {
#define CODA_OP(Enum, text, category, arity, cuda) text,
#include "coda/ops.def"
#undef CODA_OP
};

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = up;
        }
    }
    return row[b.size()];
}

std::string close_op_names(std::string_view word) {
    std::vector<std::string_view> close;
    for (std::string_view name : kOpNames) {
        // Lengths more than 2 apart are more than 2 edits apart: a huge token costs no quadratic time.
        const bool near = word.size() <= name.size() + 2 && name.size() <= word.size() + 2;
        if ((near && edit_distance(word, name) <= 2) || (word.size() >= 3 && name.substr(0, word.size()) == word))
            close.push_back(name);
    }
    if (close.empty()) return "see include/coda/ops.def for the list of ops";
    return fmt::format("did you mean {}?", fmt::join(close.begin(), close.end(), " or "));
}

std::vector<std::string_view> split(std::string_view line) {
    std::vector<std::string_view> out;
    std::size_t i = 0;
    const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; };
    while (i < line.size()) {
        while (i < line.size() && space(line[i])) ++i;
        const std::size_t start = i;
        while (i < line.size() && !space(line[i])) ++i;
        if (i > start) out.push_back(line.substr(start, i - start));
    }
    return out;
}

std::string_view attr_placeholder(Attr a) {
    switch (a) {
        case Attr::DType: return "DTYPE";
        case Attr::Width: return "WIDTH";
        case Attr::Reduce: return "REDUCEOP";
        case Attr::Value: return "VALUE";
    }
    return "?";
}

std::string_view attr_choices(Attr a) {
    switch (a) {
        case Attr::DType: return "a dtype (bf16, f16, f32, i32)";
        case Attr::Width: return "a width (half, full, double)";
        case Attr::Reduce: return "a reduce op (sum, max, min, sumsq, lse)";
        case Attr::Value: return "a number, inf or -inf";
    }
    return "?";
}

// Why a constant is out of f32's range: too large, or so small (not 0) that it would round to 0. A nonzero
// constant never silently becomes 0; subnormal values are in range and kept as they are.
std::string out_of_range(std::string_view token) {
    // strtod only classifies: from_chars has read the token as a number already.
    const bool underflow = std::fabs(std::strtod(std::string(token).c_str(), nullptr)) < 1.0;
    if (underflow)
        return fmt::format("constant {} underflows f32: it would round to 0 (the smallest f32 above 0 is about "
                           "1.4e-45); write 0 if zero is meant",
                           quoted(token));
    return fmt::format("constant {} overflows f32 (at most about 3.4e38 in magnitude); write inf or -inf for an "
                       "infinity",
                       quoted(token));
}

class Parser {
public:
    explicit Parser(std::string_view source) : source_(source) {}

    std::vector<ParsedGraph> parse(std::string_view text) {
        // A UTF-8 byte-order mark, as some editors write it, is skipped: it says nothing a .coda file needs.
        constexpr std::string_view kByteOrderMark = "\xef\xbb\xbf";
        if (text.substr(0, kByteOrderMark.size()) == kByteOrderMark) text.remove_prefix(kByteOrderMark.size());
        int number = 0;
        std::size_t pos = 0;
        while (pos <= text.size()) {
            std::size_t end = text.find('\n', pos);
            if (end == std::string_view::npos) end = text.size();
            std::string_view line = text.substr(pos, end - pos);
            pos = end + 1;
            ++number;
            line = line.substr(0, line.find('#'));
            const std::vector<std::string_view> tokens = split(line);
            if (tokens.empty()) continue;
            if (tokens[0] == "graph")
                header(number, tokens);
            else if (tokens[0] == "target")
                target(number, line, tokens);
            else if (tokens[0][0] == '%')
                node(number, tokens);
            else
                fail(number, fmt::format("expected a node `%name = op ...` or a `graph NAME DOMAIN` header, got {}",
                                         quoted(tokens[0])));
        }
        return std::move(graphs_);
    }

private:
    // `target arch=ARCH [config=TEXT...]`: the config is the rest of the line, whatever spaces it holds.
    void target(int number, std::string_view line, const std::vector<std::string_view>& tokens) {
        if (graphs_.empty()) fail(number, "a `target` line comes before any `graph NAME DOMAIN` header");
        if (tokens.size() < 2 || tokens[1].substr(0, 5) != "arch=" || tokens[1].size() == 5)
            fail(number, "expected `target arch=ARCH` or `target arch=ARCH config=CONFIG`, e.g. `target arch=sm_90a "
                         "config=hopper bm=128 bn=128`");
        RecordedTarget t{std::string(tokens[1].substr(5)), "", number};
        if (tokens.size() > 2) {
            if (tokens[2].substr(0, 7) != "config=")
                fail(number, fmt::format("target: expected config=CONFIG after the arch, got {}", quoted(tokens[2])));
            const std::size_t at = static_cast<std::size_t>(tokens[2].data() - line.data()) + 7;
            t.config_text = std::string(line.substr(at));
            while (!t.config_text.empty() && (t.config_text.back() == ' ' || t.config_text.back() == '\t' ||
                                              t.config_text.back() == '\r'))
                t.config_text.pop_back();
            if (t.config_text.empty()) fail(number, "target: config= is empty");
        }
        graphs_.back().targets.push_back(std::move(t));
    }

    [[noreturn]] void fail(int line, const std::string& message) const {
        throw Error(fmt::format("{}:{}: {}", source_, line, message));
    }
    [[noreturn]] void fail_node(int line, std::string_view name, const std::string& message) const {
        throw Error(fmt::format("{}:{}: node {}: {}", source_, line, quoted(fmt::format("%{}", name)), message));
    }

    void header(int line, const std::vector<std::string_view>& tokens) {
        if (tokens.size() < 3)
            fail(line, "graph header: expected `graph NAME DOMAIN` (DOMAIN is gemm, tile or finalize)");
        const std::optional<Domain> domain = parse_domain(tokens[2]);
        if (!domain)
            fail(line, fmt::format("graph {}: unknown domain {}; expected gemm, tile or finalize", quoted(tokens[1]),
                                   quoted(tokens[2])));
        GemmSpec spec;
        std::map<std::string_view, bool> seen;
        for (std::size_t i = 3; i < tokens.size(); ++i) {
            if (*domain != Domain::Gemm)
                fail(line, fmt::format("graph {}: unexpected {}; only gemm graphs take in=, in_b=, a=, b=, scales= "
                                       "and acc=",
                                       quoted(tokens[1]), quoted(tokens[i])));
            const std::size_t eq = tokens[i].find('=');
            const std::string_view key = tokens[i].substr(0, eq);
            const std::string_view value = eq == std::string_view::npos ? "" : tokens[i].substr(eq + 1);
            if (seen[key])
                fail(line, fmt::format("graph {}: {} is given twice", quoted(tokens[1]), quoted(fmt::format("{}=", key))));
            seen[key] = true;
            if (key == "in" && parse_dtype(value)) {
                spec.input = *parse_dtype(value);
            } else if (key == "in_b" && parse_dtype(value)) {
                spec.input_b = *parse_dtype(value);
            } else if ((key == "a" || key == "b") && parse_major(value)) {
                (key == "a" ? spec.a : spec.b) = *parse_major(value);
            } else if (key == "scales" && parse_scale_mode(value)) {
                spec.scales = *parse_scale_mode(value);
            } else if (key == "acc" && parse_accumulation(value)) {
                spec.accumulation = *parse_accumulation(value);
            } else {
                fail(line, fmt::format("graph {}: expected in=<bf16|f16|e4m3|e5m2>, in_b=<e4m3|e5m2> (B's type "
                                       "where it is not A's), a=<k|mn>, b=<k|mn>, scales=<block|block_1x128|none> "
                                       "(FP8 block scales of A and B: B's per 128 x 128 block, or per row "
                                       "and 128 k as A's) or acc=<fast|promoted> (FP8: each 128-k block's sum "
                                       "added in f32), got {}",
                                       quoted(tokens[1]), quoted(tokens[i])));
            }
        }
        const std::string name(tokens[1]);
        Graph g = *domain == Domain::Gemm   ? Graph::gemm(name, spec)
                  : *domain == Domain::Tile ? Graph::tile(name)
                                            : Graph::finalize(name);
        graphs_.push_back(ParsedGraph{std::move(g), SourceMap{std::string(source_), {}, line}, {}});
        defined_.clear();
    }

    void node(int line, const std::vector<std::string_view>& tokens) {
        const std::string_view shown = tokens[0].substr(1);
        if (graphs_.empty())
            fail_node(line, shown, "comes before any `graph NAME DOMAIN` header; start the graph with one");
        ParsedGraph& current = graphs_.back();
        const int id = static_cast<int>(current.graph.nodes().size());
        Node n;
        if (!shown.empty() && shown[0] == '_') {
            if (shown != fmt::format("_{}", id))
                fail_node(line, shown, fmt::format("names starting with '_' are reserved for unnamed nodes, which "
                                                   "print as %_<id>; this is node {}, so use %_{} or a name of "
                                                   "your own",
                                                   id, id));
        } else if (!is_identifier(shown)) {
            fail_node(line, shown, "expected a node name of letters, digits and '_', starting with a letter");
        } else {
            n.name = std::string(shown);
        }
        if (const auto it = defined_.find(std::string(shown)); it != defined_.end())
            fail_node(line, shown, fmt::format("duplicate node name (first defined on line {})", it->second.line));
        if (tokens.size() < 3 || tokens[1] != "=")
            fail_node(line, shown, "expected `%name = op attributes... operands...`");

        const std::optional<Op> op = parse_op(tokens[2]);
        if (!op) fail_node(line, shown, fmt::format("unknown op {}; {}", quoted(tokens[2]), close_op_names(tokens[2])));
        n.op = *op;
        const OpInfo& info = op_info(n.op);
        const std::vector<Attr> attrs = attributes_of(n.op);
        std::string usage(info.text);
        for (Attr a : attrs) usage += fmt::format(" {}", attr_placeholder(a));
        for (int i = 0; i < info.arity; ++i) usage += fmt::format(" %{}", static_cast<char>('a' + i));

        std::size_t t = 3;
        for (Attr a : attrs) {
            if (t >= tokens.size() || tokens[t][0] == '%')
                fail_node(line, shown, fmt::format("missing attribute: expected {} (usage: `{}`)", attr_choices(a),
                                                   usage));
            parse_attr(line, shown, a, tokens[t++], n, usage);
        }
        for (; t < tokens.size(); ++t) {
            if (tokens[t][0] != '%')
                fail_node(line, shown, fmt::format("unexpected {} where an operand `%name` was expected (usage: "
                                                   "`{}`)",
                                                   quoted(tokens[t]), usage));
            const auto it = defined_.find(std::string(tokens[t].substr(1)));
            if (it == defined_.end())
                fail_node(line, shown, fmt::format("unknown operand {}: no node of that name is defined above",
                                                   quoted(tokens[t])));
            n.args.push_back(it->second.id);
        }
        if (static_cast<int>(n.args.size()) != info.arity)
            fail_node(line, shown, fmt::format("{} takes {} operand{}, got {} (usage: `{}`)", info.text, info.arity,
                                               info.arity == 1 ? "" : "s", n.args.size(), usage));
        detail::GraphAccess::append(current.graph, std::move(n));
        current.where.node_lines.push_back(line);
        defined_.emplace(std::string(shown), Defined{id, line});
    }

    void parse_attr(int line, std::string_view shown, Attr a, std::string_view token, Node& n,
                    const std::string& usage) const {
        bool good = true;
        switch (a) {
            case Attr::DType:
                if (const auto d = parse_dtype(token)) n.dtype = *d; else good = false;
                break;
            case Attr::Width:
                if (const auto w = parse_width(token)) n.width = *w; else good = false;
                break;
            case Attr::Reduce:
                if (const auto r = parse_reduce_op(token)) n.reduce = *r; else good = false;
                break;
            case Attr::Value: {
                const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), n.value);
                const bool whole = end == token.data() + token.size();
                if (ec == std::errc::result_out_of_range && whole) fail_node(line, shown, out_of_range(token));
                good = ec == std::errc() && whole;
                break;
            }
        }
        if (!good)
            fail_node(line, shown, fmt::format("expected {}, got {} (usage: `{}`)", attr_choices(a), quoted(token), usage));
    }

    std::string_view source_;
    std::vector<ParsedGraph> graphs_;
    struct Defined {
        int id;
        int line;
    };
    std::map<std::string, Defined> defined_;  // by display name, in the current graph
};

}  // namespace

std::vector<ParsedGraph> parse_graph_file(std::string_view text, std::string_view source_name) {
    return Parser(source_name).parse(text);
}

std::vector<Graph> parse_graphs(std::string_view text, std::string_view source_name) {
    std::vector<Graph> graphs;
    for (ParsedGraph& parsed : parse_graph_file(text, source_name)) graphs.push_back(std::move(parsed.graph));
    return graphs;
}

Graph parse_graph(std::string_view text) {
    std::vector<ParsedGraph> graphs = parse_graph_file(text, "<text>");
    if (graphs.size() != 1)
        throw Error(fmt::format("expected exactly one graph in the text, found {}", graphs.size()));
    return std::move(graphs[0].graph);
}

}  // namespace coda
