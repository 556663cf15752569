// coda bench block: every epilogue of coda::blocks at the shape a LLaMA-style block runs it at. Each GEMM epilogue
// is timed next to the identity epilogue of the same GemmSpec and shape (interleaved rounds, each with its default
// config unless --config pins one); tile programs and finalizers, which have no GEMM, as GB/s of the bytes their
// bindings must move. tools/bench_block.sh puts cuBLAS (torch.matmul) and torch's copy bandwidth beside them.
// --list prints the rows without a GPU.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "coda/blocks.hpp"
#include "coda/cli.hpp"
#include "coda/error.hpp"
#include "coda/kernel_timing.hpp"
#include "coda/runtime.hpp"
#include "driver/cuda_driver.hpp"
#include "ir/check_graph.hpp"

namespace coda::cli {
namespace {

// A block's widths: model dimension d, MLP width F (gate/up has 2F interleaved columns), vocabulary V.
struct BlockDims {
    long long d, f, v;
};

constexpr long long kBlockVocab = 32768;    // the vocabulary of the block rows (and of earlier sessions' tables)
constexpr long long kLlama3Vocab = 128256;  // LLaMA-3's: its LM head epilogues run 4x longer at the same d
constexpr long long kLlama3Width = 2048;    // the d run at kLlama3Vocab by default (LLaMA-3.2-1B's)

std::optional<BlockDims> dims_of(long long d, long long vocab) {
    if (d == 2048) return BlockDims{2048, 8192, vocab};
    if (d == 4096) return BlockDims{4096, 14336, vocab};  // LLaMA-3-8B's d and F
    return std::nullopt;
}

// One GEMM a block runs an epilogue on: which projection, and its N x K (M is the tokens).
struct GemmUse {
    std::string gemm;
    long long n, k;
};

// Where each GEMM epilogue of coda::blocks runs (DESIGN.md section 3). out_proj closes both residual branches:
// after the attention output projection (K = d) and after the MLP's down projection (K = F). The backward
// epilogues sit on dgrad GEMMs: dy = dx2 * W_d (N = F, K = d), do = dz * W_gu (N = d, K = 2F) and, for the
// attention norm, do = dz * W_qkv (N = d, K = 3d). Empty for a graph
// this table does not know (a new one must be added here to be benchmarked).
std::vector<GemmUse> gemm_uses(const std::string& graph, const BlockDims& s) {
    if (graph == "out_proj") return {{"attention out", s.d, s.d}, {"down", s.d, s.f}};
    if (graph == "gate_up_swiglu") return {{"gate/up", 2 * s.f, s.d}};
    if (graph == "qkv_rope") return {{"qkv", 3 * s.d, s.d}};
    if (graph.rfind("lm_head", 0) == 0) return {{"lm head", s.v, s.d}};
    if (graph == "swiglu_backward") return {{"down dgrad", s.f, s.d}};
    if (graph == "rmsnorm_backward" || graph == "rmsnorm_backward_residual")
        return {{"gate/up dgrad", s.d, 2 * s.f}, {"qkv dgrad", s.d, 3 * s.d}};
    if (graph == "rmsnorm_backward_bf16") return {{"lm head dgrad", s.d, s.v}};  // the final norm's: do = dlogits W
    return {};
}

// The N of a tile program's M x N index space in the block: RoPE backward runs over the qkv gradient, the
// cross-entropy backward over the logits. 0: unknown.
long long tile_columns(const std::string& graph, const BlockDims& s) {
    if (graph == "copy" || graph == "rms_entry") return s.d;
    if (graph == "swiglu_backward_tile") return s.f;  // over dy, the down projection's dgrad
    if (graph.rfind("rope", 0) == 0) return 3 * s.d;
    if (graph.rfind("cross_entropy", 0) == 0) return s.v;
    return 0;
}

Graph identity_graph(const GemmSpec& spec) {
    Graph g = Graph::gemm("identity", spec);
    g.store(g.accumulator(), "D", DType::BF16);
    return g;
}

// The reference tile program: one bf16 tile in, the same out. Its GB/s is what a tile program can reach.
Graph copy_graph() {
    Graph g = Graph::tile("copy");
    g.store(g.tile_input("x", DType::BF16), "y", DType::BF16);
    return g;
}

// Bytes a memory-bound kernel must move at M x N: every tensor it binds read once and written once (an
// accumulate both), partials included. `partial_tiles` is T of a finalizer's partials.
double moved_bytes(const Kernel& kernel, long long m, long long n, long long partial_tiles) {
    const CheckedGraph g = check_graph(kernel.graph());
    double bytes = 0;
    for (const Binding& b : g.bindings) {
        const double element = static_cast<double>(size_of(b.dtype));
        switch (b.role) {
            case BindingRole::ScalarArg: break;
            case BindingRole::Partials: bytes += 4.0 * static_cast<double>(partial_tiles * m); break;
            case BindingRole::RowPartials:
            case BindingRole::ColPartials: {
                const auto shape = kernel.partials_shape(b.name, m, n);
                bytes += 4.0 * static_cast<double>(shape[0] * shape[1]);
                break;
            }
            default: {
                const double count = b.kind == Kind::Tile  ? static_cast<double>(m * columns(b.width, n))
                                     : b.kind == Kind::Row ? static_cast<double>(m)
                                                           : static_cast<double>(columns(b.width, n));
                bytes += (b.role == BindingRole::InOut ? 2 : 1) * count * element;
            }
        }
    }
    return bytes;
}

struct BlockOptions {
    std::vector<long long> d;
    long long m = 16384;
    std::vector<long long> vocab;  // empty: kBlockVocab at every d, then kLlama3Vocab at kLlama3Width
    long long iterations = 50;
    std::string config_text;
    std::string csv_path;
    std::vector<std::string> only;  // graph names to time (empty: every row)
    bool list = false;
};

// The (d, V) pairs to run, in order: every --d with every --vocab. Without --vocab, V = 32768 at every d and then
// LLaMA-3's V = 128256 at d = 2048 (when 2048 is run), which adds only the rows whose shape depends on V (the LM
// head epilogues, cross-entropy backward and the finalizers of their partials): block_rows drops a row it already
// has.
std::vector<BlockDims> block_shapes(const BlockOptions& given) {
    const std::vector<long long> widths = given.d.empty() ? std::vector<long long>{2048, 4096} : given.d;
    const std::vector<long long> vocabs = given.vocab.empty() ? std::vector<long long>{kBlockVocab} : given.vocab;
    std::vector<BlockDims> dims;
    for (long long d : widths)
        for (long long v : vocabs) {
            const auto known = dims_of(d, v);
            if (!known)
                throw Error(
                    fmt::format("bench block: --d must be 2048 or 4096 (the widths it knows F for), got {}", d));
            dims.push_back(*known);
        }
    if (given.vocab.empty())
        for (long long d : widths)
            if (d == kLlama3Width) dims.push_back(*dims_of(d, kLlama3Vocab));
    return dims;
}

// One GEMM row of the table: an epilogue graph at one use, and its identity twin.
struct GemmRow {
    long long d, v;
    const Graph* graph;
    GemmUse use;
    Graph identity;
    bool timed = true;  // false: kept only as a finalizer's producer (--only)
};

// One memory-bound row: a tile program at M x n, or a finalizer over the partials a GEMM at n wrote: M rows of them
// for row partials, n for column partials (dgamma's).
struct MemoryRow {
    long long d;
    const Graph* graph;
    long long n;
    long long partial_tiles = 0;  // finalizers: T of their partials (from the kernel that writes them)
    long long rows = 0;           // finalizers: L, the vector they fold into (0: M)
};

// A finalizer reads partials that a GEMM epilogue wrote: its rows are M, its T that kernel's tiles along N (known
// once the kernel is built), found by the partials' binding name.
struct FinalizerRow {
    long long d;
    const Graph* graph;
    std::size_t producer;  // index into BlockRows::gemm
    std::string partials;
    bool columns = false;  // column partials: one value per column of the producer (L = its N, T = its M-tiles)
};

struct BlockRows {
    std::vector<GemmRow> gemm;
    std::vector<MemoryRow> memory;  // tile programs; finalizers join once their producers are built
    std::vector<FinalizerRow> finalizers;
};

// Every row from the graphs themselves (built, so validated, before the GPU is needed), by domain, for each
// (d, V) in turn; a row whose graph, d and shape an earlier pair already gave is left out. A graph the first
// pair gives no shape for is an error (a new graph must be added to gemm_uses or tile_columns).
BlockRows block_rows(const std::vector<BlockDims>& dims, const std::vector<Graph>& block, const Graph& copy) {
    BlockRows rows;
    std::set<std::string> seen;
    const auto first = [&](const Graph& g, const std::string& use, long long d, long long n, long long k) {
        return seen.insert(fmt::format("{} {} {} {} {}", g.name(), use, d, n, k)).second;
    };
    std::vector<std::string> unknown;
    for (const BlockDims& s : dims) {
        const bool report = &s == &dims.front();
        for (const Graph& g : block) {
            if (g.domain() != Domain::Gemm) continue;
            const std::vector<GemmUse> uses = gemm_uses(g.name(), s);
            if (uses.empty() && report) unknown.push_back(g.name());
            for (const GemmUse& use : uses)
                if (first(g, use.gemm, s.d, use.n, use.k))
                    rows.gemm.push_back({s.d, s.v, &g, use, identity_graph(g.spec())});
        }
        const long long copy_n = tile_columns("copy", s);
        if (first(copy, "", s.d, copy_n, 0)) rows.memory.push_back({s.d, &copy, copy_n});
        for (const Graph& g : block) {
            if (g.domain() != Domain::Tile) continue;
            const long long n = tile_columns(g.name(), s);
            if (n == 0 && report) unknown.push_back(g.name());
            if (n != 0 && first(g, "", s.d, n, 0)) rows.memory.push_back({s.d, &g, n});
        }
        for (const Graph& f : block) {
            if (f.domain() != Domain::Finalize) continue;
            std::optional<FinalizerRow> row;
            for (const Binding& input : check_graph(f).bindings)
                for (std::size_t i = 0; i < rows.gemm.size(); ++i)
                    for (const Binding& b : check_graph(*rows.gemm[i].graph).bindings)
                        if (!row && input.role == BindingRole::Partials && rows.gemm[i].d == s.d &&
                            rows.gemm[i].v == s.v && b.name == input.name &&
                            (b.role == BindingRole::RowPartials || b.role == BindingRole::ColPartials))
                            row = FinalizerRow{s.d, &f, i, b.name, b.role == BindingRole::ColPartials};
            // At a later V a finalizer whose producer does not depend on V has no new producer row: nothing new.
            if (row && first(f, "", s.d, rows.gemm[row->producer].use.n, 0)) rows.finalizers.push_back(*row);
            else if (!row && report) unknown.push_back(f.name());
        }
    }
    if (!unknown.empty()) {
        std::string names;
        for (const std::string& n : unknown) names += (names.empty() ? "'" : ", '") + n + "'";
        throw Error(fmt::format("bench block: no block shape for {} (add it to gemm_uses or tile_columns in "
                                "tools/coda/cmd_bench_block.cpp; a finalizer needs a GEMM epilogue that writes its "
                                "partials)", names));
    }
    return rows;
}

// --only: the rows of the named graphs ("copy" for the reference copy); a name no row has is an error. A finalizer
// keeps its producer GEMM row, untimed, for its partials' shape.
void keep_only(BlockRows& rows, const std::vector<std::string>& names) {
    if (names.empty()) return;
    std::set<std::string> known;
    for (const GemmRow& r : rows.gemm) known.insert(r.graph->name());
    for (const MemoryRow& r : rows.memory) known.insert(r.graph->name());
    for (const FinalizerRow& r : rows.finalizers) known.insert(r.graph->name());
    for (const std::string& n : names)
        if (!known.count(n)) {
            std::string list;
            for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
            throw Error(fmt::format("bench block: --only '{}' names no row; the rows' graphs are: {}", n, list));
        }
    const std::set<std::string> wanted(names.begin(), names.end());
    const auto unwanted = [&](const auto& r) { return !wanted.count(r.graph->name()); };
    for (GemmRow& r : rows.gemm) r.timed = !unwanted(r);
    rows.memory.erase(std::remove_if(rows.memory.begin(), rows.memory.end(), unwanted), rows.memory.end());
    rows.finalizers.erase(std::remove_if(rows.finalizers.begin(), rows.finalizers.end(), unwanted),
                          rows.finalizers.end());
}

// --list: the rows a run would time, without a GPU (a finalizer's T is known once its producer is built).
int list_rows(const BlockRows& rows, long long m) {
    std::printf("%-30s %-14s %5s %6s %6s %6s %3s\n", "epilogue", "gemm", "d", "M", "N", "K", "B");
    std::size_t timed = rows.memory.size() + rows.finalizers.size();
    for (const GemmRow& r : rows.gemm) {
        if (!r.timed) continue;
        ++timed;
        fmt::print("{:<30} {:<14} {:>5} {:>6} {:>6} {:>6} {:>3}\n", r.graph->name(), r.use.gemm, r.d, m, r.use.n,
                   r.use.k, r.graph->spec().b == Major::K ? "k" : "n");
    }
    std::printf("\n%-33s %-8s %5s %6s %6s\n", "memory-bound kernel", "kind", "d", "M", "N");
    for (const MemoryRow& r : rows.memory)
        fmt::print("{:<33} {:<8} {:>5} {:>6} {:>6}\n", r.graph->name(), "tile", r.d, m, r.n);
    for (const FinalizerRow& r : rows.finalizers) {
        const long long n = rows.gemm[r.producer].use.n;
        fmt::print("{:<33} {:<8} {:>5} {:>6} {:>6}\n", r.graph->name(), "finalize", r.d, r.columns ? n : m, n);
    }
    std::printf("(%s; finalizers: N is the producing GEMM's, M the length they fold into)\n",
                counted(timed, "row").c_str());
    return 0;
}

int bench_block(const BlockOptions& given) {
    const long long m = given.m, iterations = given.iterations;
    if (m < 1) throw Error(fmt::format("bench block: need M >= 1, got {}", m));
    for (long long v : given.vocab)
        if (v < 2 || v % 2 != 0)
            throw Error(
                fmt::format("bench block: need an even --vocab >= 2 (epilogues visit column pairs), got {}", v));
    if (iterations < 1 || iterations > 100000)
        throw Error(fmt::format("bench block: need 1 <= --iters <= 100000, got {}", iterations));
    const std::vector<BlockDims> dims = block_shapes(given);
    CompileOptions base;
    if (!given.config_text.empty()) base.config = KernelConfig::parse(given.config_text);

    const std::vector<Graph> block = blocks::llama_block();
    const Graph copy = copy_graph();
    BlockRows rows = block_rows(dims, block, copy);
    keep_only(rows, given.only);
    if (given.list) return list_rows(rows, m);
    const std::vector<GemmRow>& gemm_rows = rows.gemm;
    std::vector<MemoryRow>& memory_rows = rows.memory;
    std::unique_ptr<std::ofstream> csv;
    if (!given.csv_path.empty()) {
        csv = std::make_unique<std::ofstream>(given.csv_path);
        if (!*csv) throw Error(fmt::format("bench block: cannot write the --csv file '{}'", given.csv_path));
        *csv << "kind,epilogue,gemm,d,m,n,k,a_major,b_major,ms,identity_ms,vs_identity,tflops,bytes,gbps,config\n";
    }

    Driver& driver = Driver::instance();
    if (!driver.available()) throw Error("bench block needs a GPU: " + driver.unavailable_reason());
    driver.ensure_context();
    const std::string arch = driver.current_device().arch;

    // Every kernel first, on all cores, so that no compile runs between timed launches.
    const auto options_for = [&](const GemmRow& r) {
        CompileOptions o = base;
        o.shape = {m, r.use.n, r.use.k};
        return o;
    };
    std::vector<WarmJob> jobs;
    std::set<std::size_t> producers;
    for (const FinalizerRow& r : rows.finalizers) producers.insert(r.producer);
    for (std::size_t i = 0; i < gemm_rows.size(); ++i) {
        const GemmRow& r = gemm_rows[i];
        if (r.timed || producers.count(i)) jobs.push_back({r.graph, options_for(r)});
        if (r.timed) jobs.push_back({&r.identity, options_for(r)});
    }
    for (const MemoryRow& r : memory_rows) jobs.push_back({r.graph, {}});
    for (const FinalizerRow& r : rows.finalizers) jobs.push_back({r.graph, {}});
    warm_in_parallel(jobs, arch);
    for (const FinalizerRow& r : rows.finalizers) {
        const GemmRow& producer_row = gemm_rows[r.producer];
        const Kernel producer = Runtime::instance().compile(*producer_row.graph, options_for(producer_row));
        const long long n = producer_row.use.n;
        memory_rows.push_back({r.d, r.graph, n, producer.partials_shape(r.partials, m, n)[0], r.columns ? n : m});
    }

    const int per_round = static_cast<int>(std::min<long long>(iterations, 5));
    const int rounds = static_cast<int>((iterations + per_round - 1) / per_round);
    std::printf("%-30s %-14s %5s %6s %6s %6s %3s %9s %11s %9s %8s  %s\n", "epilogue", "gemm", "d", "M", "N", "K", "B",
                "ms", "identity ms", "/identity", "TFLOP/s", "config");
    for (const GemmRow& r : gemm_rows) {
        if (!r.timed) continue;
        const CompileOptions options = options_for(r);
        const Kernel epilogue = Runtime::instance().compile(*r.graph, options);
        const Kernel identity = Runtime::instance().compile(r.identity, options);
        // Fresh tensors per row (the largest, lm head's logits, are 1 GiB), shared by the two kernels.
        RandomBindings bindings(m, r.use.n, r.use.k, 17);
        const Args identity_args = bindings.bind(identity);
        const Args epilogue_args = bindings.bind(epilogue);
        const Interleaved t = interleaved_ms({{&identity, &identity_args}, {&epilogue, &epilogue_args}}, rounds,
                                             per_round);
        const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(r.use.n) * static_cast<double>(r.use.k);
        const GemmSpec& spec = r.graph->spec();
        const std::string config = epilogue.config() ? epilogue.config()->to_text() : "fixed tile";
        const std::string b_major = spec.b == Major::K ? "k" : "n";
        fmt::print("{:<30} {:<14} {:>5} {:>6} {:>6} {:>6} {:>3} {:>9.4f} {:>11.4f} {:>9.3f} {:>8.1f}  {}\n",
                   r.graph->name(), r.use.gemm, r.d, m, r.use.n, r.use.k, b_major, t.ms[1], t.ms[0], t.vs_first[1],
                   flops / t.ms[1] / 1e9, config);
        std::fflush(stdout);
        if (csv)
            *csv << fmt::format("gemm,{},{},{},{},{},{},{},{},{:.5f},{:.5f},{:.4f},{:.2f},,,{}\n", r.graph->name(),
                                r.use.gemm, r.d, m, r.use.n, r.use.k, to_string(spec.a), to_string(spec.b), t.ms[1],
                                t.ms[0], t.vs_first[1], flops / t.ms[1] / 1e9, config)
                 << std::flush;
    }

    std::printf("\n%-33s %5s %6s %6s %4s %9s %10s %8s\n", "memory-bound kernel", "d", "M", "N", "T", "ms", "MB moved",
                "GB/s");
    for (const MemoryRow& r : memory_rows) {
        const Kernel kernel = Runtime::instance().compile(*r.graph);
        const long long rows_of = r.rows > 0 ? r.rows : m;  // a finalizer's L
        RandomBindings bindings(rows_of, r.n, 0, 23);
        const Args args = bindings.bind(kernel, r.partial_tiles);
        const Interleaved t = interleaved_ms({{&kernel, &args}}, rounds, per_round);
        const double bytes = moved_bytes(kernel, rows_of, r.n, r.partial_tiles);
        const double gbps = bytes / t.ms[0] / 1e6;
        const std::string what = r.graph->domain() == Domain::Finalize ? "finalize" : "tile";
        fmt::print("{:<33} {:>5} {:>6} {:>6} {:>4} {:>9.4f} {:>10.1f} {:>8.1f}\n", r.graph->name(), r.d, rows_of,
                   r.n, r.partial_tiles > 0 ? std::to_string(r.partial_tiles) : "-", t.ms[0], bytes / 1e6, gbps);
        std::fflush(stdout);
        if (csv)
            *csv << fmt::format("{},{},,{},{},{},{},,,{:.5f},,,,{:.0f},{:.1f},{}\n", what, r.graph->name(), r.d,
                                rows_of, r.n, r.partial_tiles, t.ms[0], bytes, gbps,
                                what == "tile" ? "fixed tile" : "")
                 << std::flush;
    }
    std::printf("(medians over %s of %s each; /identity is the median of the rounds' ratios; memory-bound kernels: "
                "bytes of every binding read or written once; finalizers: N is the producing GEMM's, T its tiles)\n",
                counted(static_cast<std::size_t>(rounds), "interleaved round").c_str(),
                counted(static_cast<std::size_t>(per_round), "launch", "launches").c_str());
    if (csv && !*csv) throw Error(fmt::format("bench block: writing the --csv file '{}' failed", given.csv_path));
    return 0;
}

}  // namespace

void add_bench_block(Commands& commands, CLI::App& bench) {
    auto options = std::make_shared<BlockOptions>();
    CLI::App& block = commands.add(bench, "block", "every coda::blocks epilogue at its block shape: GEMM epilogues "
                                                   "as ratios to the identity GEMM, tile programs and finalizers as "
                                                   "GB/s (GPU)",
                                   [options] { return bench_block(*options); });
    block.add_option("--d", options->d, "model width: 2048 (F 8192) or 4096 (F 14336); repeatable (default both)")
        ->type_name("D");
    block.add_option("--vocab", options->vocab, "vocabulary V, the LM head's N and the cross-entropy width; "
                                                "repeatable (default 32768 at every d, then LLaMA-3's 128256 at "
                                                "d = 2048 for the rows that depend on V)")
        ->type_name("V");
    block.add_option("--m", options->m, "M, tokens (default 16384)")->type_name("M");
    block.add_option("--iters", options->iterations, "launches of each kernel, in rounds of 5 (default 50)")
        ->type_name("N");
    block.add_option("--config", options->config_text, "pin every GEMM kernel's tile config instead of its default")
        ->type_name("TEXT");
    block.add_option("--csv", options->csv_path, "also write the results to this CSV file")->type_name("FILE");
    block.add_option("--only", options->only, "time only these graphs' rows (e.g. ce_finalize; copy: the reference "
                                              "copy); repeatable")
        ->type_name("GRAPH");
    block.add_flag("--list", options->list, "print the rows a run would time and stop (no GPU needed)");
}

}  // namespace coda::cli
