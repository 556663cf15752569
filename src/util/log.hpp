// Logging: one named spdlog logger per stage ("coda.compile", "coda.cache", "coda.driver", ...), writing to
// stderr at the level of CODA_LOG_LEVEL, so a user can turn on one switch and see every stage.
#pragma once

#include <memory>
#include <string>

#include <spdlog/logger.h>

namespace coda {

// The logger of a stage; created on first use and registered with spdlog under `stage`. An application that
// registers its own logger under that name first (spdlog::register_logger) keeps it: coda then uses it
// as it is. Thread-safe. Throws coda::Error if CODA_LOG_LEVEL is invalid.
std::shared_ptr<spdlog::logger> logger(const std::string& stage);

}  // namespace coda
