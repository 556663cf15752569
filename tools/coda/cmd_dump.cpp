// coda dump: the generated CUDA for every graph of the given files, exactly as NVRTC will see it.
#include <cstdio>
#include <memory>

#include <CLI/CLI.hpp>

#include "coda/cli.hpp"
#include "coda/error.hpp"
#include "coda/runtime.hpp"
#include "ir/check_graph.hpp"

namespace coda::cli {
namespace {

struct DumpOptions {
    std::string arch;
    std::vector<std::string> files;
};

int dump(const DumpOptions& given) {
    const std::string arch = target_arch(given.arch);
    if (given.files.empty()) throw Error("dump needs at least one .coda file");
    for (const auto& file : given.files)
        for (const ParsedGraph& parsed : read_graph_file(file)) {
            check_graph(parsed.graph, &parsed.where);  // errors name the file and line
            CompileOptions options;
            options.arch = arch;
            std::fputs(Runtime::instance().source(parsed.graph, options).c_str(), stdout);
            std::fputs("\n", stdout);
        }
    return 0;
}

}  // namespace

void add_dump(Commands& commands, CLI::App& coda) {
    auto options = std::make_shared<DumpOptions>();
    CLI::App& dump_command = commands.add(coda, "dump", "print the generated CUDA for every graph in the .coda files",
                                          [options] { return dump(*options); });
    add_arch_option(dump_command, options->arch);
    dump_command.add_option("files", options->files, "graph files")->type_name("FILE");
}

}  // namespace coda::cli
