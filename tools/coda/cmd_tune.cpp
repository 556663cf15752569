// coda tune: times every candidate tile config of GEMM graphs on this GPU, per problem shape, and records the
// fastest in the tuning database, keyed by GPU name, graph hash and shape class; Runtime::default_config uses it.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "coda/blocks.hpp"
#include "coda/cli.hpp"
#include "coda/error.hpp"
#include "coda/kernel_timing.hpp"
#include "coda/runtime.hpp"
#include "config/settings.hpp"
#include "driver/cuda_driver.hpp"
#include "ir/check_graph.hpp"
#include "ir/hash.hpp"
#include "mainloop/mainloops.hpp"
#include "runtime/config_choice.hpp"
#include "tune/tuning_db.hpp"

namespace coda::cli {
namespace {

constexpr int kLaunchesPerRound = 5;  // as in `coda bench gemm`: --iters launches per candidate, 5 per round

std::string block_names() {
    std::string names;
    for (const Graph& g : blocks::llama_block()) names += (names.empty() ? "" : ", ") + g.name();
    return names;
}

// Each argument is a .coda file (every graph in it) or the name of one of coda::blocks' graphs.
std::vector<Graph> resolve_graphs(const std::vector<std::string>& arguments) {
    std::vector<Graph> graphs;
    for (const std::string& arg : arguments) {
        std::error_code ec;
        const bool is_file = std::filesystem::is_regular_file(arg, ec);
        if (is_file || std::filesystem::path(arg).extension() == ".coda") {
            for (ParsedGraph& parsed : read_graph_file(arg)) {
                check_graph(parsed.graph, &parsed.where);  // errors name the file and line
                graphs.push_back(std::move(parsed.graph));
            }
            continue;
        }
        bool found = false;
        for (Graph& g : blocks::llama_block())
            if (g.name() == arg) {
                graphs.push_back(std::move(g));
                found = true;
                break;
            }
        if (!found)
            throw Error(fmt::format("tune: '{}' is neither a .coda file nor a block name; block names are: {}", arg,
                                    block_names()));
    }
    return graphs;
}

std::vector<NamedConfig> candidates_for(const std::string& arch) { return default_gemm_mainloop(arch).candidates(); }

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

struct Timing {
    double ms = -1;     // < 0: failed
    std::string error;
};

// Times every candidate that launches, in interleaved rounds (kernel_timing.hpp): the GPU's clock drifts with
// power and temperature over a run, and candidates timed one after another would each see a different GPU. With
// `solo`, each alone instead (solo_ms: settled by itself, twice in opposite orders), so that one that spends less
// energy gets the clock it would hold at the power limit. A candidate whose first launch fails is reported and left
// out.
std::vector<Timing> time_candidates(const std::vector<Kernel>& kernels, const std::vector<std::string>& compile_errors,
                                    RandomBindings& bindings, int iterations, bool solo) {
    std::vector<Timing> timings(kernels.size());
    std::vector<Args> args(kernels.size());
    std::vector<TimedLaunch> launches;
    std::vector<std::size_t> timed;
    for (std::size_t ci = 0; ci < kernels.size(); ++ci) {
        if (!compile_errors[ci].empty()) {
            timings[ci].error = "compile failed: " + compile_errors[ci];
            continue;
        }
        try {
            args[ci] = bindings.bind(kernels[ci]);
            // A launch that fails on the device shows up here, before it could spoil the timings.
            kernels[ci].launch(args[ci]);
            Driver::instance().synchronize();
        } catch (const std::exception& e) {
            timings[ci].error = first_line(e.what());
            continue;
        }
        launches.push_back({&kernels[ci], &args[ci]});
        timed.push_back(ci);
    }
    if (launches.empty()) return timings;
    const int per_round = std::min(iterations, kLaunchesPerRound);
    const int rounds = (iterations + per_round - 1) / per_round;
    const std::vector<double> ms = solo ? solo_ms(launches, iterations) : interleaved_ms(launches, rounds, per_round).ms;
    for (std::size_t i = 0; i < timed.size(); ++i) timings[timed[i]].ms = ms[i];
    return timings;
}

struct TuneOptions {
    long long m = 0, n = 0, k = 0;
    long long iterations = 50;
    bool solo = false;  // --solo: each config timed alone (solo_ms) instead of in interleaved rounds
    std::vector<std::string> names;
    std::vector<std::string> configs;  // --config: these instead of the mainloop's candidates, nothing recorded
};

int tune(const TuneOptions& given) {
    const long long m = given.m, n = given.n, k = given.k;
    const long long iterations = given.iterations;
    const std::vector<std::string>& names = given.names;
    if (iterations < 1 || iterations > 100000)
        throw Error(fmt::format("tune: need 1 <= --iters <= 100000, got {}", iterations));
    std::vector<ProblemShape> shapes = gemm_shape_set();
    if (m != 0 || n != 0 || k != 0) {
        if (m < 1 || n < 2 || n % 2 != 0 || k < 1)
            throw Error(fmt::format("tune: --m, --n and --k go together and need M >= 1, an even N >= 2 and K >= 1; "
                                    "got M={} N={} K={}",
                                    m, n, k));
        shapes = {{m, n, k}};
    }
    if (names.empty())
        throw Error(fmt::format("tune needs at least one block name or .coda file; block names are: {}", block_names()));

    std::vector<NamedConfig> given_configs;  // parsed before anything needs the GPU: a typo fails at once
    for (const std::string& text : given.configs) {
        KernelConfig config = KernelConfig::parse(text);
        given_configs.push_back({config.to_text(), std::move(config)});
    }

    std::vector<Graph> graphs;
    std::set<std::string> seen;
    for (Graph& g : resolve_graphs(names)) {
        if (g.domain() != Domain::Gemm) {
            std::printf("skipping %s: a %s graph has a fixed tile, there is nothing to tune\n", g.name().c_str(),
                        std::string(to_string(g.domain())).c_str());
            continue;
        }
        if (seen.insert(graph_hash(g)).second) graphs.push_back(std::move(g));
    }
    if (graphs.empty()) throw Error("tune: none of the given graphs is a GEMM epilogue; only those have tile configs");

    Driver& driver = Driver::instance();
    if (!driver.available()) throw Error("coda tune needs a GPU: " + driver.unavailable_reason());
    driver.ensure_context();
    const Driver::DeviceInfo device = driver.current_device();
    // The kernels are timed on this device, so they are built for its arch whatever CODA_ARCH says.
    const std::string arch = device.arch;
    // Given configs (an A/B of a few, or one the candidates lack) are timed instead of the candidates, and
    // nothing is recorded: the database holds the fastest of the candidates, which the runtime may pick from.
    std::vector<NamedConfig> candidates = given_configs;
    if (candidates.empty()) candidates = candidates_for(arch);
    const bool records = given.configs.empty() && candidates.size() > 1;
    const std::filesystem::path db_path = tuning_file();
    std::printf("device: %s (%s, %d SMs)\n", device.name.c_str(), arch.c_str(), device.sm_count);
    if (records)
        std::printf("tuning database: %s\n", db_path.string().c_str());
    else if (!given.configs.empty())
        std::printf("timing the %zu given configs; recording nothing\n", given.configs.size());
    else
        std::printf("on %s tuning has one candidate, the portable default: timing it, recording nothing (tuned "
                    "configs are used on sm_90a only)\n",
                    arch.c_str());
    std::printf(given.solo ? "each config timed alone, settled, twice in opposite orders (--solo)\n"
                           : "configs timed side by side in interleaved rounds of %d launches\n",
                static_cast<int>(std::min<long long>(iterations, kLaunchesPerRound)));
    std::fflush(stdout);  // before the progress bar on stderr

    // Every kernel first, so that no NVRTC compile runs between timed launches: built on all cores, then loaded
    // one by one from the cache. A config that does not compile is reported and left out; the others still run.
    // A mainloop candidate that breaks one of the template's rules for a graph (validate: promoted FP8 accumulation
    // takes cooperative 128 x 128 and 128 x 256 tiles only) is no candidate for it: left out, not reported as failed.
    std::vector<std::vector<std::string>> not_candidate(graphs.size(), std::vector<std::string>(candidates.size()));
    std::vector<WarmJob> jobs, legal_jobs;
    for (std::size_t gi = 0; gi < graphs.size(); ++gi)
        for (std::size_t ci = 0; ci < candidates.size(); ++ci) {
            CompileOptions options;
            options.arch = arch;
            options.config = candidates[ci].config;
            jobs.push_back({&graphs[gi], options});
            if (given_configs.empty()) {
                try {
                    default_gemm_mainloop(arch).validate(graphs[gi], candidates[ci].config, arch);
                } catch (const Error& e) {
                    not_candidate[gi][ci] = first_line(e.what());
                    continue;
                }
            }
            legal_jobs.push_back(jobs.back());
        }
    try {
        warm_in_parallel(legal_jobs, arch);
    } catch (const std::exception&) {
        // The loop below compiles that candidate again, and records its error for the table.
    }
    std::vector<std::vector<Kernel>> kernels(graphs.size(), std::vector<Kernel>(candidates.size()));
    std::vector<std::vector<std::string>> compile_errors(graphs.size(), std::vector<std::string>(candidates.size()));
    Progress progress(graphs.size() * candidates.size());
    for (std::size_t gi = 0; gi < graphs.size(); ++gi)
        for (std::size_t ci = 0; ci < candidates.size(); ++ci) {
            if (!not_candidate[gi][ci].empty()) {
                compile_errors[gi][ci] = not_candidate[gi][ci];
                progress.step(fmt::format("{} {}", graphs[gi].name(), candidates[ci].name));
                continue;
            }
            try {
                kernels[gi][ci] = Runtime::instance().compile(graphs[gi], jobs[gi * candidates.size() + ci].options);
            } catch (const std::exception& e) {
                compile_errors[gi][ci] = first_line(e.what());
            }
            progress.step(fmt::format("{} {}", graphs[gi].name(), candidates[ci].name));
        }
    progress.finish();

    int recorded = 0, failed_problems = 0;
    for (std::size_t gi = 0; gi < graphs.size(); ++gi) {
        const Graph& g = graphs[gi];
        for (const ProblemShape& shape : shapes) {
            const std::string cls = shape_class(shape);
            std::printf("\n%s  M=%lld N=%lld K=%lld  (shape class %s)\n", g.name().c_str(),
                        static_cast<long long>(shape.m), static_cast<long long>(shape.n),
                        static_cast<long long>(shape.k), cls.c_str());
            std::printf("  %-12s %10s %9s\n", "config", "ms", "TFLOP/s");
            const double flops = 2.0 * double(shape.m) * double(shape.n) * double(shape.k);
            RandomBindings bindings(shape.m, shape.n, shape.k);
            const std::vector<Timing> timings =
                time_candidates(kernels[gi], compile_errors[gi], bindings, static_cast<int>(iterations), given.solo);
            int winner = -1;
            for (std::size_t ci = 0; ci < candidates.size(); ++ci)
                if (timings[ci].ms >= 0 && (winner < 0 || timings[ci].ms < timings[static_cast<std::size_t>(winner)].ms))
                    winner = static_cast<int>(ci);
            // What the runtime picks without a record, so the default can be judged against the measurement.
            const std::optional<KernelConfig> fallback =
                choose_config(g, arch, shape, TargetDevice{"", device.sm_count}, nullptr);
            std::vector<std::string> left_out;
            for (std::size_t ci = 0; ci < candidates.size(); ++ci) {
                if (!not_candidate[gi][ci].empty()) {
                    left_out.push_back(candidates[ci].name);
                    continue;
                }
                const Timing& t = timings[ci];
                const std::string marks = std::string(static_cast<int>(ci) == winner ? "  <- fastest" : "") +
                                          (candidates[ci].config == fallback ? "  (default)" : "");
                if (t.ms < 0)
                    std::printf("  %-12s %10s %9s  SKIPPED: %s%s\n", candidates[ci].name.c_str(), "-", "-",
                                t.error.c_str(), marks.c_str());
                else
                    std::printf("  %-12s %10.4f %9.1f%s\n", candidates[ci].name.c_str(), t.ms, flops / t.ms / 1e9,
                                marks.c_str());
            }
            if (!left_out.empty())
                std::printf("  not candidates for this graph (the template's rules): %s\n",
                            fmt::format("{}", fmt::join(left_out, ", ")).c_str());
            if (winner < 0) {
                std::printf("  no candidate ran; nothing recorded\n");
                ++failed_problems;
                continue;
            }
            const NamedConfig& best = candidates[static_cast<std::size_t>(winner)];
            const double best_ms = timings[static_cast<std::size_t>(winner)].ms;
            for (std::size_t ci = 0; ci < candidates.size(); ++ci)
                if (candidates[ci].config == fallback && timings[ci].ms >= 0 && static_cast<int>(ci) != winner)
                    std::printf("  the default %s is %.1f%% slower than %s\n", candidates[ci].name.c_str(),
                                (timings[ci].ms / best_ms - 1) * 100, best.name.c_str());
            std::fflush(stdout);  // a long run shows each table as it is done, also through a pipe
            if (!records) continue;
            record_tuning(db_path, TuningRecord{device.name, graph_hash(g), cls, best.config, best_ms});
            ++recorded;
        }
    }
    std::printf("\n");
    if (records)
        std::printf("recorded %s in %s\n", counted(static_cast<std::size_t>(recorded), "tuned config").c_str(),
                    db_path.string().c_str());
    if (failed_problems > 0)
        std::fprintf(stderr, "error: no candidate ran for %s\n",
                     counted(static_cast<std::size_t>(failed_problems), "graph/shape pair").c_str());
    return failed_problems > 0 ? 1 : 0;
}

}  // namespace

void add_tune(Commands& commands, CLI::App& coda) {
    auto options = std::make_shared<TuneOptions>();
    CLI::App& tune_command =
        commands.add(coda, "tune", "time each candidate tile config of GEMM graphs on the GPU and record the fastest "
                                   "per GPU, graph and shape class in the tuning file",
                     [options] { return tune(*options); });
    tune_command.add_option("--m", options->m, "one shape instead of the benchmark set: M (with --n and --k)")
        ->type_name("M");
    tune_command.add_option("--n", options->n, "one shape: N")->type_name("N");
    tune_command.add_option("--k", options->k, "one shape: K")->type_name("K");
    tune_command.add_option("--iters", options->iterations, "launches of each candidate, in rounds of 5 (default 50)")
        ->type_name("N");
    tune_command.add_flag("--solo", options->solo,
                          "time each config alone (settled by itself, twice in opposite orders) instead of in "
                          "interleaved rounds: at the GPU's power limit, a config that spends less energy shows its "
                          "clock gain only this way");
    tune_command
        .add_option("--config", options->configs,
                    "time this tile config instead of the candidates (repeat for several, e.g. an A/B); with it "
                    "nothing is recorded")
        ->type_name("TEXT")
        ->allow_extra_args(false);  // one TEXT per --config, so that graph files after it stay graphs
    tune_command.add_option("graphs", options->names, "block names (from coda::blocks) or .coda files")
        ->type_name("BLOCK|FILE");
}

}  // namespace coda::cli
