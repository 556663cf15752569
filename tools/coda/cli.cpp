// The shared pieces of the command line (cli.hpp): the subcommand table, the arch, graph files, the progress
// bar and the worker pool.
#include "coda/cli.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "coda/error.hpp"
#include "config/settings.hpp"
#include "driver/cuda_driver.hpp"

namespace coda::cli {

CLI::App& Commands::add(CLI::App& parent, const std::string& name, const std::string& description, Run run) {
    CLI::App* app = parent.add_subcommand(name, description);
    runs_.emplace(app, std::move(run));
    return *app;
}

const Run& Commands::chosen(const CLI::App& root) const {
    const CLI::App& app = deepest_chosen(root);
    const auto it = runs_.find(&app);
    if (it == runs_.end()) throw InternalError(fmt::format("the command line chose '{}', which runs nothing", app.get_name()));
    return it->second;
}

const CLI::App& deepest_chosen(const CLI::App& root) {
    const CLI::App* app = &root;
    while (!app->get_subcommands().empty()) app = app->get_subcommands().front();
    return *app;
}

void add_arch_option(CLI::App& command, std::string& arch) {
    command.add_option("--arch", arch, "the arch to compile for (default: $CODA_ARCH, else the current GPU's, else sm_90a)")
        ->type_name("ARCH");
}

std::string target_arch(const std::string& requested) {
    std::string arch = requested;
    if (arch.empty()) arch = settings().arch;
    if (arch.empty() && Driver::instance().available()) arch = Driver::instance().current_device().arch;
    return arch.empty() ? "sm_90a" : arch;
}

std::vector<ParsedGraph> read_graph_file(const std::string& path) {
    std::error_code ignored;
    if (std::filesystem::is_directory(path, ignored)) {
        std::string directory = path;
        while (directory.size() > 1 && directory.back() == '/') directory.pop_back();
        throw Error(fmt::format("'{}' is a directory; give .coda files (e.g. {}/*.coda)", path, directory));
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(fmt::format("cannot read graph file '{}'", path));
    std::stringstream text;
    text << in.rdbuf();
    std::vector<ParsedGraph> graphs = parse_graph_file(text.str(), path);
    if (graphs.empty())
        throw Error(fmt::format("'{}' holds no graph; expected a line 'graph NAME DOMAIN ...' followed by its nodes",
                                path));
    return graphs;
}

std::string counted(std::size_t n, std::string_view one, std::string_view many) {
    if (n == 1) return fmt::format("1 {}", one);
    return many.empty() ? fmt::format("{} {}s", n, one) : fmt::format("{} {}", n, many);
}

Progress::Progress(std::size_t total) : total_(total), tty_(isatty(fileno(stderr)) != 0) {}

void Progress::step(const std::string& label) {
    ++done_;
    constexpr std::size_t kWidth = 30;
    const std::size_t filled = total_ == 0 ? kWidth : done_ * kWidth / total_;
    const std::string bar = std::string(filled, '#') + std::string(kWidth - filled, ' ');
    std::fprintf(stderr, tty_ ? "\r[%s] %zu/%zu %-40s" : "[%s] %zu/%zu %s\n", bar.c_str(), done_, total_,
                 label.c_str());
    std::fflush(stderr);
}

void Progress::finish() {
    if (tty_) std::fprintf(stderr, "\n");
}

void run_in_parallel(std::size_t count, std::size_t threads, const std::function<void(std::size_t)>& work) {
    std::atomic<std::size_t> next{0};
    const auto worker = [&] {
        for (std::size_t i = next++; i < count; i = next++) work(i);
    };
    std::vector<std::thread> pool;
    for (std::size_t t = 0; t < std::min(threads, count); ++t) pool.emplace_back(worker);
    for (std::thread& t : pool) t.join();
}

}  // namespace coda::cli
