// NVRTC compile of one generated source: RAII over nvrtcProgram, in-memory template headers, name
// expressions, cubin, ptxas report, and source dumps that make a failed compile reproducible.
#include "compile/nvrtc_compiler.hpp"

#include "coda/error.hpp"
#include "compile/embedded_templates.hpp"
#include "config/settings.hpp"
#include "util/log.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nvrtc.h>
#include <stdlib.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>

namespace coda {
namespace {

namespace fs = std::filesystem;

void check_nvrtc(nvrtcResult result, const char* call) {
    if (result != NVRTC_SUCCESS) throw InternalError(fmt::format("{} failed: {}", call, nvrtcGetErrorString(result)));
}

// The headers and their include names as NVRTC wants them: parallel arrays of C strings. The strings live
// in embedded_templates(), which never changes, so the pointers stay valid for the whole process.
struct HeaderTable {
    std::vector<const char*> contents;
    std::vector<const char*> names;
};

const HeaderTable& header_table() {
    static const HeaderTable table = [] {
        HeaderTable t;
        for (const EmbeddedTemplate& h : embedded_templates()) {
            t.contents.push_back(h.content.c_str());
            t.names.push_back(h.path.c_str());
        }
        return t;
    }();
    return table;
}

class Program {
public:
    Program(const std::string& source, const std::string& name) {
        const HeaderTable& h = header_table();
        check_nvrtc(nvrtcCreateProgram(&program_, source.c_str(), name.c_str(), static_cast<int>(h.names.size()),
                                       h.contents.data(), h.names.data()),
                    "nvrtcCreateProgram");
    }
    ~Program() { nvrtcDestroyProgram(&program_); }
    Program(const Program&) = delete;
    Program& operator=(const Program&) = delete;
    nvrtcProgram get() const { return program_; }

private:
    nvrtcProgram program_ = nullptr;
};

std::string program_log(nvrtcProgram program) {
    std::size_t size = 0;
    check_nvrtc(nvrtcGetProgramLogSize(program, &size), "nvrtcGetProgramLogSize");
    std::string log(size, '\0');
    check_nvrtc(nvrtcGetProgramLog(program, log.data()), "nvrtcGetProgramLog");
    while (!log.empty() && log.back() == '\0') log.pop_back();
    return log;
}

// A source name reduced to a plain file name, so that a name like "../x" cannot write outside the dump dir.
std::string safe_file_name(const std::string& source_name) {
    std::string name = fs::path(source_name).filename().string();
    for (char& c : name)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
    if (name.empty() || name == "." || name == "..") name = "kernel.cu";
    return name;
}

bool write_file(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    return static_cast<bool>(out);
}

// Writes the source into CODA_DUMP_DIR; returns the path, or an empty path (after a warning) if it cannot.
fs::path dump_to_dump_dir(const std::string& source_name, const std::string& source) {
    const fs::path& dir = settings().dump_dir;
    std::error_code ec;
    fs::create_directories(dir, ec);
    const fs::path path = dir / safe_file_name(source_name);
    if (!ec && write_file(path, source)) return path;
    logger("coda.compile")->warn("cannot write {} (CODA_DUMP_DIR): {}", path.string(),
                                 ec ? ec.message() : std::string("write failed"));
    return {};
}

// A new file under the temp dir, named after the source, so that repeated failures never overwrite each other.
fs::path dump_to_temp(const std::string& source_name, const std::string& source) {
    const fs::path name = safe_file_name(source_name);
    const std::string extension = name.extension().string();
    std::string pattern =
        (fs::temp_directory_path() / ("coda-" + name.stem().string() + "-XXXXXX" + extension)).string();
    const int fd = mkstemps(pattern.data(), static_cast<int>(extension.size()));
    if (fd < 0) return {};
    const bool ok = static_cast<std::size_t>(::write(fd, source.data(), source.size())) == source.size();
    ::close(fd);
    return ok ? fs::path(pattern) : fs::path();
}

[[noreturn]] void throw_compile_error(const CompileRequest& request, const std::vector<std::string>& flags,
                                      const std::string& log) {
    fs::path dumped;
    if (!settings().dump_dir.empty()) dumped = dump_to_dump_dir(request.source_name, request.source);
    if (dumped.empty()) dumped = dump_to_temp(request.source_name, request.source);
    const std::string where = dumped.empty() ? std::string("(could not be written)") : dumped.string();
    logger("coda.compile")->error("NVRTC failed on {} for {}; source dumped to {}", request.source_name,
                                  request.arch, where);
    throw Error(fmt::format("NVRTC {} could not compile '{}' for {}.\n"
                            "flags: {}\n"
                            "source: {}\n"
                            "If this source came from coda's code generator, this is a coda bug: please report it "
                            "with the source above.\n"
                            "NVRTC log:\n{}",
                            nvrtc_version(), request.source_name, request.arch, fmt::join(flags, " "), where, log));
}

}  // namespace

std::vector<std::string> compile_flags(const std::string& arch) {
    // -default-device lets template helpers omit __device__; no fast-math flags, so results match the CPU
    // reference up to the documented rounding.
    return {"-std=c++17", "--gpu-architecture=" + arch, "--ptxas-options=-v", "-default-device"};
}

std::string nvrtc_version() {
    static const std::string version = [] {
        int major = 0;
        int minor = 0;
        check_nvrtc(nvrtcVersion(&major, &minor), "nvrtcVersion");
        return fmt::format("{}.{}", major, minor);
    }();
    return version;
}

CompiledModule compile_cuda(const CompileRequest& request) {
    if (request.source.empty() || request.arch.empty())
        throw InternalError(fmt::format("compile request '{}' has an empty {}", request.source_name,
                                        request.source.empty() ? "source" : "arch"));
    const auto start = std::chrono::steady_clock::now();

    Program program(request.source, request.source_name);
    for (const std::string& expression : request.name_expressions)
        check_nvrtc(nvrtcAddNameExpression(program.get(), expression.c_str()), "nvrtcAddNameExpression");

    const std::vector<std::string> flags = compile_flags(request.arch);
    std::vector<const char*> options;
    for (const std::string& f : flags) options.push_back(f.c_str());
    const nvrtcResult result = nvrtcCompileProgram(program.get(), static_cast<int>(options.size()), options.data());

    CompiledModule module;
    module.log = program_log(program.get());
    if (result != NVRTC_SUCCESS) throw_compile_error(request, flags, module.log);

    std::size_t cubin_size = 0;
    check_nvrtc(nvrtcGetCUBINSize(program.get(), &cubin_size), "nvrtcGetCUBINSize");
    module.cubin.resize(cubin_size);
    check_nvrtc(nvrtcGetCUBIN(program.get(), module.cubin.data()), "nvrtcGetCUBIN");
    if (module.cubin.empty())
        throw InternalError(fmt::format("NVRTC returned an empty cubin for '{}' ({})", request.source_name,
                                        request.arch));

    for (const std::string& expression : request.name_expressions) {
        const char* lowered = nullptr;
        check_nvrtc(nvrtcGetLoweredName(program.get(), expression.c_str(), &lowered), "nvrtcGetLoweredName");
        module.lowered.emplace_back(expression, lowered);
    }
    module.resources = parse_ptxas_report(module.log);
    module.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    auto log = logger("coda.compile");
    log->debug("compiled {} for {} in {:.3f} s ({} bytes of cubin)", request.source_name, request.arch,
              module.seconds, module.cubin.size());
    for (const ResourceUsage& r : module.resources)
        log->debug("{}: {} registers, {} B stack, {} B spill stores, {} B spill loads, {} B static smem{}",
                   r.function, r.registers, r.stack_frame_bytes, r.spill_store_bytes, r.spill_load_bytes,
                   r.shared_bytes, r.wgmma_serialized ? ", wgmma serialized" : "");
    return module;
}

}  // namespace coda
