// The one place mainloops are listed. Adding a mainloop: its host file in src/mainloop/, its template in
// templates/coda/, its config type in include/coda/kernel_config.hpp, its KernelKind, and one line below.
#include "mainloop/mainloops.hpp"

#include <fmt/format.h>

#include "coda/error.hpp"
#include "mainloop/finalize_program.hpp"
#include "mainloop/hopper.hpp"
#include "mainloop/portable.hpp"
#include "mainloop/tile_program.hpp"

namespace coda {

const std::vector<const Mainloop*>& all_mainloops() {
    static const std::vector<const Mainloop*> list = {
        &hopper_mainloop(),    // sm_90a's default for GEMMs
        &portable_mainloop(),  // every other arch's (sm_80 and newer)
        &tile_program_mainloop(),
        &finalize_program_mainloop(),
    };
    return list;
}

const Mainloop& default_gemm_mainloop(const std::string& arch) {
    for (const Mainloop* m : all_mainloops())
        if (m->domain() == Domain::Gemm && m->default_on(arch)) return *m;
    throw InternalError(fmt::format("no GEMM mainloop is the default on {}", arch));
}

const Mainloop& mainloop_of(const KernelConfig& config) {
    for (const Mainloop* m : all_mainloops())
        if (m->owns(config)) return *m;
    throw InternalError("a KernelConfig alternative has no mainloop");
}

const Mainloop& mainloop_for(const Graph& graph, const std::optional<KernelConfig>& config, const std::string& arch) {
    if (config) {
        const Mainloop& m = mainloop_of(*config);
        if (graph.domain() != Domain::Gemm)
            throw Error(fmt::format("graph '{}' is a {} graph, which has a fixed tile and takes no kernel config; "
                                    "leave CompileOptions::config empty (it is '{}')",
                                    graph.name(), to_string(graph.domain()), config->to_text()));
        return m;
    }
    if (graph.domain() == Domain::Gemm) return default_gemm_mainloop(arch);
    for (const Mainloop* m : all_mainloops())
        if (m->domain() == graph.domain()) return *m;
    throw InternalError(fmt::format("no mainloop runs {} graphs", to_string(graph.domain())));
}

}  // namespace coda
