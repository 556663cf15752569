// dlsym resolution of DriverApi. The symbol string comes from the macro-expanded name, so it is the
// versioned symbol (e.g. "cuMemAlloc_v2") whose signature cuda.h declares.
#include "driver/driver_api.hpp"

#include <dlfcn.h>

namespace coda {

#define CODA_DRIVER_SYMBOL_STRING(name) #name
#define CODA_DRIVER_SYMBOL(name) CODA_DRIVER_SYMBOL_STRING(name)

std::string resolve_driver_api(void* library, DriverApi& api) {
    std::string missing;
#define CODA_RESOLVE_DRIVER_FUNCTION(name)                                                            \
    api.name = reinterpret_cast<decltype(api.name)>(::dlsym(library, CODA_DRIVER_SYMBOL(name)));     \
    if (api.name == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(CODA_DRIVER_SYMBOL(name));
    CODA_CUDA_DRIVER_FUNCTIONS(CODA_RESOLVE_DRIVER_FUNCTION)
#undef CODA_RESOLVE_DRIVER_FUNCTION
    return missing;
}

}  // namespace coda
