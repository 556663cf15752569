// Tensors across the boundary, without copies: device tensors from DLPack (__dlpack__) or __cuda_array_interface__
// become coda::TensorRefs for a launch; host arrays feed the CPU reference, whose results come back as numpy arrays.
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bindings.hpp"
#include "coda/error.hpp"
#include "ir/check_graph.hpp"
#include "mainloop/block_scales.hpp"
#include "reference/reference.hpp"
#include "verify/host_data.hpp"

namespace coda::python {
namespace {

using namespace nb::literals;
using dlpack_code = nb::dlpack::dtype_code;

std::optional<DType> coda_dtype(nb::dlpack::dtype t) {
    if (t.lanes != 1) return std::nullopt;
    if (t.code == static_cast<std::uint8_t>(dlpack_code::Bfloat) && t.bits == 16) return DType::BF16;
    if (t.code == static_cast<std::uint8_t>(dlpack_code::Float) && t.bits == 16) return DType::F16;
    if (t.code == static_cast<std::uint8_t>(dlpack_code::Float) && t.bits == 32) return DType::F32;
    if (t.code == static_cast<std::uint8_t>(dlpack_code::Int) && t.bits == 32) return DType::I32;
    // DLPack 1.1's kDLFloat8_e4m3fn and kDLFloat8_e5m2 (torch.float8_e4m3fn, torch.float8_e5m2).
    constexpr std::uint8_t kFloat8E4M3FN = 10, kFloat8E5M2 = 12;
    if (t.code == kFloat8E4M3FN && t.bits == 8) return DType::E4M3;
    if (t.code == kFloat8E5M2 && t.bits == 8) return DType::E5M2;
    return std::nullopt;
}

std::string dlpack_dtype_text(nb::dlpack::dtype t) {
    static const char* const names[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
    const char* name = t.code < 7 ? names[t.code] : "code";
    return t.lanes == 1 ? fmt::format("{}{}", name, t.bits) : fmt::format("{}{}x{}", name, t.bits, t.lanes);
}

// Strides in elements; DLPack leaves them out for compact row-major tensors.
std::vector<std::int64_t> strides_of(const nb::ndarray<>& a) {
    std::vector<std::int64_t> strides(a.ndim());
    if (a.stride_ptr()) {
        std::copy_n(a.stride_ptr(), a.ndim(), strides.begin());
    } else {
        std::int64_t step = 1;
        for (std::size_t i = a.ndim(); i-- > 0;) {
            strides[i] = step;
            step *= static_cast<std::int64_t>(a.shape(i));
        }
    }
    return strides;
}

// A device tensor as coda binds it: 1-D is a vector; 2-D is a row-major matrix when its column stride is 1, else a
// column-major one when its row stride is 1 (so B = W^T of an N x K weight is passed as w.t()).
TensorRef tensor_ref(const std::string& name, const void* data, DType dtype, std::vector<std::int64_t> shape,
                     std::vector<std::int64_t> strides) {
    if (shape.size() == 1) return TensorRef{data, dtype, std::move(shape), std::move(strides)};
    if (shape.size() != 2)
        throw Error(fmt::format("launch binding '{}': coda binds 1-D (vector) and 2-D (matrix) tensors, got {} "
                                "dimensions (shape [{}])",
                                name, shape.size(), fmt::join(shape, ", ")));
    // The stride of an extent-1 dimension means nothing, and exporters report 1 or anything else for it; give it the
    // one its layout needs.
    if (strides[1] == 1) {
        if (shape[0] == 1) strides[0] = std::max(strides[0], shape[1]);
    } else if (strides[0] == 1) {
        if (shape[1] == 1) strides[1] = std::max(strides[1], shape[0]);
    } else {
        throw Error(fmt::format("launch binding '{}': a matrix needs stride 1 in one dimension (row- or "
                                "column-major), got shape [{} x {}] strides [{}, {}]; pass a contiguous tensor",
                                name, shape[0], shape[1], strides[0], strides[1]));
    }
    return TensorRef{data, dtype, std::move(shape), std::move(strides)};
}

// The __cuda_array_interface__ (version 2 or 3) of an object that has no __dlpack__.
TensorRef from_cuda_array_interface(const std::string& name, nb::handle object) {
    nb::dict cai = nb::cast<nb::dict>(object.attr("__cuda_array_interface__"));
    const std::string typestr = nb::cast<std::string>(cai["typestr"]);
    std::optional<DType> dtype;
    if (typestr == "<f2") dtype = DType::F16;
    if (typestr == "<f4") dtype = DType::F32;
    if (typestr == "<i4") dtype = DType::I32;
    if (!dtype)
        throw Error(fmt::format("launch binding '{}': __cuda_array_interface__ typestr '{}' is not a coda dtype "
                                "(<f2, <f4, <i4; bf16 needs DLPack)",
                                name, typestr));
    std::vector<std::int64_t> shape;
    for (nb::handle e : nb::cast<nb::tuple>(cai["shape"])) shape.push_back(nb::cast<std::int64_t>(e));
    std::vector<std::int64_t> strides(shape.size());
    const std::int64_t elem = static_cast<std::int64_t>(size_of(*dtype));
    if (cai.contains("strides") && !cai["strides"].is_none()) {
        std::size_t i = 0;
        for (nb::handle e : nb::cast<nb::tuple>(cai["strides"])) {
            const std::int64_t bytes = nb::cast<std::int64_t>(e);
            if (i >= strides.size() || bytes % elem != 0)
                throw Error(fmt::format("launch binding '{}': __cuda_array_interface__ strides are not whole "
                                        "elements of {} bytes",
                                        name, elem));
            strides[i++] = bytes / elem;
        }
    } else {
        std::int64_t step = 1;
        for (std::size_t i = shape.size(); i-- > 0;) {
            strides[i] = step;
            step *= shape[i];
        }
    }
    const auto pointer = nb::cast<std::uintptr_t>(nb::cast<nb::tuple>(cai["data"])[0]);
    return tensor_ref(name, reinterpret_cast<const void*>(pointer), *dtype, std::move(shape), std::move(strides));
}

nb::object steal(PyObject* o) {
    if (o == nullptr) throw nb::python_error();
    return nb::steal(o);
}

std::string text_of(nb::handle o) { return nb::cast<std::string>(nb::str(o)); }

// A tuple of ints (torch.Size, a stride tuple).
std::vector<std::int64_t> integers(const nb::object& tuple) {
    const Py_ssize_t n = PyTuple_Size(tuple.ptr());
    if (n < 0) throw nb::python_error();
    std::vector<std::int64_t> out(static_cast<std::size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple.ptr(), i));
    if (PyErr_Occurred()) throw nb::python_error();
    return out;
}

// torch tensors are read through their own attributes (is_cuda, dtype, shape, stride(), data_ptr()): a few hundred ns
// a tensor, where torch's __dlpack__ costs about 5 us in Python code. Only Python calls: libtorch is never linked.
// The types are looked up once torch has been imported by someone else; until then nothing here is a torch tensor.
class TorchTensors {
public:
    // Whether `object` is a torch tensor (never before torch has been imported).
    bool is_tensor(nb::handle object) {
        return (ready_ || load()) && PyObject_TypeCheck(object.ptr(), tensor_type_);
    }

    // The tensor's TensorRef, or nullopt when `object` is not a torch tensor.
    std::optional<TensorRef> read(const std::string& name, nb::handle object, bool device_only) {
        if (!is_tensor(object)) return std::nullopt;
        if (device_only && steal(PyObject_GetAttr(object.ptr(), is_cuda_)).ptr() != Py_True)
            throw Error(fmt::format("launch binding '{}': expected a CUDA tensor, got a torch tensor on {}", name,
                                    text_of(object.attr("device"))));
        const nb::object dtype_object = steal(PyObject_GetAttr(object.ptr(), dtype_));
        std::optional<DType> dtype;
        for (int i = 0; i < kTorchDTypes; ++i)
            if (dtype_object.ptr() == dtypes_[i]) dtype = kDTypes[i];
        if (!dtype)
            throw Error(fmt::format("launch binding '{}': dtype {} is not a coda dtype (bf16, f16, f32, i32, "
                                    "float8_e4m3fn, float8_e5m2)",
                                    name,
                                    text_of(dtype_object)));
        const std::vector<std::int64_t> dims = integers(steal(PyObject_GetAttr(object.ptr(), shape_)));
        std::vector<std::int64_t> steps = integers(steal(PyObject_CallMethodNoArgs(object.ptr(), stride_)));
        const nb::object pointer = steal(PyObject_CallMethodNoArgs(object.ptr(), data_ptr_));
        const auto address = static_cast<std::uintptr_t>(PyLong_AsUnsignedLongLong(pointer.ptr()));
        if (PyErr_Occurred()) throw nb::python_error();
        return tensor_ref(name, reinterpret_cast<const void*>(address), *dtype, dims, std::move(steps));
    }

    // The address of torch tensor `object` when it is one f32 on a CUDA device (any shape of one element).
    std::optional<const float*> one_f32_on_gpu(nb::handle object) {
        if (steal(PyObject_GetAttr(object.ptr(), is_cuda_)).ptr() != Py_True) return std::nullopt;
        if (steal(PyObject_GetAttr(object.ptr(), dtype_)).ptr() != dtypes_[2]) return std::nullopt;
        if (nb::cast<std::int64_t>(object.attr("numel")()) != 1) return std::nullopt;
        const nb::object pointer = steal(PyObject_CallMethodNoArgs(object.ptr(), data_ptr_));
        return reinterpret_cast<const float*>(nb::cast<std::uintptr_t>(pointer));
    }

private:
    bool load() {
        PyObject* torch = PyDict_GetItemString(PyImport_GetModuleDict(), "torch");  // borrowed
        if (torch == nullptr || !PyObject_HasAttrString(torch, "bfloat16")) return false;  // absent or importing
        // Kept for the life of the process (references never released: no work at interpreter exit).
        nb::handle t(torch);
        tensor_type_ = reinterpret_cast<PyTypeObject*>(nb::object(t.attr("Tensor")).release().ptr());
        const char* const names[] = {"bfloat16", "float16", "float32", "int32", "float8_e4m3fn",
                                     "float8_e5m2"};  // as kDTypes
        for (int i = 0; i < kTorchDTypes; ++i) dtypes_[i] = nb::object(t.attr(names[i])).release().ptr();
        is_cuda_ = PyUnicode_InternFromString("is_cuda");
        dtype_ = PyUnicode_InternFromString("dtype");
        shape_ = PyUnicode_InternFromString("shape");
        stride_ = PyUnicode_InternFromString("stride");
        data_ptr_ = PyUnicode_InternFromString("data_ptr");
        ready_ = true;
        return true;
    }

    static constexpr int kTorchDTypes = 6;
    static constexpr DType kDTypes[kTorchDTypes] = {DType::BF16, DType::F16,  DType::F32,
                                                    DType::I32,  DType::E4M3, DType::E5M2};
    bool ready_ = false;
    PyTypeObject* tensor_type_ = nullptr;
    PyObject* dtypes_[kTorchDTypes] = {};
    PyObject *is_cuda_ = nullptr, *dtype_ = nullptr, *shape_ = nullptr, *stride_ = nullptr, *data_ptr_ = nullptr;
};

TorchTensors torch_tensors;  // used with the GIL held

// Why an object with __dlpack__ did not import: its own exception (e.g. torch's "Can't export tensors that require
// gradient") when calling __dlpack__() raises one.
std::string dlpack_failure(nb::handle object) {
    try {
        object.attr("__dlpack__")();
    } catch (const nb::python_error& e) {
        return fmt::format(": {}", e.what());
    }
    return "";
}

std::string python_type(nb::handle object) { return nb::type_name(object.type()).c_str(); }

bool is_number(nb::handle value) {
    return (PyFloat_Check(value.ptr()) || PyLong_Check(value.ptr())) && !PyBool_Check(value.ptr());
}

// The names of the graph's scalar nodes: looked up for every binding of a launch that is not a float, so a graph
// without scalars (most GEMM epilogues) costs one pass over its nodes per launch.
std::vector<std::string> scalar_names(const Graph* graph) {
    std::vector<std::string> names;
    if (graph == nullptr) return names;
    for (const Node& node : graph->nodes())
        if (node.op == Op::Scalar) names.push_back(node.name);
    return names;
}

// A one-element f32 GPU tensor bound to a scalar, as a device scalar the kernel reads when it runs: torch tensors
// through their attributes, others through DLPack (kept alive in `held`) or __cuda_array_interface__. nullopt for
// anything else.
std::optional<DeviceScalar> device_scalar_of(nb::handle value, std::vector<nb::ndarray<>>& held) {
    if (torch_tensors.is_tensor(value)) {
        const std::optional<const float*> p = torch_tensors.one_f32_on_gpu(value);
        return p ? std::optional<DeviceScalar>(device_scalar(*p)) : std::nullopt;
    }
    nb::ndarray<> a;
    if (nb::try_cast(value, a, false)) {
        const bool gpu =
            a.device_type() == nb::device::cuda::value || a.device_type() == nb::device::cuda_managed::value;
        if (!gpu || coda_dtype(a.dtype()) != DType::F32 || a.size() != 1) return std::nullopt;
        const float* p = static_cast<const float*>(a.data());
        held.push_back(std::move(a));
        return device_scalar(p);
    }
    if (!nb::hasattr(value, "__dlpack__") && nb::hasattr(value, "__cuda_array_interface__")) {
        nb::dict cai = nb::cast<nb::dict>(value.attr("__cuda_array_interface__"));
        std::int64_t count = 1;
        for (nb::handle e : nb::cast<nb::tuple>(cai["shape"])) count *= nb::cast<std::int64_t>(e);
        if (nb::cast<std::string>(cai["typestr"]) != "<f4" || count != 1) return std::nullopt;
        const auto pointer = nb::cast<std::uintptr_t>(nb::cast<nb::tuple>(cai["data"])[0]);
        return device_scalar(reinterpret_cast<const float*>(pointer));
    }
    return std::nullopt;
}

// What was bound to a scalar instead of a float or a one-element f32 GPU tensor, for the error.
std::string describe_scalar_value(nb::handle value) {
    if (!torch_tensors.is_tensor(value)) return python_type(value);
    return fmt::format("a torch tensor of dtype {}, shape {}, on {}", text_of(value.attr("dtype")),
                       text_of(value.attr("shape")), text_of(value.attr("device")));
}

// A host array (numpy, a CPU torch tensor, anything with DLPack or the buffer protocol) as a reference input:
// its logical values in row-major order.
HostTensor host_tensor(const std::string& name, nb::handle object, DType binding_dtype) {
    nb::ndarray<> a;
    if (!nb::try_cast(object, a, false))
        throw Error(fmt::format("reference binding '{}': expected a host array (numpy, or a CPU tensor through "
                                "DLPack) or a float, got {}{}",
                                name, python_type(object), nb::hasattr(object, "__dlpack__") ? dlpack_failure(object) : ""));
    if (a.device_type() != nb::device::cpu::value)
        throw Error(fmt::format("reference binding '{}': the reference runs on the CPU; pass a host array "
                                "(e.g. tensor.cpu()), got one on DLPack device type {}",
                                name, a.device_type()));
    const nb::dlpack::dtype t = a.dtype();
    const std::size_t elem = a.itemsize();
    HostTensor out;
    out.dtype = binding_dtype;
    std::size_t count = 1;
    for (std::size_t i = 0; i < a.ndim(); ++i) {
        out.shape.push_back(static_cast<long long>(a.shape(i)));
        count *= a.shape(i);
    }
    // Gather the elements in row-major order, whatever the strides, then convert.
    const std::vector<std::int64_t> strides = strides_of(a);
    std::vector<std::uint8_t> bytes(count * elem);
    const auto* base = static_cast<const std::uint8_t*>(a.data());
    std::vector<std::size_t> index(a.ndim(), 0);
    for (std::size_t flat = 0; flat < count; ++flat) {
        std::int64_t offset = 0;
        for (std::size_t d = 0; d < a.ndim(); ++d) offset += static_cast<std::int64_t>(index[d]) * strides[d];
        std::memcpy(&bytes[flat * elem], base + offset * static_cast<std::int64_t>(elem), elem);
        for (std::size_t d = a.ndim(); d-- > 0;) {
            if (++index[d] < a.shape(d)) break;
            index[d] = 0;
        }
    }
    const auto code = static_cast<dlpack_code>(t.code);
    if (const std::optional<DType> d = coda_dtype(t)) {
        out.values = verify::decode(bytes, *d);
    } else if (t.lanes == 1 && code == dlpack_code::Float && t.bits == 64) {
        out.values.resize(count);
        std::memcpy(out.values.data(), bytes.data(), bytes.size());
    } else if (t.lanes == 1 && code == dlpack_code::Int && t.bits == 64) {
        std::vector<std::int64_t> v(count);
        std::memcpy(v.data(), bytes.data(), bytes.size());
        out.values.assign(v.begin(), v.end());
    } else {
        throw Error(fmt::format("reference binding '{}': dtype {} is not supported (bf16, f16, f32, f64, i32, i64)",
                                name, dlpack_dtype_text(t)));
    }
    return out;
}

nb::object numpy_array(const HostTensor& t) {
    auto* values = new std::vector<double>(t.values);
    nb::capsule owner(values, [](void* p) noexcept { delete static_cast<std::vector<double>*>(p); });
    std::vector<std::size_t> shape(t.shape.begin(), t.shape.end());
    return nb::cast(nb::ndarray<nb::numpy, double>(values->data(), shape.size(), shape.data(), owner));
}

nb::dict reference(const Graph& graph, nb::dict bindings, long long m, long long n, long long k,
                   std::tuple<int, int> tile) {
    const CheckedGraph checked = check_graph(graph);
    const Domain domain = graph.domain();
    ReferenceProblem problem;
    problem.m = m;
    problem.n = n;
    problem.k = k;
    problem.bm = std::max(1, std::get<0>(tile));
    problem.bn = std::max(1, std::get<1>(tile));
    const std::string where = fmt::format("reference of graph '{}'", graph.name());

    std::map<std::string, const Binding*> by_name;
    for (const Binding& b : checked.bindings) by_name[b.name] = &b;
    HostTensor a, b;
    for (auto [key, value] : bindings) {
        const std::string name = nb::cast<std::string>(key);
        if (domain == Domain::Gemm && (name == "A" || name == "B")) {
            (name == "A" ? a : b) =
                host_tensor(name, value, name == "A" ? graph.spec().input : graph.spec().b_input());
            continue;
        }
        if (const BlockScaleOperand* scales = find_block_scale(graph, name)) {
            problem.inputs[name] = host_tensor(name, value, scales->dtype);  // run_reference checks the shapes
            continue;
        }
        const auto it = by_name.find(name);
        if (it == by_name.end())
            throw Error(fmt::format("{}: '{}' is not a binding of the graph", where, name));
        const Binding& binding = *it->second;
        switch (binding.role) {
            case BindingRole::ScalarArg:
                if (!is_number(value))
                    throw Error(fmt::format("{}: scalar '{}' needs a float, got {}", where, name, python_type(value)));
                problem.scalars[name] = nb::cast<double>(value);
                break;
            case BindingRole::Input:
            case BindingRole::Partials:
            case BindingRole::InOut:
                problem.inputs[name] = host_tensor(name, value, binding.dtype);
                if (binding.role == BindingRole::Partials && !problem.inputs[name].shape.empty())
                    problem.t = problem.inputs[name].shape[0];
                break;
            case BindingRole::Output:
            case BindingRole::RowPartials:
            case BindingRole::ColPartials:
                break;  // outputs: the same dict may serve a launch and its reference
        }
    }
    for (const Binding& binding : checked.bindings) {
        const bool read = binding.role == BindingRole::ScalarArg || binding.role == BindingRole::Input ||
                          binding.role == BindingRole::Partials || binding.role == BindingRole::InOut;
        if (read && !problem.inputs.count(binding.name) && !problem.scalars.count(binding.name))
            throw Error(fmt::format("{}: binding '{}' ({} {}) is missing", where, binding.name,
                                    to_string(binding.role), to_string(binding.dtype)));
    }
    if (domain == Domain::Gemm) {
        if (a.shape.empty() || b.shape.empty())
            throw Error(fmt::format("{}: a GEMM graph needs the operands 'A' [m x k] and 'B' [k x n]", where));
        problem.a = &a;
        problem.b = &b;
    }
    std::vector<std::string> needed, missing;
    for (const BlockScaleOperand& s : block_scale_operands(graph)) {
        const BlockScaleShape shape = s.shape(m, n, k);
        needed.push_back(fmt::format("'{}', {} = [{} x {}]", s.name, s.layout, shape.rows, shape.cols));
        if (!problem.inputs.count(std::string(s.name))) missing.push_back(fmt::format("'{}'", s.name));
    }
    if (!missing.empty())
        throw Error(fmt::format("{}: a block-scaled GEMM graph needs the block scales {}; {} {} missing", where,
                                fmt::join(needed, ", and "), fmt::join(missing, " and "),
                                missing.size() == 1 ? "is" : "are"));
    nb::dict out;
    for (const auto& [name, tensor] : run_reference(checked, problem)) out[name.c_str()] = numpy_array(tensor);
    return out;
}

}  // namespace

LaunchArgs launch_args(nb::handle bindings, bool device_only, const Graph* graph) {
    if (!nb::isinstance<nb::dict>(bindings))
        throw nb::type_error(
            fmt::format("bindings: expected a dict of name -> tensor or float, got {}", python_type(bindings)).c_str());
    LaunchArgs out;
    const std::vector<std::string> scalars = scalar_names(graph);
    for (auto [key, value] : nb::borrow<nb::dict>(bindings)) {
        if (!nb::isinstance<nb::str>(key))
            throw nb::type_error(fmt::format("bindings: names must be str, got {}", python_type(key)).c_str());
        const std::string name = nb::cast<std::string>(key);
        if (is_number(value)) {
            out.args.bind(name, nb::cast<float>(value));
            continue;
        }
        if (!scalars.empty() && std::find(scalars.begin(), scalars.end(), name) != scalars.end()) {
            const std::optional<DeviceScalar> scalar = device_scalar_of(value, out.held);
            if (!scalar)
                throw Error(fmt::format("launch binding '{}': scalar '{}' needs a float, or a one-element f32 GPU "
                                        "tensor, got {}",
                                        name, name, describe_scalar_value(value)));
            out.args.bind(name, *scalar);
            continue;
        }
        if (std::optional<TensorRef> t = torch_tensors.read(name, value, device_only)) {
            out.args.bind(name, *t);
            continue;
        }
        nb::ndarray<> a;
        if (nb::try_cast(value, a, false)) {
            const std::optional<DType> dtype = coda_dtype(a.dtype());
            if (!dtype)
                throw Error(fmt::format("launch binding '{}': dtype {} is not a coda dtype (bf16, f16, f32, i32)", name,
                                        dlpack_dtype_text(a.dtype())));
            if (device_only && a.device_type() != nb::device::cuda::value &&
                a.device_type() != nb::device::cuda_managed::value)
                throw Error(fmt::format("launch binding '{}': expected a CUDA tensor, got one on DLPack device type "
                                        "{} (1 is the CPU)",
                                        name, a.device_type()));
            std::vector<std::int64_t> shape(a.shape_ptr(), a.shape_ptr() + a.ndim());
            out.args.bind(name, tensor_ref(name, a.data(), *dtype, std::move(shape), strides_of(a)));
            out.held.push_back(std::move(a));
            continue;
        }
        if (nb::hasattr(value, "__dlpack__"))
            throw Error(fmt::format("launch binding '{}': could not import {} through DLPack{}", name,
                                    python_type(value), dlpack_failure(value)));
        if (nb::hasattr(value, "__cuda_array_interface__")) {
            out.args.bind(name, from_cuda_array_interface(name, value));
            continue;
        }
        throw Error(fmt::format("launch binding '{}': expected a CUDA tensor (__dlpack__ or "
                                "__cuda_array_interface__) or a float, got {}",
                                name, python_type(value)));
    }
    return out;
}

void bind_tensors(nb::module_& m) {
    m.def("reference", &reference, "graph"_a, "bindings"_a, "m"_a, "n"_a, "k"_a = 0,
          "tile"_a = std::make_tuple(128, 128),
          "Evaluates the graph on the CPU in double precision: every sink by name as a float64 numpy array.");
    // The argument conversion of Kernel.launch without a launch, for tests and for measuring the per-launch overhead
    // on machines without a GPU: name -> TensorRef::describe() or the float, or with describe=False only the count.
    m.def(
        "_convert_bindings",
        [](nb::handle bindings, bool device_only, bool describe) -> nb::object {
            const LaunchArgs launch = launch_args(bindings, device_only);
            if (!describe)
                return nb::int_(launch.args.tensors().size() + launch.args.scalars().size() +
                                launch.args.device_scalars().size());
            nb::dict out;
            for (const auto& [name, t] : launch.args.tensors()) out[name.c_str()] = t.describe();
            for (const auto& [name, v] : launch.args.scalars()) out[name.c_str()] = v;
            for (const auto& [name, d] : launch.args.device_scalars())
                out[name.c_str()] = fmt::format("device scalar {}", static_cast<const void*>(d.data));
            return out;
        },
        "bindings"_a, "device_only"_a = true, "describe"_a = true);
}

}  // namespace coda::python
