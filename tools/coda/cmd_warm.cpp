// coda warm: compile graphs into the kernel cache ahead of time, on any machine (NVRTC needs no GPU).
#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>

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
    std::atomic<std::size_t> next{0};
    std::size_t compiled = 0, from_disk = 0, from_memory = 0;
    std::vector<std::string> failures;
    auto worker = [&] {
        for (std::size_t i = next++; i < graphs.size(); i = next++) {
            const Graph& g = graphs[i].graph;
            try {
                const BuildReport r = Runtime::instance().warm(g, arch);
                std::lock_guard<std::mutex> lock(mutex);
                (r.from == BuildReport::From::Compiled ? compiled
                 : r.from == BuildReport::From::Disk   ? from_disk
                                                       : from_memory)++;
                progress.step(fmt::format("{} ({})", g.name(),
                                          r.from == BuildReport::From::Compiled ? fmt::format("compiled {:.2f} s", r.seconds)
                                                                                : "cached"));
            } catch (const std::exception& e) {  // anything escaping a std::thread would end the process
                std::lock_guard<std::mutex> lock(mutex);
                failures.push_back(fmt::format("{}: {}", g.name(), e.what()));
                progress.step(g.name() + " (FAILED)");
            }
        }
    };
    std::vector<std::thread> threads;
    for (long long t = 0; t < std::min<long long>(jobs, static_cast<long long>(graphs.size())); ++t)
        threads.emplace_back(worker);
    for (auto& t : threads) t.join();
    progress.finish();

    std::printf("%zu kernels for %s: %zu compiled, %zu already in the disk cache, %zu in memory\n", graphs.size(),
                arch.c_str(), compiled, from_disk, from_memory);
    for (const auto& f : failures) std::fprintf(stderr, "error: %s\n", f.c_str());
    return failures.empty() ? 0 : 1;
}

}  // namespace coda::cli
