// The NVRTC front end: compiles one complete CUDA source, with the embedded templates as in-memory headers,
// to a cubin for one arch, and reports lowered kernel names and per-kernel resource usage.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "compile/ptxas_report.hpp"

namespace coda {

struct CompileRequest {
    std::string source;                         // complete CUDA source; may #include "coda/<template>.cuh"
    std::string source_name;                    // e.g. "out_proj_3f2a.cu" (for logs and dumps)
    std::vector<std::string> name_expressions;  // kernel template instantiations, e.g. "coda::tile_program<X>"
    std::string arch;                           // "sm_80", "sm_86", "sm_89", "sm_90a", ...
};

struct CompiledModule {
    std::string cubin;                                         // nvrtcGetCUBIN
    std::vector<std::pair<std::string, std::string>> lowered;  // name expression -> mangled name, request order
    std::vector<ResourceUsage> resources;                      // parsed from the ptxas -v log
    std::string log;                                           // the full NVRTC log
    double seconds = 0;                                        // wall time of the compile
};

// The exact NVRTC options for `arch`. They contain no paths, so they can be part of the cache key.
std::vector<std::string> compile_flags(const std::string& arch);

// Compiles `request` with compile_flags(request.arch). Every embedded template is offered as a header under
// its relative path, so "#include "coda/x.cuh"" works without a file system; headers that include each
// other must use that same "coda/..." spelling. A failed compile throws coda::Error with the NVRTC log, the
// arch, the flags and the path of the dumped source (CODA_DUMP_DIR if set, else a new file under the system
// temp dir). Thread-safe.
CompiledModule compile_cuda(const CompileRequest& request);

// "major.minor" of the NVRTC library in use, e.g. "13.0".
std::string nvrtc_version();

}  // namespace coda
