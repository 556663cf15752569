// DeviceBuffer: RAII over Driver::alloc / Driver::free, so device memory follows C++ object lifetimes.
// Zero bytes allocate nothing; a moved-from buffer is empty.
#include "driver/cuda_driver.hpp"

#include <utility>

namespace coda {

DeviceBuffer::DeviceBuffer(std::size_t bytes) : ptr_(Driver::instance().alloc(bytes)), bytes_(bytes) {}

DeviceBuffer::~DeviceBuffer() {
    if (ptr_ != 0) Driver::instance().free(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, 0)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
        if (ptr_ != 0) Driver::instance().free(ptr_);
        ptr_ = std::exchange(other.ptr_, 0);
        bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
}

}  // namespace coda
