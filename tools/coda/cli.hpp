// Shared pieces of the coda command line: argument parsing, graph files and the progress bar.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "ir/text.hpp"

namespace coda::cli {

// A subcommand's arguments: flags ("--arch sm_90a", "-j 4", "--no-run") and the positional rest.
class Arguments {
public:
    Arguments(int argc, char** argv, int first);
    // The value of --name (or -n) if present; consumes it. Throws coda::Error if the value is missing.
    std::string option(const std::string& name, const std::string& fallback = "");
    bool flag(const std::string& name);
    long long number(const std::string& name, long long fallback);
    // Removes and returns the first word that is not an option ("" if none): a sub-subcommand.
    std::string next_word();
    // Whatever is left; throws coda::Error naming any unknown --option.
    std::vector<std::string> positional();

private:
    std::vector<std::string> args_;
};

// The arch to compile for: --arch, else CODA_ARCH, else the current GPU's, else sm_90a (no GPU needed).
std::string target_arch(Arguments& args);

// Reads and parses every graph of a .coda file; errors name the file and line.
std::vector<ParsedGraph> read_graph_file(const std::string& path);

// "[#####     ] 3/11 name" on a terminal (rewritten in place), one line per step otherwise.
class Progress {
public:
    explicit Progress(std::size_t total);
    void step(const std::string& label);
    void finish();

private:
    std::size_t total_;
    std::size_t done_ = 0;
    bool tty_;
};

// Calls work(0) .. work(count - 1) on up to `threads` threads, each taking the next index as it finishes one.
// `work` must not throw (anything escaping a std::thread ends the process): callers catch and record.
void run_in_parallel(std::size_t count, std::size_t threads, const std::function<void(std::size_t)>& work);

int cmd_dump(Arguments args);
int cmd_warm(Arguments args);
int cmd_cache(Arguments args);
int cmd_demo(Arguments args);
int cmd_bench(Arguments args);
int bench_epilogue(Arguments& args);  // coda bench epilogue (cmd_bench_epilogue.cpp)
int cmd_tune(Arguments args);

}  // namespace coda::cli
