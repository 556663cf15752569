// Runs the coda command line as a user would, from the source tree, with a private cache directory.
#pragma once

#include <string>

namespace coda::test {

struct CliRun {
    int status = -1;
    std::string output;  // stdout and stderr together
};

// `coda <arguments>` with CODA_CACHE_DIR=cache_dir and the extra environment assignments `env` (e.g.
// "CODA_TUNING_FILE= "), run from the source directory.
CliRun run_cli(const std::string& arguments, const std::string& cache_dir, const std::string& env = "");

}  // namespace coda::test
