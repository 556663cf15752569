// Launch arguments bound by name: tensors (GEMM operands "A" and "B", inputs, outputs, partials) and
// f32 scalars, by value or in device memory. Binding checks happen at launch, against the kernel's own list,
// before anything runs.
#pragma once

#include <map>
#include <string>

#include "coda/tensor.hpp"

namespace coda {

// A scalar that lives in device memory: one f32 the kernel reads when it runs, so a value computed on the GPU
// (a loss gradient) binds without a host sync and a CUDA graph captured with it reads each replay's value.
struct DeviceScalar {
    const float* data = nullptr;  // device (or managed) memory, 4-byte aligned; checked at launch
};
inline DeviceScalar device_scalar(const float* data) { return DeviceScalar{data}; }

class Args {
public:
    // A is logically M x K and B logically K x N; their strides say which layout they are stored in.
    Args& bind(const std::string& name, const TensorRef& tensor);
    Args& bind(const std::string& name, float scalar);
    Args& bind(const std::string& name, const DeviceScalar& scalar);

    const std::map<std::string, TensorRef>& tensors() const { return tensors_; }
    const std::map<std::string, float>& scalars() const { return scalars_; }
    const std::map<std::string, DeviceScalar>& device_scalars() const { return device_scalars_; }

private:
    std::map<std::string, TensorRef> tensors_;
    std::map<std::string, float> scalars_;
    std::map<std::string, DeviceScalar> device_scalars_;
};

}  // namespace coda
