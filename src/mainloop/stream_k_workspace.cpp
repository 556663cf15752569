#include "mainloop/stream_k_workspace.hpp"

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

}  // namespace

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
