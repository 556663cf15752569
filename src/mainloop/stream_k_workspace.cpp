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

struct StreamBuffer {
    DeviceBuffer buffer;
    // Whether the flags were zeroed eagerly in stream order. A memset captured into a CUDA graph zeroes them in each
    // replay, not now: the next launch outside a capture zeroes them again.
    bool flags_zeroed = false;
};

struct Workspaces {
    std::mutex mutex;
    std::map<std::pair<CUcontext, CUstream>, StreamBuffer> by_stream;
    std::vector<DeviceBuffer> outgrown;  // still read by launches queued before they were outgrown
};

Workspaces& workspaces() {
    static Workspaces* w = new Workspaces;  // never destroyed: buffers outlive every launch, freed with the process
    return *w;
}

constexpr int kNoOverride = -1;
std::atomic<int> stream_k_override{kNoOverride};

constexpr long long kMinRounds = 20;  // between the 15 rounds measured slower and the 21 measured faster

// Relaxed stream-capture mode for the calling thread while it lives, when its stream is being captured: cuMemAlloc
// is prohibited under a global-mode capture (torch.cuda.graph's) and would invalidate it. The allocation is not part
// of the graph; the flags' memset is, and runs before the kernel in each replay (harmless: flags are zero between
// launches).
class RelaxedCaptureScope {
public:
    RelaxedCaptureScope(Driver& driver, bool capturing) : driver_(driver), active_(capturing) {
        if (active_) previous_ = driver.exchange_capture_mode(CU_STREAM_CAPTURE_MODE_RELAXED);
    }
    ~RelaxedCaptureScope() {
        if (!active_) return;
        try {
            driver_.exchange_capture_mode(previous_);
        } catch (...) {
            // Restoring cannot fail for a mode the driver just returned; a destructor must not throw.
        }
    }
    RelaxedCaptureScope(const RelaxedCaptureScope&) = delete;
    RelaxedCaptureScope& operator=(const RelaxedCaptureScope&) = delete;

private:
    Driver& driver_;
    CUstreamCaptureMode previous_ = CU_STREAM_CAPTURE_MODE_GLOBAL;
    bool active_ = false;
};

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
    StreamBuffer& s = w.by_stream[{driver.current_context(), stream}];
    const std::size_t bytes = kFlagBytes + partial_bytes;
    if (s.buffer.bytes() < bytes || !s.flags_zeroed) {
        const bool capturing = driver.is_capturing(stream);
        if (s.buffer.bytes() < bytes) {
            DeviceBuffer grown;
            {
                const RelaxedCaptureScope relaxed(driver, capturing);
                grown = DeviceBuffer(bytes);
            }
            if (s.buffer.bytes() > 0) w.outgrown.push_back(std::move(s.buffer));
            s.buffer = std::move(grown);
        }
        driver.memset8_async(s.buffer.ptr(), 0, kFlagBytes, stream);
        s.flags_zeroed = !capturing;
    }
    StreamKWorkspace out;
    out.partial_flags = reinterpret_cast<unsigned*>(s.buffer.ptr());
    out.partials = reinterpret_cast<float*>(s.buffer.ptr() + kFlagBytes);
    return out;
}

}  // namespace coda
