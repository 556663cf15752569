// Shared pieces of the coda command line: the table of subcommands (parsed by CLI11), the arch option,
// graph files, the progress bar, counted nouns and the worker pool.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ir/text.hpp"

namespace CLI {
class App;
}

namespace coda::cli {

// What a subcommand does once the whole command line is parsed: it reads the values its options were bound
// to (held by the function itself) and returns the exit status.
using Run = std::function<int()>;

// The subcommands of the command line, each added by its own cmd_*.cpp with its options and help text.
class Commands {
public:
    // Adds subcommand `name` to `parent`; the returned app takes its options, and `run` runs it when chosen.
    CLI::App& add(CLI::App& parent, const std::string& name, const std::string& description, Run run);
    // The subcommand that the parsed command line chose (the deepest one parsed; CLI11 requires one).
    const Run& chosen(const CLI::App& root) const;

private:
    std::map<const CLI::App*, Run> runs_;
};

// The subcommand the parsed command line chose: the deepest one parsed ("gemm" in coda bench gemm).
const CLI::App& deepest_chosen(const CLI::App& root);

void add_demo(Commands& commands, CLI::App& coda);
void add_dump(Commands& commands, CLI::App& coda);
void add_warm(Commands& commands, CLI::App& coda);
void add_cache(Commands& commands, CLI::App& coda);
void add_bench(Commands& commands, CLI::App& coda);
void add_bench_epilogue(Commands& commands, CLI::App& bench);  // coda bench epilogue (cmd_bench_epilogue.cpp)
void add_bench_block(Commands& commands, CLI::App& bench);     // coda bench block (cmd_bench_block.cpp)
void add_tune(Commands& commands, CLI::App& coda);

// --arch ARCH, bound to `arch`; target_arch resolves what was given.
void add_arch_option(CLI::App& command, std::string& arch);
// The arch to compile for: `requested` (--arch), else CODA_ARCH, else the current GPU's, else sm_90a (no GPU
// needed).
std::string target_arch(const std::string& requested);

// Reads and parses every graph of a .coda file; errors name the file and line. A directory, or a file with
// no graph in it (empty, or comments only), is an error too: a typo in a glob must not pass as nothing to do.
std::vector<ParsedGraph> read_graph_file(const std::string& path);

// "1 kernel", "2 kernels"; `many` for irregular plurals ("entry", "entries").
std::string counted(std::size_t n, std::string_view one, std::string_view many = "");

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

}  // namespace coda::cli
