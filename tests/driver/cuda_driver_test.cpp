// The dlopen'ed driver: arch names from compute capabilities; without a GPU (this build machine) a reason
// and coda::Error from every call; with one, a compiled kernel is loaded, launched and read back.
#include <catch2/catch.hpp>

#include "coda/error.hpp"
#include "compile/nvrtc_compiler.hpp"
#include "driver/cuda_driver.hpp"

#include <vector>

TEST_CASE("sm_arch picks the arch-specific variant on 9.0 and 10.0", "[driver]") {
    CHECK(coda::sm_arch(9, 0) == "sm_90a");
    CHECK(coda::sm_arch(10, 0) == "sm_100a");
    CHECK(coda::sm_arch(8, 0) == "sm_80");
    CHECK(coda::sm_arch(8, 6) == "sm_86");
    CHECK(coda::sm_arch(8, 9) == "sm_89");
    CHECK(coda::sm_arch(12, 0) == "sm_120");
}

TEST_CASE("without a GPU the driver says why, and every call throws that reason", "[driver]") {
    coda::Driver& driver = coda::Driver::instance();
    CHECK(&driver == &coda::Driver::instance());
    if (driver.available()) {
        CHECK(driver.unavailable_reason().empty());
        return;  // covered by the next test
    }
    const std::string reason = driver.unavailable_reason();
    REQUIRE_FALSE(reason.empty());
    auto throws_reason = [&](auto call) {
        try {
            call();
        } catch (const coda::Error& e) {
            return std::string(e.what()).find(reason) != std::string::npos;
        }
        return false;
    };
    CHECK(throws_reason([&] { driver.alloc(1024); }));
    CHECK(throws_reason([&] { coda::DeviceBuffer buffer(1024); }));
    CHECK(throws_reason([&] { driver.ensure_context(); }));
    CHECK(throws_reason([&] { driver.current_device(); }));
    CHECK(throws_reason([&] { coda::ModuleHandle module(std::string("\x7f" "ELF")); }));
    CHECK(throws_reason([&] { driver.synchronize(); }));
    driver.free(0);  // harmless without a driver
    coda::DeviceBuffer empty;
    CHECK(empty.ptr() == 0);
    CHECK(empty.bytes() == 0);
}

TEST_CASE("with a GPU a compiled kernel loads, launches and reads back", "[driver]") {
    coda::Driver& driver = coda::Driver::instance();
    if (!driver.available()) return;  // the previous test covers this machine
    driver.ensure_context();
    const coda::Driver::DeviceInfo device = driver.current_device();
    CHECK(device.arch == coda::sm_arch(device.cc_major, device.cc_minor));
    CHECK(device.sm_count > 0);
    CHECK_FALSE(device.name.empty());

    coda::CompileRequest request;
    request.source = R"(__device__ int coda_probe_info[2] = {7, 9};
extern "C" __global__ void add_index(int* p, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] += i;
})";
    request.source_name = "driver_probe.cu";
    request.name_expressions = {"add_index"};
    request.arch = device.arch;
    const coda::CompiledModule compiled = coda::compile_cuda(request);
    coda::ModuleHandle module(compiled.cubin);
    CUfunction f = driver.function(module.get(), compiled.lowered.at(0).second);

    int info[2] = {0, 0};
    driver.read_global(module.get(), "coda_probe_info", info, sizeof info);
    CHECK(info[0] == 7);
    CHECK(info[1] == 9);
    CHECK_THROWS_AS(driver.read_global(module.get(), "coda_probe_info", info, 4), coda::InternalError);

    const int n = 1000;
    std::vector<int> host(n, 5);
    coda::DeviceBuffer buffer(n * sizeof(int));
    driver.memset8(buffer.ptr(), 0, buffer.bytes());
    driver.copy_to_device(buffer.ptr(), host.data(), buffer.bytes());
    CUdeviceptr ptr = buffer.ptr();
    int count = n;
    void* params[] = {&ptr, &count};
    CUevent start = driver.event_create();
    CUevent stop = driver.event_create();
    driver.event_record(start, nullptr);
    driver.launch(f, (n + 127) / 128, 1, 1, 128, 0, nullptr, params);
    driver.event_record(stop, nullptr);
    driver.synchronize();
    CHECK(driver.event_ms(start, stop) >= 0.0f);
    driver.event_destroy(start);
    driver.event_destroy(stop);
    driver.copy_to_host(host.data(), buffer.ptr(), buffer.bytes());
    for (int i = 0; i < n; ++i) REQUIRE(host[i] == 5 + i);

    try {
        driver.function(module.get(), "no_such_kernel");
        FAIL("found a kernel that does not exist");
    } catch (const coda::Error& e) {
        CHECK(std::string(e.what()).find("cuModuleGetFunction failed: CUDA_ERROR_NOT_FOUND") != std::string::npos);
    }
}
