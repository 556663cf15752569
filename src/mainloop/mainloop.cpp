// The defaults of the Mainloop interface: what a mainloop without configs answers when asked about them.
#include "mainloop/mainloop.hpp"

#include <fmt/format.h>

#include "coda/error.hpp"

namespace coda {

std::string Mainloop::config_to_text(const KernelConfig& config) const {
    throw InternalError(fmt::format("the {} mainloop was asked to print config '{}', which it does not own", name(),
                                    config.to_text()));
}

KernelConfig Mainloop::parse_config(const std::vector<std::string>&, const std::string& text) const {
    throw InternalError(fmt::format("the {} mainloop takes no config, yet was asked to parse '{}'", name(), text));
}

KernelConfig Mainloop::base_config() const {
    throw InternalError(fmt::format("the {} mainloop takes no config, yet was asked for its defaults", name()));
}

void throw_wrong_config(std::string_view mainloop, const char* where) {
    throw InternalError(fmt::format("the {} mainloop's {} was given another mainloop's config, or none", mainloop, where));
}

void expect_reported(const LoadedModule& module, const char* what, int reported, int expected) {
    if (reported != expected)
        throw InternalError(fmt::format("kernel '{}' reports {} = {}; its config asked for {}", module.name, what,
                                        reported, expected));
}

}  // namespace coda
