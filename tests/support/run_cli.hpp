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

// As run_cli, but stopped after `seconds` (status 124: a hang fails the test instead of stalling the suite).
// With as_nobody, when the tests run as root (for whom permission bits stop no write), the command runs as
// the user nobody (setpriv), so that a read-only cache directory really is read-only to it.
CliRun run_cli_timed(const std::string& arguments, const std::string& cache_dir, int seconds,
                     bool as_nobody = false);

}  // namespace coda::test
