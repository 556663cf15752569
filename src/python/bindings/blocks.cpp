// coda.blocks: every ready-made block graph of the catalog (blocks.def), with its default spec, and the llama_block*
// lists; a graph added to blocks.def appears here without another line.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "coda/blocks.hpp"

namespace coda::python {

using namespace nb::literals;

void bind_blocks(nb::module_& m) {
    nb::module_ b = m.def_submodule("blocks", "Ready-made epilogues of a LLaMA-style block (include/coda/blocks.hpp).");
    for (const blocks::BlockEntry& e : blocks::catalog()) {
        const auto build = e.build;
        if (const std::optional<GemmSpec> spec = blocks::default_spec(e.spec))
            b.def(e.name, [build](GemmSpec s) { return build(s); }, "spec"_a = *spec);
        else
            b.def(e.name, [build]() { return build(GemmSpec{}); });
    }
    b.def("llama_block", &blocks::llama_block, "Every graph above, forward then backward.");
    b.def("llama_block_fp8", &blocks::llama_block_fp8, "Every FP8 graph above, forward then backward.");
    b.def("llama_block_fp8_blockwise", &blocks::llama_block_fp8_blockwise,
          "Every block-wise FP8 graph above, forward then backward.");
    b.def("llama_block_fp8_rowwise", &blocks::llama_block_fp8_rowwise,
          "Every row-wise FP8 graph above, forward then backward.");
}

}  // namespace coda::python
