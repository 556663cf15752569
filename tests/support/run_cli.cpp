#include "support/run_cli.hpp"

#include <sys/wait.h>

#include <cstdio>
#include <stdexcept>

namespace coda::test {

CliRun run_cli(const std::string& arguments, const std::string& cache_dir, const std::string& env) {
    const std::string command = "cd '" CODA_SOURCE_DIR "' && " + env + "CODA_CACHE_DIR='" + cache_dir + "' '" CODA_CLI_PATH
                                "' " + arguments + " 2>&1";
    CliRun r;
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) throw std::runtime_error("popen failed for: " + command);
    char buffer[4096];
    for (std::size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) r.output.append(buffer, n);
    const int raw = pclose(pipe);
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    return r;
}

}  // namespace coda::test
