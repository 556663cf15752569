// The coda command line: demo, dump, warm, cache, bench, tune and help, parsed by CLI11. Each subcommand lives
// in its own file; exit status 0 is success, 1 a coda::Error (or a failed run), 2 a usage error.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "coda/cli.hpp"
#include "coda/error.hpp"

namespace coda::cli {
namespace {

constexpr int kUsageError = 2;

// "coda bench gemm": the names of the subcommands the command line chose.
std::string command_path(const CLI::App& root) {
    std::string path = root.get_name();
    for (const CLI::App* app = &root; !app->get_subcommands().empty();) {
        app = app->get_subcommands().front();
        path += " " + app->get_name();
    }
    return path;
}

// "'gemm', 'jit', 'tile' or 'epilogue'"
std::string choices(const CLI::App& app) {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands({})) names.push_back(fmt::format("'{}'", sub->get_name()));
    std::string out;
    for (std::size_t i = 0; i < names.size(); ++i)
        out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
    return out;
}

bool has_options(const CLI::App* app) {
    return !app->get_options([app](const CLI::Option* o) { return o != app->get_help_ptr(); }).empty();
}

// The help of `app` (called `path`) with every subcommand's options, then the same for each subcommand whose own
// subcommands take options (coda bench gemm ...): CLI11 shows options one level down only.
std::string full_help(const CLI::App& app, const std::string& path) {
    std::string text = app.get_formatter()->make_help(&app, path, CLI::AppFormatMode::All);
    for (const CLI::App* sub : app.get_subcommands({})) {
        const std::vector<const CLI::App*> subs = sub->get_subcommands({});
        if (std::any_of(subs.begin(), subs.end(), has_options))
            text += "\n" + full_help(*sub, path + " " + sub->get_name());
    }
    return text;
}

// coda help [COMMAND...]: every command with its options, or the help of the named (sub)command.
int show_help(const CLI::App& coda, const std::vector<std::string>& topic) {
    const CLI::App* app = &coda;
    std::string path = coda.get_name();
    for (const std::string& name : topic) {
        const std::vector<const CLI::App*> subs = app->get_subcommands({});
        const auto it = std::find_if(subs.begin(), subs.end(), [&](const CLI::App* s) { return s->get_name() == name; });
        if (it == subs.end()) {
            std::fprintf(stderr, "coda help: error: expected %s, got '%s'\n", choices(*app).c_str(), name.c_str());
            return kUsageError;
        }
        app = *it;
        path += " " + name;
    }
    // The formatter directly: App::help would describe the command being run, which is `help` itself.
    const std::string text = topic.empty() ? full_help(coda, path)
                                           : app->get_formatter()->make_help(app, path, CLI::AppFormatMode::Normal);
    std::fputs(text.c_str(), stdout);
    return 0;
}

void add_help(Commands& commands, CLI::App& coda) {
    auto topic = std::make_shared<std::vector<std::string>>();
    CLI::App& help = commands.add(coda, "help", "show every command's options, or one command's (coda help bench gemm)",
                                  [topic, &coda] { return show_help(coda, *topic); });
    help.add_option("command", *topic, "a command, e.g. warm or bench gemm")->type_name("COMMAND");
}

// A usage error: say what was wrong in the words of the command it belongs to, and where to find the usage.
int usage_error(const CLI::App& coda, const CLI::ParseError& e) {
    const CLI::App& at = deepest_chosen(coda);
    const std::string path = command_path(coda);
    std::string message = e.what();
    if (!at.get_subcommands({}).empty()) {
        // A command that needs a subcommand (coda, coda bench, coda cache) got none, or an unknown word.
        const std::vector<std::string> rest = at.remaining();
        message = fmt::format("expected {}{}", choices(at), rest.empty() ? "" : fmt::format(", got '{}'", rest.front()));
    }
    std::fprintf(stderr, "%s: error: %s\nsee '%s --help'\n", path.c_str(), message.c_str(), path.c_str());
    return kUsageError;
}

}  // namespace
}  // namespace coda::cli

int main(int argc, char** argv) {
    using namespace coda::cli;
    CLI::App coda("coda: GEMM epilogues built from primitives, compiled with NVRTC and cached", "coda");
    coda.require_subcommand(1);
    Commands commands;
    add_demo(commands, coda);
    add_dump(commands, coda);
    add_warm(commands, coda);
    add_cache(commands, coda);
    add_bench(commands, coda);
    add_tune(commands, coda);
    add_help(commands, coda);
    // After the subcommands, which would otherwise each repeat it.
    coda.footer("ARCH defaults to $CODA_ARCH, else the current GPU's (sm_90a on Hopper), else sm_90a. Graph files "
                "hold the canonical text form (tools/graphs/*.coda).");
    if (argc < 2) {
        std::fputs(coda.help().c_str(), stderr);
        return kUsageError;
    }
    try {
        coda.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
        std::fputs(coda.help().c_str(), stdout);
        return 0;
    } catch (const CLI::ParseError& e) {
        return usage_error(coda, e);
    }
    const std::string path = command_path(coda);
    try {
        return commands.chosen(coda)();
    } catch (const coda::Error& e) {
        std::fprintf(stderr, "%s: error: %s\n", path.c_str(), e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", path.c_str(), e.what());
        return 3;
    }
}
