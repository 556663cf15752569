// The CUDA driver API as coda uses it: libcuda loaded with dlopen("libcuda.so.1") on first use, never linked,
// so that everything before launching (IR, codegen, NVRTC, cache) works on machines without a GPU.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "driver/driver_api.hpp"

namespace coda {

// The arch to compile for on a device of compute capability major.minor: the arch-specific "a" variants on
// 9.0 and 10.0 (wgmma, TMA multicast and friends need them), else the plain sm_<major><minor>.
std::string sm_arch(int major, int minor);

class Driver {
public:
    // Loads libcuda and runs cuInit on the first call (thread-safe). Never throws for a missing driver:
    // available() then says false, and each call below throws coda::Error with unavailable_reason().
    static Driver& instance();

    bool available() const;                        // driver loaded, cuInit ok, at least one device
    const std::string& unavailable_reason() const;  // empty when available

    // Makes sure the calling thread has a current context: the one it has, else device 0's primary context.
    CUcontext ensure_context();  // returns the (now) current context
    // The calling thread's current context after ensure_context(): what modules loaded now belong to.
    CUcontext current_context();

    struct DeviceInfo {
        int ordinal;
        std::string name;
        int cc_major, cc_minor, sm_count;
        std::string arch;  // sm_arch(cc_major, cc_minor)
    };
    DeviceInfo current_device();  // the device of the current context (ensure_context() first)

    // Each call throws coda::Error "cuXxx failed: CUDA_ERROR_NAME: description". All but launch() first call
    // ensure_context(); launch() is the hot path and uses the caller's current context.
    CUmodule load_module(const std::string& cubin);
    void unload_module(CUmodule module);
    CUfunction function(CUmodule module, const std::string& mangled_name);
    // Copies the __device__ variable `name` of `module` (which must be exactly `bytes` long) to `dst`.
    void read_global(CUmodule module, const std::string& name, void* dst, std::size_t bytes);
    void set_dynamic_smem(CUfunction function, int bytes);  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    // How many clusters of a kernel compiled with a fixed cluster shape (__cluster_dims__) fit on the device at
    // once, with `block` threads and `smem` bytes of dynamic shared memory a CTA.
    int max_active_clusters(CUfunction function, unsigned cluster, unsigned block, unsigned smem);
    void launch(CUfunction function, unsigned gx, unsigned gy, unsigned gz, unsigned block, unsigned smem,
                CUstream stream, void** params);
    CUdeviceptr alloc(std::size_t bytes);  // 0 bytes gives a null pointer
    void free(CUdeviceptr ptr) noexcept;   // failures are logged, not thrown: it runs in destructors
    void copy_to_device(CUdeviceptr dst, const void* src, std::size_t bytes);
    void copy_to_host(void* dst, CUdeviceptr src, std::size_t bytes);
    void memset8(CUdeviceptr dst, unsigned char value, std::size_t bytes);
    void memset8_async(CUdeviceptr dst, unsigned char value, std::size_t bytes, CUstream stream);
    void synchronize();  // cuCtxSynchronize
    bool is_capturing(CUstream stream);  // whether `stream` is being captured into a CUDA graph
    // Sets the calling thread's stream-capture mode (cuThreadExchangeStreamCaptureMode); returns the one it had.
    CUstreamCaptureMode exchange_capture_mode(CUstreamCaptureMode mode);
    CUevent event_create();
    void event_record(CUevent event, CUstream stream);
    float event_ms(CUevent start, CUevent stop);
    void event_destroy(CUevent event);

    // For callers that need a driver function without a wrapper: the resolved table (throws coda::Error when
    // unavailable), and the error check every wrapper uses.
    const DriverApi& api() const;
    void check(CUresult result, const char* call, const std::string& context = {}) const;

private:
    Driver();
    const DriverApi& ready();  // api() plus ensure_context()

    std::unique_ptr<DriverApi> api_;
    std::string reason_;
    std::mutex mutex_;
    CUcontext primary_ = nullptr;             // device 0's primary context, retained for the process lifetime
    std::map<int, DeviceInfo> devices_;       // by ordinal, filled on first query
};

// Device memory owned by one object: freed on destruction; movable, not copyable.
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(std::size_t bytes);
    ~DeviceBuffer();
    DeviceBuffer(DeviceBuffer&& other) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    CUdeviceptr ptr() const { return ptr_; }
    std::size_t bytes() const { return bytes_; }

private:
    CUdeviceptr ptr_ = 0;
    std::size_t bytes_ = 0;
};

// A loaded module, unloaded on destruction; movable, not copyable.
class ModuleHandle {
public:
    ModuleHandle() = default;
    explicit ModuleHandle(const std::string& cubin);
    ~ModuleHandle();
    ModuleHandle(ModuleHandle&& other) noexcept;
    ModuleHandle& operator=(ModuleHandle&& other) noexcept;
    ModuleHandle(const ModuleHandle&) = delete;
    ModuleHandle& operator=(const ModuleHandle&) = delete;

    CUmodule get() const { return module_; }

private:
    CUmodule module_ = nullptr;
};

}  // namespace coda
