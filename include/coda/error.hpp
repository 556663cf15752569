// Errors: coda::Error for user mistakes (bad graph, bad arguments, unusable environment) and
// coda::InternalError for broken invariants inside coda, which are bugs to report, not to handle.
#pragma once

#include <stdexcept>
#include <string>

namespace coda {

// A user mistake. The message names the user's object, what was expected and what was given.
class Error : public std::runtime_error {
public:
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A broken invariant inside coda: a bug, never the user's fault.
class InternalError : public std::logic_error {
public:
    explicit InternalError(const std::string& message)
        : std::logic_error("coda internal error (this is a bug, please report it): " + message) {}
};

}  // namespace coda
