// Configs, generated source, warm (no GPU), compile and the Kernel with its launch.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <tuple>
#include <variant>

#include <fmt/format.h>

#include "bindings.hpp"
#include "coda/error.hpp"
#include "coda/runtime.hpp"
#include "driver/cuda_driver.hpp"

namespace coda::python {
namespace {

using namespace nb::literals;
using Shape = std::tuple<std::int64_t, std::int64_t, std::int64_t>;

// A config argument: None, a coda.KernelConfig or its text form.
std::optional<KernelConfig> config_of(nb::handle config) {
    if (config.is_none()) return std::nullopt;
    if (nb::isinstance<nb::str>(config)) return KernelConfig::parse(nb::cast<std::string>(config));
    KernelConfig* c = nullptr;
    if (nb::try_cast(config, c, false) && c) return *c;
    throw nb::type_error(
        fmt::format("config: expected None, a coda.KernelConfig or its text, got {}", nb::type_name(config.type()).c_str())
            .c_str());
}

CompileOptions options_of(const std::optional<std::string>& arch, nb::handle config, const std::optional<Shape>& shape) {
    CompileOptions options;
    if (arch) options.arch = *arch;
    options.config = config_of(config);
    if (shape) options.shape = ProblemShape{std::get<0>(*shape), std::get<1>(*shape), std::get<2>(*shape)};
    return options;
}

// torch's current stream on its current device, as a CUstream handle: through torch._C's two raw getters (as Triton
// reads it), about 1 us, where torch.cuda.current_stream() builds a Stream object in Python (about 5 us a launch on
// an H100 host, tools/profile_op_host.py); that where a torch lacks the getters.
nb::object torch_current_stream(nb::handle torch) {
    nb::handle c = nb::handle(torch).attr("_C");
    if (nb::hasattr(c, "_cuda_getCurrentRawStream") && nb::hasattr(c, "_cuda_getDevice"))
        return c.attr("_cuda_getCurrentRawStream")(c.attr("_cuda_getDevice")());
    return nb::handle(torch).attr("cuda").attr("current_stream")();
}

// The stream of a launch: an int (a CUstream handle), an object with .cuda_stream (torch, cupy), or None: torch's
// current stream when torch has been imported, else the default stream.
CUstream_st* stream_of(nb::handle stream) {
    nb::handle source = stream;
    nb::object current;
    if (stream.is_none()) {
        nb::handle modules = PyImport_GetModuleDict();
        PyObject* torch = PyDict_GetItemString(modules.ptr(), "torch");  // borrowed; no import of our own
        if (torch == nullptr) return nullptr;
        current = torch_current_stream(torch);
        source = current;
    }
    if (!nb::isinstance<nb::int_>(source)) {
        if (!nb::hasattr(source, "cuda_stream"))
            throw nb::type_error(fmt::format("stream: expected None, an int (a CUstream) or an object with "
                                             ".cuda_stream, got {}",
                                             nb::type_name(source.type()).c_str())
                                     .c_str());
        current = source.attr("cuda_stream");
        source = current;
    }
    return reinterpret_cast<CUstream_st*>(static_cast<std::uintptr_t>(nb::cast<std::uint64_t>(source)));
}

std::string_view origin_text(BuildReport::From from) {
    switch (from) {
        case BuildReport::From::Memory: return "memory";
        case BuildReport::From::Disk: return "disk";
        case BuildReport::From::Compiled: return "compiled";
    }
    return "?";
}

void bind_config(nb::module_& m) {
    nb::class_<KernelConfig>(m, "KernelConfig", "A GEMM mainloop's tile config (include/coda/kernel_config.hpp).")
        .def_static("parse", &KernelConfig::parse, "text"_a,
                    "From text such as 'hopper bm=128 bn=256 cooperative'; fields left out keep the default.")
        // Generic over the mainloops: the text names its mainloop first, and every config type has bm and bn.
        .def_prop_ro("mainloop",
                     [](const KernelConfig& c) {
                         const std::string text = c.to_text();
                         return text.substr(0, text.find(' '));
                     })
        .def_prop_ro("bm",
                     [](const KernelConfig& c) {
                         return std::visit([](const auto& config) { return config.bm; }, c.alternatives());
                     })
        .def_prop_ro("bn",
                     [](const KernelConfig& c) {
                         return std::visit([](const auto& config) { return config.bn; }, c.alternatives());
                     })
        .def("__str__", &KernelConfig::to_text)
        .def("__repr__", [](const KernelConfig& c) { return fmt::format("coda.KernelConfig.parse('{}')", c.to_text()); })
        .def("__eq__", [](const KernelConfig& a, const KernelConfig& b) { return a == b; })
        .def("__hash__", [](const KernelConfig& c) { return nb::hash(nb::str(c.to_text().c_str())); });

    nb::class_<BuildReport>(m, "BuildReport", "What building a kernel did: where it came from and what it cost.")
        .def_ro("kernel_name", &BuildReport::kernel_name)
        .def_ro("arch", &BuildReport::arch)
        .def_ro("cache_key", &BuildReport::cache_key)
        .def_prop_ro("origin", [](const BuildReport& r) { return std::string(origin_text(r.from)); },
                     "'memory', 'disk' or 'compiled'")
        .def_ro("seconds", &BuildReport::seconds)
        .def_ro("registers", &BuildReport::registers)
        .def_ro("spill_bytes", &BuildReport::spill_bytes)
        .def_ro("stack_frame_bytes", &BuildReport::stack_frame_bytes)
        .def("__repr__", [](const BuildReport& r) {
            return fmt::format("<coda.BuildReport {} {} from {} in {:.3f} s, {} registers, {} spill bytes>",
                               r.kernel_name, r.arch, origin_text(r.from), r.seconds, r.registers, r.spill_bytes);
        });
}

void bind_kernel(nb::module_& m) {
    nb::class_<Kernel>(m, "Kernel", "A compiled kernel loaded on the current device.")
        .def_prop_ro("graph", &Kernel::graph)
        .def_prop_ro("config", &Kernel::config)
        .def_prop_ro("report", &Kernel::report)
        .def_prop_ro("tile", [](const Kernel& k) { return std::make_tuple(k.tile().bm, k.tile().bn); })
        .def_prop_ro("source", &Kernel::source)
        .def(
            "partials_shape",
            [](const Kernel& k, const std::string& name, std::int64_t m, std::int64_t n) {
                const auto s = k.partials_shape(name, m, n);
                return std::make_tuple(s.at(0), s.at(1));
            },
            "name"_a, "m"_a, "n"_a, "Shape of a reduction's partials tensor for a problem of m rows, n columns.")
        .def(
            "launch",
            [](const Kernel& k, nb::handle bindings, nb::handle stream) {
                CUstream_st* s = stream_of(stream);
                LaunchArgs launch = launch_args(bindings, true, &k.graph());
                nb::gil_scoped_release release;
                k.launch(launch.args, s);
            },
            "bindings"_a, "stream"_a = nb::none(),
            "Launches on `stream` with tensors (DLPack or __cuda_array_interface__) and floats bound by name; a "
            "scalar also binds to a one-element f32 GPU tensor, read by the kernel when it runs.");
}

void bind_build(nb::module_& m) {
    m.def(
        "source",
        [](const Graph& g, const std::optional<std::string>& arch, nb::handle config, const std::optional<Shape>& shape) {
            return Runtime::instance().source(g, options_of(arch, config, shape));
        },
        "graph"_a, "arch"_a = "sm_90a", "config"_a = nb::none(), "shape"_a = nb::none(),
        "The CUDA translation unit coda generates for the graph (no compile, no GPU).");
    m.def(
        "warm",
        [](const Graph& g, const std::optional<std::string>& arch, nb::handle config, const std::optional<Shape>& shape) {
            const CompileOptions options = options_of(arch, config, shape);
            nb::gil_scoped_release release;
            return Runtime::instance().warm(g, options);
        },
        "graph"_a, "arch"_a = nb::none(), "config"_a = nb::none(), "shape"_a = nb::none(),
        "Builds the kernel into the cache without loading it: no GPU needed when arch is given.");
    m.def(
        "default_config",
        [](const Graph& g, const std::string& arch, const std::optional<Shape>& shape) {
            return Runtime::instance().default_config(g, arch, options_of(arch, nb::none(), shape).shape);
        },
        "graph"_a, "arch"_a, "shape"_a = nb::none(),
        "The config compile() uses when none is given; None for tile programs and finalizers.");
    m.def(
        "compile",
        [](const Graph& g, const std::optional<std::string>& arch, nb::handle config, const std::optional<Shape>& shape) {
            const CompileOptions options = options_of(arch, config, shape);
            nb::gil_scoped_release release;
            return Runtime::instance().compile(g, options);
        },
        "graph"_a, "arch"_a = nb::none(), "config"_a = nb::none(), "shape"_a = nb::none(),
        "Builds (or finds in the cache) and loads the kernel for the current device. Needs a GPU.");

    m.def("device_available", [] { return Driver::instance().available(); },
          "Whether a CUDA driver and device are usable (what compile and launch need).");
    m.def("device_unavailable_reason", [] { return Driver::instance().unavailable_reason(); },
          "Why no device is usable; empty when one is.");
    m.def(
        "device_arch",
        [] {
            Driver::instance().ensure_context();
            return Driver::instance().current_device().arch;
        },
        "The arch coda compiles for on the current device, e.g. 'sm_90a'. Needs a GPU.");
}

}  // namespace

void bind_runtime(nb::module_& m) {
    bind_config(m);
    bind_kernel(m);
    bind_build(m);
}

}  // namespace coda::python
