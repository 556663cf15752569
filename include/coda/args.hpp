// Launch arguments bound by name: tensors (GEMM operands "A" and "B", inputs, outputs, partials) and
// f32 scalars. Binding checks happen at launch, against the kernel's own list, before anything runs.
#pragma once

#include <map>
#include <string>

#include "coda/tensor.hpp"

namespace coda {

class Args {
public:
    // A is logically M x K and B logically K x N; their strides say which layout they are stored in.
    Args& bind(const std::string& name, const TensorRef& tensor);
    Args& bind(const std::string& name, float scalar);

    const std::map<std::string, TensorRef>& tensors() const { return tensors_; }
    const std::map<std::string, float>& scalars() const { return scalars_; }

private:
    std::map<std::string, TensorRef> tensors_;
    std::map<std::string, float> scalars_;
};

}  // namespace coda
