// Device tensors as coda sees them at launch: a pointer, a dtype, a shape and strides in elements.
// coda never owns the memory; it only checks that what is bound matches what the kernel expects.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coda/types.hpp"

namespace coda {

struct TensorRef {
    const void* data = nullptr;         // device pointer
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;    // 1-D (vector) or 2-D (matrix)
    std::vector<std::int64_t> strides;  // in elements, one per dimension

    std::string describe() const;       // e.g. "bf16 [4096 x 2048] strides [2048, 1]"
};

// A row-major rows x cols matrix whose rows are `ld` elements apart (ld = cols when 0).
TensorRef matrix(const void* data, DType dtype, std::int64_t rows, std::int64_t cols, std::int64_t ld = 0);
// A column-major rows x cols matrix (columns `ld` elements apart): e.g. A stored M-major.
TensorRef matrix_col_major(const void* data, DType dtype, std::int64_t rows, std::int64_t cols, std::int64_t ld = 0);
// A contiguous vector.
TensorRef vector(const void* data, DType dtype, std::int64_t length);

}  // namespace coda
