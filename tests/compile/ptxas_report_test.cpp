// parse_ptxas_report on ptxas -v logs in the format NVRTC 13 prints: entry functions, their frames, spills
// and shared memory, with non-entry functions and unrelated lines left out.
#include <catch2/catch.hpp>

#include "compile/ptxas_report.hpp"

TEST_CASE("ptxas report: one entry per kernel, with frame, spills and smem", "[compile]") {
    const char* log =
        "ptxas info    : 0 bytes gmem\n"
        "ptxas info    : Compiling entry function '_ZN4coda1kILi3EEEvPf' for 'sm_80'\n"
        "ptxas info    : Function properties for _ZN4coda1kILi3EEEvPf\n"
        "ptxas         .     256 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
        "ptxas info    : Used 40 registers, used 1 barriers, 256 bytes cumulative stack size, 1024 bytes smem, "
        "360 bytes cmem[0]\n"
        "ptxas info    : Compile time = 14.030 ms\n"
        "ptxas info    : Function properties for _Z6helperPfi\n"
        "ptxas         .     16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Compiling entry function '_Z5otherv' for 'sm_80'\n"
        "ptxas info    : Function properties for _Z5otherv\n"
        "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 168 registers, used 0 barriers, 360 bytes cmem[0]\n";
    const auto kernels = coda::parse_ptxas_report(log);
    REQUIRE(kernels.size() == 2);
    CHECK(kernels[0].function == "_ZN4coda1kILi3EEEvPf");
    CHECK(kernels[0].registers == 40);
    CHECK(kernels[0].stack_frame_bytes == 256);
    CHECK(kernels[0].spill_store_bytes == 8);
    CHECK(kernels[0].spill_load_bytes == 12);
    CHECK(kernels[0].shared_bytes == 1024);
    CHECK(kernels[1].function == "_Z5otherv");
    CHECK(kernels[1].registers == 168);
    CHECK(kernels[1].shared_bytes == 0);
    CHECK(kernels[1].spill_store_bytes == 0);
}

TEST_CASE("ptxas report: properties after the registers line still join", "[compile]") {
    const char* log =
        "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
        "ptxas info    : Used 12 registers, 48 bytes smem\n"
        "ptxas info    : Function properties for k\n"
        "ptxas         .     32 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n";
    const auto kernels = coda::parse_ptxas_report(log);
    REQUIRE(kernels.size() == 1);
    CHECK(kernels[0].registers == 12);
    CHECK(kernels[0].shared_bytes == 48);
    CHECK(kernels[0].stack_frame_bytes == 32);
    CHECK(kernels[0].spill_store_bytes == 4);
}

TEST_CASE("ptxas report: a note that wgmmas were serialized marks the function it names", "[compile]") {
    // As ptxas 13 words it (one line, the function's mangled name quoted at its end).
    const char* log =
        "ptxas info    : Compiling entry function 'fast' for 'sm_90a'\n"
        "ptxas info    : Used 168 registers, used 16 barriers\n"
        "ptxas info    : Compiling entry function 'slow' for 'sm_90a'\n"
        "ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non "
        "wgmma instructions reading accumulator registers of  a wgmma between start and end of the pipeline stage in "
        "the function 'slow'\n"
        "ptxas info    : Used 168 registers, used 16 barriers\n";
    const auto kernels = coda::parse_ptxas_report(log);
    REQUIRE(kernels.size() == 2);
    CHECK(kernels[0].function == "fast");
    CHECK(kernels[0].wgmma_serialized == 0);
    CHECK(kernels[1].function == "slow");
    CHECK(kernels[1].wgmma_serialized == 1);
    CHECK(kernels[1].registers == 168);
}

TEST_CASE("ptxas report: a log without a report gives nothing", "[compile]") {
    CHECK(coda::parse_ptxas_report("").empty());
    CHECK(coda::parse_ptxas_report("warning: something unrelated\nUsed 5 registers\n").empty());
}
