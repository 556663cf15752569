// coda dump: the generated CUDA for every graph of the given files, exactly as NVRTC will see it.
#include <cstdio>

#include "coda/cli.hpp"
#include "coda/error.hpp"
#include "coda/runtime.hpp"
#include "ir/check_graph.hpp"

namespace coda::cli {

int cmd_dump(Arguments args) {
    const std::string arch = target_arch(args);
    const auto files = args.positional();
    if (files.empty()) throw Error("dump needs at least one .coda file");
    for (const auto& file : files)
        for (const ParsedGraph& parsed : read_graph_file(file)) {
            check_graph(parsed.graph, &parsed.where);  // errors name the file and line
            CompileOptions options;
            options.arch = arch;
            std::fputs(Runtime::instance().source(parsed.graph, options).c_str(), stdout);
            std::fputs("\n", stdout);
        }
    return 0;
}

}  // namespace coda::cli
