// Driver: loads libcuda on first use, keeps the reason when it cannot, and wraps each call so that a failure
// names the call and the CUDA error. The instance lives for the whole process (see instance()).
#include "driver/cuda_driver.hpp"

#include "coda/error.hpp"
#include "util/log.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

namespace coda {
namespace {

std::string describe(const DriverApi& api, CUresult result) {
    const char* name = nullptr;
    const char* text = nullptr;
    if (api.cuGetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) name = "CUDA_ERROR_UNKNOWN";
    if (api.cuGetErrorString(result, &text) != CUDA_SUCCESS || text == nullptr) text = "unrecognized error code";
    return fmt::format("{}: {} (code {})", name, text, static_cast<int>(result));
}

// The resolved driver, or null with `reason` saying why there is none.
std::unique_ptr<DriverApi> load_driver(std::string& reason) {
    void* library = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
        const char* why = ::dlerror();
        reason = fmt::format("the NVIDIA driver library libcuda.so.1 could not be loaded ({}); loading and "
                             "launching kernels needs an NVIDIA GPU and its driver",
                             why != nullptr ? why : "unknown reason");
        return nullptr;
    }
    auto api = std::make_unique<DriverApi>();
    if (std::string missing = resolve_driver_api(library, *api); !missing.empty()) {
        reason = fmt::format("libcuda.so.1 lacks {}: the NVIDIA driver is older than CUDA {}.{}, which coda was "
                             "built with; update the driver",
                             missing, CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
        return nullptr;
    }
    if (CUresult r = api->cuInit(0); r != CUDA_SUCCESS) {
        reason = "cuInit failed: " + describe(*api, r);
        return nullptr;
    }
    int count = 0;
    if (CUresult r = api->cuDeviceGetCount(&count); r != CUDA_SUCCESS) {
        reason = "cuDeviceGetCount failed: " + describe(*api, r);
        return nullptr;
    }
    if (count == 0) {
        reason = "the NVIDIA driver sees no GPU (check CUDA_VISIBLE_DEVICES)";
        return nullptr;
    }
    return api;
}

}  // namespace

std::string sm_arch(int major, int minor) {
    if ((major == 9 || major == 10) && minor == 0) return fmt::format("sm_{}{}a", major, minor);
    return fmt::format("sm_{}{}", major, minor);
}

Driver& Driver::instance() {
    // Never destroyed: modules and buffers held by other static objects may be released during exit, after
    // a destroyed Driver would have been gone.
    static Driver* driver = new Driver();
    return *driver;
}

Driver::Driver() {
    api_ = load_driver(reason_);
    if (!api_) logger("coda.driver")->info("no GPU: {}", reason_);
}

bool Driver::available() const { return api_ != nullptr; }

const std::string& Driver::unavailable_reason() const { return reason_; }

const DriverApi& Driver::api() const {
    if (!api_) throw Error("no CUDA driver: " + reason_);
    return *api_;
}

void Driver::check(CUresult result, const char* call, const std::string& context) const {
    if (result == CUDA_SUCCESS) return;
    throw Error(fmt::format("{} failed: {}{}", call, describe(api(), result),
                            context.empty() ? std::string() : " [" + context + "]"));
}

CUcontext Driver::ensure_context() {
    const DriverApi& a = api();
    CUcontext current = nullptr;
    check(a.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
    if (current != nullptr) return current;
    std::lock_guard<std::mutex> lock(mutex_);
    if (primary_ == nullptr) {
        CUdevice device = 0;
        check(a.cuDeviceGet(&device, 0), "cuDeviceGet", "device 0");
        check(a.cuDevicePrimaryCtxRetain(&primary_, device), "cuDevicePrimaryCtxRetain", "device 0");
    }
    check(a.cuCtxSetCurrent(primary_), "cuCtxSetCurrent");
    return primary_;
}

CUcontext Driver::current_context() {
    const DriverApi& a = ready();
    CUcontext context = nullptr;
    check(a.cuCtxGetCurrent(&context), "cuCtxGetCurrent");
    return context;
}

const DriverApi& Driver::ready() {
    ensure_context();
    return *api_;
}

Driver::DeviceInfo Driver::current_device() {
    const DriverApi& a = ready();
    CUdevice device = 0;
    check(a.cuCtxGetDevice(&device), "cuCtxGetDevice");
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = devices_.find(static_cast<int>(device)); it != devices_.end()) return it->second;
    DeviceInfo info{static_cast<int>(device), "", 0, 0, 0, ""};
    char name[256] = {};
    check(a.cuDeviceGetName(name, sizeof name, device), "cuDeviceGetName");
    info.name = name;
    check(a.cuDeviceGetAttribute(&info.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
          "cuDeviceGetAttribute", "compute capability major");
    check(a.cuDeviceGetAttribute(&info.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
          "cuDeviceGetAttribute", "compute capability minor");
    check(a.cuDeviceGetAttribute(&info.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device),
          "cuDeviceGetAttribute", "multiprocessor count");
    info.arch = sm_arch(info.cc_major, info.cc_minor);
    devices_.emplace(info.ordinal, info);
    return info;
}

CUmodule Driver::load_module(const std::string& cubin) {
    const DriverApi& a = ready();
    CUmodule module = nullptr;
    check(a.cuModuleLoadData(&module, cubin.data()), "cuModuleLoadData", fmt::format("{} bytes", cubin.size()));
    return module;
}

void Driver::unload_module(CUmodule module) {
    if (module == nullptr) return;
    check(ready().cuModuleUnload(module), "cuModuleUnload");
}

CUfunction Driver::function(CUmodule module, const std::string& mangled_name) {
    CUfunction f = nullptr;
    check(ready().cuModuleGetFunction(&f, module, mangled_name.c_str()), "cuModuleGetFunction", mangled_name);
    return f;
}

void Driver::read_global(CUmodule module, const std::string& name, void* dst, std::size_t bytes) {
    const DriverApi& a = ready();
    CUdeviceptr ptr = 0;
    std::size_t size = 0;
    check(a.cuModuleGetGlobal(&ptr, &size, module, name.c_str()), "cuModuleGetGlobal", name);
    if (size != bytes)
        throw InternalError(fmt::format("device global '{}' is {} bytes, the host expects {}", name, size, bytes));
    check(a.cuMemcpyDtoH(dst, ptr, bytes), "cuMemcpyDtoH", name);
}

void Driver::set_dynamic_smem(CUfunction function, int bytes) {
    check(ready().cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
          "cuFuncSetAttribute", fmt::format("max dynamic shared memory {} bytes", bytes));
}

int Driver::max_active_clusters(CUfunction function, unsigned cluster, unsigned block, unsigned smem) {
    CUlaunchConfig config{};
    config.gridDimX = cluster;  // one cluster: the grid only has to be a multiple of the cluster shape
    config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = block;
    config.blockDimY = config.blockDimZ = 1;
    config.sharedMemBytes = smem;
    int clusters = 0;
    check(ready().cuOccupancyMaxActiveClusters(&clusters, function, &config), "cuOccupancyMaxActiveClusters",
          fmt::format("clusters of {} CTAs, block {}, dynamic smem {} bytes", cluster, block, smem));
    return clusters;
}

void Driver::launch(CUfunction function, unsigned gx, unsigned gy, unsigned gz, unsigned block, unsigned smem,
                    CUstream stream, void** params) {
    const DriverApi& a = api();
    const CUresult r = a.cuLaunchKernel(function, gx, gy, gz, block, 1, 1, smem, stream, params, nullptr);
    if (r != CUDA_SUCCESS)
        check(r, "cuLaunchKernel", fmt::format("grid {}x{}x{}, block {}, dynamic smem {} bytes", gx, gy, gz, block,
                                               smem));
}

CUdeviceptr Driver::alloc(std::size_t bytes) {
    const DriverApi& a = ready();
    if (bytes == 0) return 0;
    CUdeviceptr ptr = 0;
    check(a.cuMemAlloc(&ptr, bytes), "cuMemAlloc", fmt::format("{} bytes", bytes));
    return ptr;
}

void Driver::free(CUdeviceptr ptr) noexcept {
    if (ptr == 0 || !api_) return;
    try {
        ensure_context();
        const CUresult r = api_->cuMemFree(ptr);
        if (r != CUDA_SUCCESS) logger("coda.driver")->warn("cuMemFree failed: {}", describe(*api_, r));
    } catch (const std::exception& e) {
        try {
            logger("coda.driver")->warn("cuMemFree skipped: {}", e.what());
        } catch (...) {
            // Logging itself failed (e.g. invalid CODA_LOG_LEVEL); free() must not throw from a destructor.
        }
    }
}

void Driver::copy_to_device(CUdeviceptr dst, const void* src, std::size_t bytes) {
    check(ready().cuMemcpyHtoD(dst, src, bytes), "cuMemcpyHtoD", fmt::format("{} bytes", bytes));
}

void Driver::copy_to_host(void* dst, CUdeviceptr src, std::size_t bytes) {
    check(ready().cuMemcpyDtoH(dst, src, bytes), "cuMemcpyDtoH", fmt::format("{} bytes", bytes));
}

void Driver::memset8(CUdeviceptr dst, unsigned char value, std::size_t bytes) {
    check(ready().cuMemsetD8(dst, value, bytes), "cuMemsetD8", fmt::format("{} bytes", bytes));
}

void Driver::memset8_async(CUdeviceptr dst, unsigned char value, std::size_t bytes, CUstream stream) {
    check(ready().cuMemsetD8Async(dst, value, bytes, stream), "cuMemsetD8Async", fmt::format("{} bytes", bytes));
}

void Driver::synchronize() { check(ready().cuCtxSynchronize(), "cuCtxSynchronize"); }

bool Driver::is_capturing(CUstream stream) {
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    check(ready().cuStreamIsCapturing(stream, &status), "cuStreamIsCapturing");
    return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

CUstreamCaptureMode Driver::exchange_capture_mode(CUstreamCaptureMode mode) {
    check(ready().cuThreadExchangeStreamCaptureMode(&mode), "cuThreadExchangeStreamCaptureMode");
    return mode;
}

CUevent Driver::event_create() {
    CUevent event = nullptr;
    check(ready().cuEventCreate(&event, CU_EVENT_DEFAULT), "cuEventCreate");
    return event;
}

void Driver::event_record(CUevent event, CUstream stream) {
    check(ready().cuEventRecord(event, stream), "cuEventRecord");
}

float Driver::event_ms(CUevent start, CUevent stop) {
    float ms = 0;
    check(ready().cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
    return ms;
}

void Driver::event_destroy(CUevent event) { check(ready().cuEventDestroy(event), "cuEventDestroy"); }

}  // namespace coda
