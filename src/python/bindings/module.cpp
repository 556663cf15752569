// coda._coda: the C++ library as a Python extension. coda::Error arrives as coda.Error with the same message.
#include "bindings.hpp"
#include "coda/error.hpp"

NB_MODULE(_coda, m) {
    namespace nb = nanobind;
    m.doc() = "coda: epilogue graphs fused into GEMMs (the C++ core; see the coda package)";
    m.attr("__version__") = CODA_VERSION;
    nb::exception<coda::Error>(m, "Error", PyExc_RuntimeError);
    coda::python::bind_graph(m);
    coda::python::bind_blocks(m);
    coda::python::bind_runtime(m);
    coda::python::bind_tensors(m);
}
