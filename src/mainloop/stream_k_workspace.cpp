#include "mainloop/stream_k_workspace.hpp"

#include <atomic>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "driver/cuda_driver.hpp"

namespace coda {
namespace {

constexpr std::size_t kFlagBytes = kStreamKFlags * sizeof(unsigned);

struct Workspaces {
    std::mutex mutex;
    std::map<std::pair<CUcontext, CUstream>, DeviceBuffer> by_stream;
    std::vector<DeviceBuffer> outgrown;  // still read by launches queued before they were outgrown
};

Workspaces& workspaces() {
    static Workspaces* w = new Workspaces;  // never destroyed: buffers outlive every launch, freed with the process
    return *w;
}

constexpr int kNoOverride = -1;
std::atomic<int> stream_k_override{kNoOverride};

constexpr long long kMinRounds = 20;  // between the 15 rounds measured slower and the 21 measured faster

}  // namespace

bool stream_k_shares(long long tiles, long long ctas, long long k_tiles) {
    const int o = stream_k_override.load(std::memory_order_relaxed);
    const StreamK mode = o == kNoOverride ? settings().stream_k : static_cast<StreamK>(o);
    // The kernel counts the shared rounds' k-tiles (under 2 x ctas units' worth) in an int.
    if (mode == StreamK::Never || ctas < 1 || 2 * ctas * k_tiles >= (1LL << 31)) return false;
    if (mode == StreamK::Always) return true;  // (the kernel still takes whole tiles where sharing cannot help)
    const long long rounds = tiles / ctas, over = tiles % ctas;
    return rounds >= kMinRounds && over != 0 && 2 * over <= ctas && k_tiles >= 2;
}

void set_stream_k_override(std::optional<StreamK> mode) {
    stream_k_override.store(mode ? static_cast<int>(*mode) : kNoOverride, std::memory_order_relaxed);
}

StreamKWorkspace stream_k_workspace(CUstream stream, std::size_t partial_bytes) {
    Driver& driver = Driver::instance();
    Workspaces& w = workspaces();
    std::lock_guard<std::mutex> lock(w.mutex);
    DeviceBuffer& buffer = w.by_stream[{driver.current_context(), stream}];
    if (buffer.bytes() < kFlagBytes + partial_bytes) {
        DeviceBuffer grown(kFlagBytes + partial_bytes);
        driver.memset8_async(grown.ptr(), 0, kFlagBytes, stream);
        if (buffer.bytes() > 0) w.outgrown.push_back(std::move(buffer));
        buffer = std::move(grown);
    }
    StreamKWorkspace out;
    out.partial_flags = reinterpret_cast<unsigned*>(buffer.ptr());
    out.partials = reinterpret_cast<float*>(buffer.ptr() + kFlagBytes);
    return out;
}

}  // namespace coda
