// TensorRef constructors and Args: plain data, checked later against the kernel at launch.
#include "coda/args.hpp"
#include "coda/error.hpp"
#include "coda/tensor.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace coda {

std::string TensorRef::describe() const {
    if (shape.size() == 2)
        return fmt::format("{} [{} x {}] strides [{}, {}]", to_string(dtype), shape[0], shape[1],
                           strides.size() > 0 ? strides[0] : 0, strides.size() > 1 ? strides[1] : 0);
    return fmt::format("{} shape [{}] strides [{}]", to_string(dtype), fmt::join(shape, ", "), fmt::join(strides, ", "));
}

TensorRef matrix(const void* data, DType dtype, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
    return TensorRef{data, dtype, {rows, cols}, {ld == 0 ? cols : ld, 1}};
}

TensorRef matrix_col_major(const void* data, DType dtype, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
    return TensorRef{data, dtype, {rows, cols}, {1, ld == 0 ? rows : ld}};
}

TensorRef vector(const void* data, DType dtype, std::int64_t length) {
    return TensorRef{data, dtype, {length}, {1}};
}

Args& Args::bind(const std::string& name, const TensorRef& tensor) {
    if (scalars_.count(name) || device_scalars_.count(name))
        throw Error(fmt::format("argument '{}' is already bound to a scalar", name));
    tensors_[name] = tensor;
    return *this;
}

// A scalar name holds one form at a time: binding a value replaces a device scalar and the other way round.
Args& Args::bind(const std::string& name, float scalar) {
    if (tensors_.count(name)) throw Error(fmt::format("argument '{}' is already bound to a tensor", name));
    device_scalars_.erase(name);
    scalars_[name] = scalar;
    return *this;
}

Args& Args::bind(const std::string& name, const DeviceScalar& scalar) {
    if (tensors_.count(name)) throw Error(fmt::format("argument '{}' is already bound to a tensor", name));
    scalars_.erase(name);
    device_scalars_[name] = scalar;
    return *this;
}

}  // namespace coda
