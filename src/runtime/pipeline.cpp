// Strings the stages together in their one direction of flow. Each stage lives in its own folder;
// this file only passes results along and times the whole.
#include "runtime/pipeline.hpp"

#include <chrono>
#include <fstream>

#include <fmt/format.h>

#include "compile/nvrtc_compiler.hpp"
#include "config/settings.hpp"
#include "runtime/recorder.hpp"
#include "util/log.hpp"
#include "util/sha256.hpp"

namespace coda {
namespace {

// CODA_DUMP_DIR: every source that is compiled, for reading (coda dump prints any source without compiling).
void dump_source(const std::string& file_name, const std::string& source) {
    const auto& dir = settings().dump_dir;
    if (dir.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    std::ofstream out(dir / file_name, std::ios::binary);
    out << source;
    if (!out) logger("coda.runtime")->warn("could not write CODA_DUMP_DIR file {}", (dir / file_name).string());
}

// A kernel that spills registers, or whose wgmmas ptxas serialized, still computes the right values, only slower: say
// so once, when it is compiled or read from disk (a memory hit was seen before), with what the mainloop suggests.
void warn_about_resources(const BuiltKernel& built) {
    const ResourceUsage* u = built.cached.entry->kernel_usage();
    if (u != nullptr && u->wgmma_serialized)
        logger("coda.runtime")
            ->warn("kernel '{}' ({}, {}): ptxas serialized its wgmma instructions: it runs correctly, but its tensor "
                   "cores wait for each one",
                   built.name, built.target.arch, built.target.mainloop->key_text(built.target.config));
    const int spills = u ? u->spill_store_bytes + u->spill_load_bytes : 0;
    if (spills <= 0) return;
    const std::string advice = built.target.mainloop->spill_advice();
    logger("coda.runtime")
        ->warn("kernel '{}' ({}, {}) spills {} bytes of registers to local memory: it runs correctly, but slower{}{}",
               built.name, built.target.arch, built.target.mainloop->key_text(built.target.config), spills,
               advice.empty() ? "" : "; ", advice);
}

}  // namespace

CacheKeyParts key_parts(const BuildTarget& target, const KernelSource& source) {
    CacheKeyParts parts;
    parts.source_digest = sha256_hex(source.source);
    parts.template_digest = templates_digest();
    parts.nvrtc_version = nvrtc_version();
    parts.arch = target.arch;
    parts.flags = compile_flags(target.arch);
    return parts;
}

BuiltKernel build_kernel(const PreparedGraph& graph, const BuildTarget& target, KernelCache& cache) {
    const auto start = std::chrono::steady_clock::now();
    BuiltKernel built{graph.checked, target, "", "", {}, {}, 0};
    built.name = fmt::format("{}-{}", graph.checked.graph.name(), graph.hash);
    built.source = generate_kernel_source(graph, *target.mainloop, target.config, target.arch);
    const std::string& arch = target.arch;
    // One file name for both dumps: CODA_DUMP_DIR's copy below, and the compiler's copy of a failed compile.
    const std::string source_name = built.name + "-" + arch + ".cu";
    built.key = cache_key(key_parts(target, built.source));

    built.cached = cache.get_or_build(built.key, [&] {
        dump_source(source_name, built.source.source);
        CompileRequest request;
        request.source = built.source.source;
        request.source_name = source_name;
        request.name_expressions = {built.source.kernel_expression};
        request.arch = arch;
        CompiledModule module = compile_cuda(request);
        CacheEntry entry;
        entry.cubin = std::move(module.cubin);
        for (const auto& [expression, lowered] : module.lowered)
            if (expression == built.source.kernel_expression) entry.kernel_name = lowered;
        entry.resources = std::move(module.resources);
        entry.description = fmt::format("{} {} {}", built.name, arch, target.mainloop->key_text(target.config));
        entry.source = built.source.source;
        logger("coda.runtime")->info("compiled {} for {} in {:.2f} s", built.name, arch, module.seconds);
        return entry;
    });
    built.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (built.cached.hit != CacheHit::Memory) warn_about_resources(built);
    record_build(graph, target, built.key);
    return built;
}

BuiltKernel build_kernel(const Graph& graph, const BuildTarget& target, KernelCache& cache) {
    return build_kernel(prepare_graph(graph), target, cache);
}

}  // namespace coda
