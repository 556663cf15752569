// The table of libcuda entry points coda uses, resolved with dlsym so that libcuda is never linked.
// One list drives the table and its resolution, so adding a call is one line.
#pragma once

#include <cuda.h>

#include <string>

namespace coda {

// cuda.h #defines many of these names to versioned symbols (cuMemAlloc -> cuMemAlloc_v2, ...). Each name
// below is macro-expanded before use, so the member, its type and the dlsym name all follow that mapping.
#define CODA_CUDA_DRIVER_FUNCTIONS(X)                                                                      \
    X(cuInit) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount) X(cuDeviceGet) \
    X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain) X(cuCtxGetCurrent)               \
    X(cuCtxSetCurrent) X(cuCtxGetDevice) X(cuCtxSynchronize) X(cuModuleLoadData) X(cuModuleUnload)          \
    X(cuModuleGetFunction) X(cuModuleGetGlobal) X(cuFuncSetAttribute) X(cuLaunchKernel) X(cuMemAlloc)       \
    X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemsetD8) X(cuMemsetD8Async) X(cuEventCreate) X(cuEventRecord)            \
    X(cuEventElapsedTime) X(cuEventDestroy) X(cuTensorMapEncodeTiled) X(cuOccupancyMaxActiveClusters)       \
    X(cuStreamIsCapturing) X(cuThreadExchangeStreamCaptureMode) X(cuStreamCreate) X(cuStreamDestroy)         \
    X(cuStreamSynchronize) X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuGraphInstantiate)              \
    X(cuGraphLaunch) X(cuGraphExecDestroy) X(cuGraphDestroy)

struct DriverApi {
#define CODA_DECLARE_DRIVER_FUNCTION(name) decltype(&::name) name = nullptr;
    CODA_CUDA_DRIVER_FUNCTIONS(CODA_DECLARE_DRIVER_FUNCTION)
#undef CODA_DECLARE_DRIVER_FUNCTION
};

// Fills `api` from `library` (a dlopen handle of libcuda). Returns the symbols that were not found, joined
// with ", ", or "" when all were.
std::string resolve_driver_api(void* library, DriverApi& api);

}  // namespace coda
