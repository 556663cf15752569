// Runs the CLI through the shell (popen) from the source tree, with the cache directory and any wrappers
// (timeout, setpriv) in the command line, and collects its exit status and output.
#include "support/run_cli.hpp"

#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

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

CliRun run_cli_timed(const std::string& arguments, const std::string& cache_dir, int seconds, bool as_nobody) {
    std::string prefix = "timeout -k 5 " + std::to_string(seconds) + " ";
    if (as_nobody && ::geteuid() == 0) {
        const struct passwd* nobody = ::getpwnam("nobody");
        if (nobody == nullptr) throw std::runtime_error("run_cli_timed: there is no user nobody");
        prefix += "setpriv --reuid=" + std::to_string(nobody->pw_uid) + " --regid=" + std::to_string(nobody->pw_gid) +
                  " --clear-groups ";
    }
    // run_cli writes `env` just before its CODA_CACHE_DIR assignment and the CLI; the program env applies
    // that assignment inside the wrappers.
    return run_cli(arguments, cache_dir, prefix + "env ");
}

}  // namespace coda::test
