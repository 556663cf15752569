// Entry point of the GPU test suite. Without a usable GPU it exits with 77, which ctest reports as
// "skipped" (SKIP_RETURN_CODE), never as passed. Listing tests works anywhere (ctest discovery needs it).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>

#include "driver/cuda_driver.hpp"

int main(int argc, char** argv) {
    bool listing = false;
    for (int i = 1; i < argc; ++i) listing = listing || std::strncmp(argv[i], "--list", 6) == 0;
    if (!listing && !coda::Driver::instance().available()) {
        std::printf("SKIPPED: no GPU: %s\n", coda::Driver::instance().unavailable_reason().c_str());
        return 77;
    }
    return Catch::Session().run(argc, argv);
}
