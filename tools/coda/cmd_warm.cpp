// coda warm: compile graphs into the kernel cache ahead of time, on any machine (NVRTC needs no GPU).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "coda/cli.hpp"
#include "coda/error.hpp"
#include "coda/runtime.hpp"
#include "ir/check_graph.hpp"
#include "ir/text.hpp"

namespace coda::cli {
namespace {

struct WarmOptions {
    std::string arch;
    std::string config;
    long long jobs = 1;
    std::vector<std::string> files;
};

// One kernel to build: a graph with the arch and config it is built for.
struct WarmJob {
    const Graph* graph;
    CompileOptions options;
};

int warm(const WarmOptions& given) {
    const std::string arch = target_arch(given.arch);
    const long long jobs_at_once = std::max(1LL, given.jobs);
    if (given.files.empty()) throw Error("warm needs at least one .coda file");
    const std::optional<KernelConfig> config =
        given.config.empty() ? std::nullopt : std::optional<KernelConfig>(KernelConfig::parse(given.config));

    std::vector<ParsedGraph> graphs;
    for (const auto& file : given.files)
        for (ParsedGraph& parsed : read_graph_file(file)) {
            check_graph(parsed.graph, &parsed.where);  // every graph is valid before any compile starts
            graphs.push_back(std::move(parsed));
        }
    // A graph with `target` lines (CODA_RECORD's files) is built for each of them; any other for --arch and
    // --config (or the arch's default config).
    std::vector<WarmJob> jobs;
    std::set<std::string> archs;
    for (const ParsedGraph& parsed : graphs) {
        if (parsed.targets.empty()) {
            CompileOptions options;
            options.arch = arch;
            if (parsed.graph.domain() == Domain::Gemm) options.config = config;
            jobs.push_back({&parsed.graph, options});
        }
        for (const RecordedTarget& t : parsed.targets) {
            CompileOptions options;
            options.arch = t.arch;
            try {
                if (!t.config_text.empty()) options.config = KernelConfig::parse(t.config_text);
            } catch (const Error& e) {
                throw Error(fmt::format("{}:{}: {}", parsed.where.source_name, t.line, e.what()));
            }
            jobs.push_back({&parsed.graph, options});
        }
    }
    for (const WarmJob& job : jobs) archs.insert(job.options.arch);

    Progress progress(jobs.size());
    std::mutex mutex;
    std::size_t compiled = 0, from_disk = 0, from_memory = 0;
    std::vector<std::string> failures;
    run_in_parallel(jobs.size(), static_cast<std::size_t>(jobs_at_once), [&](std::size_t i) {
        const Graph& g = *jobs[i].graph;
        try {
            const BuildReport r = Runtime::instance().warm(g, jobs[i].options);
            std::lock_guard<std::mutex> lock(mutex);
            (r.from == BuildReport::From::Compiled ? compiled
             : r.from == BuildReport::From::Disk   ? from_disk
                                                   : from_memory)++;
            progress.step(fmt::format("{} ({})", g.name(),
                                      r.from == BuildReport::From::Compiled ? fmt::format("compiled {:.2f} s", r.seconds)
                                                                            : "cached"));
        } catch (const std::exception& e) {  // run_in_parallel's work must not throw
            std::lock_guard<std::mutex> lock(mutex);
            failures.push_back(fmt::format("{}: {}", g.name(), e.what()));
            progress.step(g.name() + " (FAILED)");
        }
    });
    progress.finish();

    std::printf("%s for %s: %zu compiled, %zu already in the disk cache, %zu in memory\n",
                counted(jobs.size(), "kernel").c_str(), fmt::format("{}", fmt::join(archs, ", ")).c_str(), compiled,
                from_disk, from_memory);
    for (const auto& f : failures) std::fprintf(stderr, "error: %s\n", f.c_str());
    return failures.empty() ? 0 : 1;
}

}  // namespace

void add_warm(Commands& commands, CLI::App& coda) {
    auto options = std::make_shared<WarmOptions>();
    CLI::App& warm_command = commands.add(coda, "warm", "compile every graph of the .coda files into the kernel cache "
                                                        "(no GPU needed); a second run compiles nothing",
                                          [options] { return warm(*options); });
    add_arch_option(warm_command, options->arch);
    warm_command.add_option("--config", options->config,
                            "the tile config of GEMM graphs, e.g. 'hopper bm=128 bn=256 cooperative' (default: the "
                            "arch's default, as Runtime::compile without a config)")
        ->type_name("TEXT");
    // -j N, -jN and --jobs=N, as make and ninja take them.
    warm_command.add_option("-j,--jobs", options->jobs, "compile up to N graphs at once (default 1)")->type_name("N");
    warm_command.add_option("files", options->files, "graph files")->type_name("FILE");
}

}  // namespace coda::cli
