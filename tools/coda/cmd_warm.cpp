// coda warm: compile graphs into the kernel cache ahead of time, on any machine (NVRTC needs no GPU).
#include <cstdio>
#include <mutex>

#include <fmt/format.h>

#include "coda/cli.hpp"
#include "coda/error.hpp"
#include "coda/runtime.hpp"
#include "ir/check_graph.hpp"

namespace coda::cli {

int cmd_warm(Arguments args) {
    const std::string arch = target_arch(args);
    const long long jobs = std::max(1LL, args.number("-j", 1));
    const auto files = args.positional();
    if (files.empty()) throw Error("warm needs at least one .coda file");

    std::vector<ParsedGraph> graphs;
    for (const auto& file : files)
        for (ParsedGraph& parsed : read_graph_file(file)) {
            check_graph(parsed.graph, &parsed.where);  // every graph is valid before any compile starts
            graphs.push_back(std::move(parsed));
        }

    Progress progress(graphs.size());
    std::mutex mutex;
    std::size_t compiled = 0, from_disk = 0, from_memory = 0;
    std::vector<std::string> failures;
    run_in_parallel(graphs.size(), static_cast<std::size_t>(jobs), [&](std::size_t i) {
        const Graph& g = graphs[i].graph;
        try {
            CompileOptions options;
            options.arch = arch;
            const BuildReport r = Runtime::instance().warm(g, options);
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

    std::printf("%zu kernels for %s: %zu compiled, %zu already in the disk cache, %zu in memory\n", graphs.size(),
                arch.c_str(), compiled, from_disk, from_memory);
    for (const auto& f : failures) std::fprintf(stderr, "error: %s\n", f.c_str());
    return failures.empty() ? 0 : 1;
}

}  // namespace coda::cli
