// Creates the per-stage spdlog loggers, all sharing one stderr sink, with the level from settings().
// Creation is serialized so that two threads asking for a new stage get the same logger.
#include "util/log.hpp"

#include "config/settings.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <mutex>

namespace coda {

std::shared_ptr<spdlog::logger> logger(const std::string& stage) {
    static std::mutex mutex;
    std::lock_guard<std::mutex> lock(mutex);
    if (auto existing = spdlog::get(stage)) return existing;
    // One sink for every stage keeps lines from different stages whole when threads log at once.
    static const auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto created = std::make_shared<spdlog::logger>(stage, sink);
    created->set_level(spdlog::level::from_str(settings().log_level));
    created->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%n] [%l] %v");
    spdlog::register_logger(created);
    return created;
}

}  // namespace coda
