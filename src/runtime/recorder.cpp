// The recorder behind CODA_RECORD: the canonical text of each graph built, then the target it was built for.
#include "runtime/recorder.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <mutex>
#include <set>

#include <fmt/format.h>

#include "config/settings.hpp"
#include "ir/text.hpp"
#include "util/log.hpp"

namespace coda {
namespace {

std::string host_name() {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) != 0) return "host";
    return name;
}

}  // namespace

void record_build(const PreparedGraph& graph, const BuildTarget& target, const std::string& key) {
    const std::filesystem::path& dir = settings().record_dir;
    if (dir.empty()) return;
    static std::mutex mutex;
    static std::set<std::string> recorded;
    std::lock_guard<std::mutex> lock(mutex);
    if (!recorded.insert(key).second) return;
    const std::string text =
        graph.text + target_to_text(target.arch, target.config ? target.config->to_text() : std::string());
    const std::filesystem::path file = dir / fmt::format("coda-record-{}-{}.coda", host_name(), getpid());
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    bool ok = fd >= 0;
    if (ok) {
        ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
        ok = ::close(fd) == 0 && ok;
    }
    if (!ok)
        logger("coda.runtime")
            ->warn("CODA_RECORD: could not append graph '{}' to {}", graph.checked.graph.name(), file.string());
}

}  // namespace coda
