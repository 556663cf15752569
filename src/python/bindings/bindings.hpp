// The nanobind module coda._coda, one file per topic: graph.cpp (vocabulary types, the builder, validation,
// text form), blocks.cpp (coda.blocks), runtime.cpp (configs, source, warm, compile, Kernel), tensors.cpp (tensors from
// DLPack or __cuda_array_interface__, launch arguments, the CPU reference).
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <vector>

#include "coda/args.hpp"
#include "coda/graph.hpp"

namespace coda::python {

namespace nb = nanobind;

void bind_graph(nb::module_& m);
void bind_blocks(nb::module_& m);
void bind_runtime(nb::module_& m);
void bind_tensors(nb::module_& m);

// A launch's arguments from a dict name -> device tensor (host tensors too when !device_only) or float. With the
// kernel's `graph`, a scalar binding also takes a one-element f32 GPU tensor, bound as a DeviceScalar. `held` keeps
// every imported tensor alive until the launch has been issued; destroy it with the GIL held.
struct LaunchArgs {
    Args args;
    std::vector<nb::ndarray<>> held;
};
LaunchArgs launch_args(nb::handle bindings, bool device_only = true, const Graph* graph = nullptr);

}  // namespace coda::python
