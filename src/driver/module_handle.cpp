// ModuleHandle: RAII over Driver::load_module / Driver::unload_module. Unload errors in the destructor are
// logged, not thrown, because destructors must not throw.
#include "driver/cuda_driver.hpp"

#include "util/log.hpp"

#include <utility>

namespace coda {
namespace {

void unload_quietly(CUmodule module) noexcept {
    if (module == nullptr) return;
    try {
        Driver::instance().unload_module(module);
    } catch (const std::exception& e) {
        try {
            logger("coda.driver")->warn("{}", e.what());
        } catch (...) {
            // Logging itself failed (e.g. invalid CODA_LOG_LEVEL); there is nowhere left to report.
        }
    }
}

}  // namespace

ModuleHandle::ModuleHandle(const std::string& cubin) : module_(Driver::instance().load_module(cubin)) {}

ModuleHandle::~ModuleHandle() { unload_quietly(module_); }

ModuleHandle::ModuleHandle(ModuleHandle&& other) noexcept : module_(std::exchange(other.module_, nullptr)) {}

ModuleHandle& ModuleHandle::operator=(ModuleHandle&& other) noexcept {
    if (this != &other) {
        unload_quietly(module_);
        module_ = std::exchange(other.module_, nullptr);
    }
    return *this;
}

}  // namespace coda
