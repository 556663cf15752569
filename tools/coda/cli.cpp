// Argument parsing kept deliberately small: --name value, --flag, and positional arguments.
#include "coda/cli.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "coda/error.hpp"
#include "config/settings.hpp"
#include "driver/cuda_driver.hpp"

namespace coda::cli {

Arguments::Arguments(int argc, char** argv, int first) {
    for (int i = first; i < argc; ++i) args_.emplace_back(argv[i]);
}

std::string Arguments::option(const std::string& name, const std::string& fallback) {
    for (std::size_t i = 0; i < args_.size(); ++i) {
        if (args_[i] == name) {
            if (i + 1 >= args_.size()) throw Error(fmt::format("option {} needs a value", name));
            std::string value = args_[i + 1];
            args_.erase(args_.begin() + static_cast<long>(i), args_.begin() + static_cast<long>(i) + 2);
            return value;
        }
        if (args_[i].rfind(name + "=", 0) == 0) {
            std::string value = args_[i].substr(name.size() + 1);
            args_.erase(args_.begin() + static_cast<long>(i));
            return value;
        }
    }
    return fallback;
}

bool Arguments::flag(const std::string& name) {
    for (std::size_t i = 0; i < args_.size(); ++i)
        if (args_[i] == name) {
            args_.erase(args_.begin() + static_cast<long>(i));
            return true;
        }
    return false;
}

long long Arguments::number(const std::string& name, long long fallback) {
    const std::string text = option(name);
    if (text.empty()) return fallback;
    try {
        std::size_t used = 0;
        const long long value = std::stoll(text, &used);
        if (used == text.size()) return value;
    } catch (const std::exception&) {
    }
    throw Error(fmt::format("option {} expects a whole number, got '{}'", name, text));
}

std::string Arguments::next_word() {
    for (std::size_t i = 0; i < args_.size(); ++i)
        if (args_[i].empty() || args_[i][0] != '-') {
            std::string word = args_[i];
            args_.erase(args_.begin() + static_cast<long>(i));
            return word;
        }
    return "";
}

std::vector<std::string> Arguments::positional() {
    for (const auto& a : args_)
        if (a.size() > 1 && a[0] == '-') throw Error(fmt::format("unknown option '{}'", a));
    return args_;
}

std::string target_arch(Arguments& args) {
    std::string arch = args.option("--arch");
    if (arch.empty()) arch = settings().arch;
    if (arch.empty() && Driver::instance().available()) arch = Driver::instance().current_device().arch;
    return arch.empty() ? "sm_90a" : arch;
}

std::vector<ParsedGraph> read_graph_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(fmt::format("cannot read graph file '{}'", path));
    std::stringstream text;
    text << in.rdbuf();
    return parse_graph_file(text.str(), path);
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
