// compile_cuda under NVRTC, no GPU needed: a kernel that includes an embedded template compiles for sm_80 and
// sm_90a to an ELF cubin with its lowered name and a resource report; a broken source gives a full error.
#include <catch2/catch.hpp>

#include "coda/error.hpp"
#include "compile/embedded_templates.hpp"
#include "compile/nvrtc_compiler.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace {

// A kernel that needs coda/epilogue_contract.cuh (TileCoord), templated so that a name expression is needed.
const char* kKernelSource = R"(#include "coda/epilogue_contract.cuh"
namespace probe {
template <int kScale>
__global__ void scale_rows(const coda::TileCoord t, float* out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < t.M) out[i] = out[i] * kScale + t.tile_m;
}
}  // namespace probe
)";

std::string read_text(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

TEST_CASE("compile flags: C++17, the arch as SASS, a ptxas report, no fast math, no paths", "[compile]") {
    const auto flags = coda::compile_flags("sm_90a");
    auto has = [&](const std::string& f) { return std::find(flags.begin(), flags.end(), f) != flags.end(); };
    CHECK(has("-std=c++17"));
    CHECK(has("--gpu-architecture=sm_90a"));
    CHECK(has("--ptxas-options=-v"));
    for (const std::string& f : flags) {
        CHECK(f.find("fast-math") == std::string::npos);
        CHECK(f.find("ftz") == std::string::npos);
        CHECK(f.find('/') == std::string::npos);
    }
    CHECK(coda::compile_flags("sm_80") != flags);
}

TEST_CASE("nvrtc_version is major.minor", "[compile]") {
    CHECK(std::regex_match(coda::nvrtc_version(), std::regex("[0-9]+\\.[0-9]+")));
}

TEST_CASE("the epilogue contract is among the embedded templates", "[compile]") {
    const auto& templates = coda::embedded_templates();
    CHECK(std::any_of(templates.begin(), templates.end(),
                      [](const coda::EmbeddedTemplate& t) { return t.path == "coda/epilogue_contract.cuh"; }));
}

TEST_CASE("a kernel including an embedded template compiles for sm_80 and sm_90a", "[compile]") {
    const std::string arch = GENERATE(std::string("sm_80"), std::string("sm_90a"));
    coda::CompileRequest request;
    request.source = kKernelSource;
    request.source_name = "probe_scale_rows.cu";
    request.name_expressions = {"probe::scale_rows<3>", "probe::scale_rows<5>"};
    request.arch = arch;
    const coda::CompiledModule module = coda::compile_cuda(request);

    INFO(arch << "\n" << module.log);
    REQUIRE(module.cubin.size() > 4);
    CHECK(module.cubin.compare(0, 4, "\x7f" "ELF") == 0);
    CHECK(module.seconds > 0);
    CHECK(module.log.find("ptxas") != std::string::npos);
    CHECK(module.log.find("'" + arch + "'") != std::string::npos);

    REQUIRE(module.lowered.size() == 2);
    CHECK(module.lowered[0].first == "probe::scale_rows<3>");
    CHECK(module.lowered[1].first == "probe::scale_rows<5>");
    CHECK(module.lowered[0].second.rfind("_Z", 0) == 0);
    CHECK(module.lowered[0].second != module.lowered[1].second);
    for (const auto& [expression, mangled] : module.lowered) {
        CHECK(module.cubin.find(mangled) != std::string::npos);  // the symbol is in the ELF string table
        auto usage = std::find_if(module.resources.begin(), module.resources.end(),
                                  [&](const coda::ResourceUsage& r) { return r.function == mangled; });
        REQUIRE(usage != module.resources.end());
        CHECK(usage->registers > 0);
        CHECK(usage->spill_store_bytes == 0);
        CHECK(usage->spill_load_bytes == 0);
    }
    CHECK(module.resources.size() == 2);
}

TEST_CASE("static shared memory shows up in the resource report", "[compile]") {
    coda::CompileRequest request;
    request.source = R"(extern "C" __global__ void reverse(float* p) {
    __shared__ float tile[512];
    tile[threadIdx.x] = p[threadIdx.x];
    __syncthreads();
    p[threadIdx.x] = tile[511 - threadIdx.x];
})";
    request.source_name = "reverse.cu";
    request.name_expressions = {"reverse"};
    request.arch = "sm_80";
    const coda::CompiledModule module = coda::compile_cuda(request);
    REQUIRE(module.resources.size() == 1);
    CHECK(module.resources[0].function == "reverse");
    CHECK(module.resources[0].shared_bytes == 512 * 4);
    REQUIRE(module.lowered.size() == 1);
    CHECK(module.lowered[0].second == "reverse");
}

TEST_CASE("a syntax error throws with the log, the arch, the flags and a dumped source", "[compile]") {
    coda::CompileRequest request;
    request.source = std::string(kKernelSource) + "\nthis is not CUDA;\n";
    request.source_name = "broken_kernel.cu";
    request.name_expressions = {"probe::scale_rows<3>"};
    request.arch = "sm_80";
    std::string message;
    try {
        coda::compile_cuda(request);
    } catch (const coda::Error& e) {
        message = e.what();
    }
    INFO(message);
    REQUIRE_FALSE(message.empty());
    CHECK(message.find("broken_kernel.cu") != std::string::npos);
    CHECK(message.find("sm_80") != std::string::npos);
    CHECK(message.find("--gpu-architecture=sm_80") != std::string::npos);
    CHECK(message.find("error") != std::string::npos);            // NVRTC's own diagnostic
    CHECK(message.find("this is not CUDA") != std::string::npos);  // quoted from the source by the log

    std::smatch match;
    const std::regex source_line("source: ([^\n]+)");
    REQUIRE(std::regex_search(message, match, source_line));
    const std::filesystem::path dumped = match[1].str();
    REQUIRE(std::filesystem::exists(dumped));
    CHECK(read_text(dumped) == request.source);
    CHECK(dumped.filename().string().find("broken_kernel") != std::string::npos);
    std::filesystem::remove(dumped);
}

TEST_CASE("an unknown arch is reported like a compile error", "[compile]") {
    coda::CompileRequest request;
    request.source = kKernelSource;
    request.source_name = "probe_arch.cu";
    request.arch = "sm_10";
    try {
        coda::compile_cuda(request);
        FAIL("sm_10 compiled");
    } catch (const coda::Error& e) {
        const std::string message = e.what();
        CHECK(message.find("sm_10") != std::string::npos);
        std::smatch match;
        if (std::regex_search(message, match, std::regex("source: ([^\n]+)")))
            std::filesystem::remove(match[1].str());
    }
}
