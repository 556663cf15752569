// Launch-argument checking: every binding bound, nothing unknown bound, dtypes, shapes, strides and
// alignment as the kernel needs them. Messages name the argument, what was expected and what was given.
#include "runtime/launch_plan.hpp"

#include <algorithm>
#include <initializer_list>
#include <string_view>
#include <tuple>
#include <climits>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "coda/error.hpp"
#include "mainloop/block_scales.hpp"

namespace coda {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

std::uintptr_t address(const TensorRef& t) { return reinterpret_cast<std::uintptr_t>(t.data); }

std::string_view tensor_role(BindingRole r) {
    switch (r) {
        case BindingRole::Input: return "input tensor";
        case BindingRole::Output: return "output tensor";
        case BindingRole::InOut: return "accumulate (in/out) tensor";
        case BindingRole::Partials: return "partials tensor";
        case BindingRole::RowPartials: return "row partials tensor";
        case BindingRole::ColPartials: return "column partials tensor";
        case BindingRole::ScalarArg: return "scalar";
    }
    return "tensor";
}

// The alignment in bytes a tensor binding's pointer needs: one access of the values a column pair holds (partials:
// one f32).
std::size_t pointer_alignment(const Binding& b) {
    switch (b.role) {
        case BindingRole::RowPartials:
        case BindingRole::ColPartials:
        case BindingRole::Partials: return 4;
        default: break;
    }
    if (b.kind == Kind::Row || b.transposed) return size_of(b.dtype);  // a transposed tile: one element an access
    return size_of(b.dtype) * static_cast<std::size_t>(values_per_pair(b.width));
}

std::uint64_t float_bits(float value) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    return bits;
}

// A device scalar's slot: its pointer tagged with bit 63 (coda::scalar_from_slot in epilogue_contract.cuh), which
// user-space and UVA addresses never set. `fail` phrases a bad pointer's error.
constexpr std::uint64_t kDeviceScalarTag = std::uint64_t{1} << 63;

template <class Fail>
std::uint64_t device_scalar_bits(const DeviceScalar& s, Fail&& fail) {
    const auto address = reinterpret_cast<std::uintptr_t>(s.data);
    if (s.data == nullptr) fail("device scalar is a null pointer; bind a pointer to one f32 in device memory");
    if (address % alignof(float) != 0)
        fail(fmt::format("device scalar pointer {} is not aligned to 4 bytes (one f32)",
                         static_cast<const void*>(s.data)));
    if (address & kDeviceScalarTag)
        fail(fmt::format("device scalar pointer {} has bit 63 set, which no device address has",
                         static_cast<const void*>(s.data)));
    return static_cast<std::uint64_t>(address) | kDeviceScalarTag;
}

// Operands A and B can be moved in 16-byte vectors (GemmProblem::flags).
bool vectorizable(const void* data, long long ld) { return reinterpret_cast<std::uintptr_t>(data) % 16 == 0 && ld % 8 == 0; }

// The names bound beside the epilogue's bindings: A and B, and a block-scaled GEMM's scales.
bool is_gemm_operand(const CheckedGraph& g, const std::string& name) {
    if (g.graph.domain() != Domain::Gemm) return false;
    return name == "A" || name == "B" || find_block_scale(g.graph, name) != nullptr;
}

std::string list_bindings(const CheckedGraph& g) {
    std::vector<std::string_view> names;
    if (g.graph.domain() == Domain::Gemm) names = {"A", "B"};
    for (const BlockScaleOperand& s : block_scale_operands(g.graph)) names.push_back(s.name);
    for (const Binding& b : g.bindings) names.push_back(b.name);
    return fmt::format("{}", fmt::join(names, ", "));
}

// Collects the context of one kernel's launch so each check can phrase its error the same way.
class Checker {
public:
    Checker(const CheckedGraph& g, const Args& args, const std::string& kernel)
        : g_(g), args_(args), kernel_(kernel) {}

    [[noreturn]] void fail(const std::string& argument, const std::string& what) const {
        throw Error(fmt::format("kernel '{}': argument '{}': {}", kernel_, argument, what));
    }

    const TensorRef& tensor(const std::string& name, std::string_view role) const {
        auto it = args_.tensors().find(name);
        if (it != args_.tensors().end()) {
            if (it->second.data == nullptr) fail(name, fmt::format("{} is a null pointer", role));
            return it->second;
        }
        if (args_.scalars().count(name) || args_.device_scalars().count(name))
            fail(name, fmt::format("is the {}, a tensor, but was bound to a scalar", role));
        fail(name, fmt::format("is not bound; bind the {} with Args::bind(\"{}\", tensor)", role, name));
    }

    void expect_dtype(const std::string& name, const TensorRef& t, DType want) const {
        if (t.dtype != want)
            fail(name, fmt::format("expected dtype {}, got {}", to_string(want), t.describe()));
    }

    // `describe()` says what the shape means; it is only called to phrase an error (launches stay cheap).
    template <class Describe>
    void expect_shape(const std::string& name, const TensorRef& t, std::initializer_list<std::int64_t> want,
                      Describe&& describe) const {
        if (!std::equal(t.shape.begin(), t.shape.end(), want.begin(), want.end())) {
            const std::int64_t* w = want.begin();
            const std::string shape = want.size() == 2 ? fmt::format("[{} x {}]", w[0], w[1]) : fmt::format("[{}]", w[0]);
            fail(name, fmt::format("expected shape {} ({}), got {}", shape, describe(), t.describe()));
        }
        if (t.strides.size() != t.shape.size())
            fail(name, fmt::format("has {} strides for {} dimensions", t.strides.size(), t.shape.size()));
    }

    void expect_alignment(const std::string& name, const TensorRef& t, std::size_t bytes) const {
        if (address(t) % bytes != 0)
            fail(name, fmt::format("pointer {} is not aligned to {} bytes, which this kernel's accesses need",
                                   t.data, bytes));
    }

    // A row-major matrix: unit column stride, row stride >= cols and a multiple of `ld_multiple`.
    long long row_major_ld(const std::string& name, const TensorRef& t, int ld_multiple) const {
        if (t.strides[1] != 1)
            fail(name, fmt::format("must be row-major (column stride 1), got {}", t.describe()));
        const long long ld = t.strides[0];
        if (ld < t.shape[1])
            fail(name, fmt::format("row stride {} is smaller than its {} columns", ld, t.shape[1]));
        if (ld % ld_multiple != 0)
            fail(name, fmt::format("row stride {} must be a multiple of {} elements (this kernel moves {} "
                                   "elements per access)", ld, ld_multiple, ld_multiple));
        return ld;
    }

    void expect_contiguous_vector(const std::string& name, const TensorRef& t) const {
        if (t.strides.size() != 1 || t.strides[0] != 1)
            fail(name, fmt::format("must be a contiguous vector (stride 1), got {}", t.describe()));
    }

    void expect_contiguous_matrix(const std::string& name, const TensorRef& t) const {
        if (t.strides[1] != 1 || t.strides[0] != t.shape[1])
            fail(name, fmt::format("must be a contiguous row-major matrix, got {}", t.describe()));
    }

    // The slot word of scalar `name`: a value's f32 bits, or a device scalar's tagged pointer.
    std::uint64_t scalar_slot(const std::string& name) const {
        auto it = args_.scalars().find(name);
        if (it != args_.scalars().end()) return float_bits(it->second);
        auto dev = args_.device_scalars().find(name);
        if (dev != args_.device_scalars().end())
            return device_scalar_bits(dev->second, [&](const std::string& what) { fail(name, what); });
        if (args_.tensors().count(name))
            fail(name, fmt::format("is an f32 scalar but was bound to a tensor; bind a value with Args::bind(\"{}\", "
                                   "value) or one f32 in device memory with Args::bind(\"{}\", device_scalar(ptr))",
                                   name, name));
        fail(name, fmt::format("is not bound; bind the scalar with Args::bind(\"{}\", value)", name));
    }

    void reject_unknown_names() const {
        // A linear search: graphs have a handful of bindings, and this runs on every launch.
        const auto known = [&](const std::string& name) {
            if (is_gemm_operand(g_, name)) return true;
            for (const Binding& b : g_.bindings)
                if (b.name == name) return true;
            return false;
        };
        const auto check = [&](const std::string& name) {
            if (!known(name))
                throw Error(fmt::format("kernel '{}': argument '{}' is bound but the kernel has no such binding; "
                                        "its bindings are: {}", kernel_, name, list_bindings(g_)));
        };
        for (const auto& [name, t] : args_.tensors()) check(name);
        for (const auto& [name, s] : args_.scalars()) check(name);
        for (const auto& [name, s] : args_.device_scalars()) check(name);
    }

    const CheckedGraph& graph() const { return g_; }
    const std::string& kernel() const { return kernel_; }

private:
    const CheckedGraph& g_;
    const Args& args_;
    const std::string& kernel_;
};

void check_extent(const Checker& c, const std::string& what, std::int64_t value) {
    if (value < 1 || value > INT_MAX)
        c.fail(what, fmt::format("extent {} is outside [1, {}]", value, INT_MAX));
}

// Derives M, N, K from A and B and fills the GEMM problem.
void plan_gemm_operands(const Checker& c, const GemmSpec& spec, LaunchPlan& plan, std::int64_t& m, std::int64_t& n) {
    const TensorRef& a = c.tensor("A", "GEMM operand A (M x K)");
    const TensorRef& b = c.tensor("B", "GEMM operand B (K x N)");
    for (const auto& [name, t, dtype] : {std::tuple<const char*, const TensorRef*, DType>{"A", &a, spec.input},
                                         {"B", &b, spec.b_input()}}) {
        if (t->shape.size() != 2 || t->strides.size() != 2)
            c.fail(name, fmt::format("must be a 2-D tensor, got {}", t->describe()));
        c.expect_dtype(name, *t, dtype);
        c.expect_alignment(name, *t, size_of(dtype));
    }
    m = a.shape[0];
    const std::int64_t k = a.shape[1];
    if (b.shape[0] != k)
        c.fail("B", fmt::format("has {} rows but A has K = {} columns (B is logically K x N), got {}", b.shape[0], k,
                                b.describe()));
    n = b.shape[1];
    check_extent(c, "A", m);
    check_extent(c, "A", k);
    check_extent(c, "B", n);
    if (n % 2 != 0)
        c.fail("B", fmt::format("N = {} is odd; coda epilogues work on column pairs and need an even N", n));

    // A: K-major means stored M x K row-major; M-major means stored K x M row-major (column-major M x K).
    long long lda = 0;
    if (spec.a == Major::K) {
        if (a.strides[1] != 1 || a.strides[0] < k)
            c.fail("A", fmt::format("the kernel was built for K-major A (strides [lda >= K, 1]), got {}", a.describe()));
        lda = a.strides[0];
    } else {
        if (a.strides[0] != 1 || a.strides[1] < m)
            c.fail("A", fmt::format("the kernel was built for M-major A (strides [1, lda >= M]), got {}", a.describe()));
        lda = a.strides[1];
    }
    // B: K-major means stored N x K row-major (strides [1, ldb]); N-major means stored K x N row-major.
    long long ldb = 0;
    if (spec.b == Major::K) {
        if (b.strides[0] != 1 || b.strides[1] < k)
            c.fail("B", fmt::format("the kernel was built for K-major B (strides [1, ldb >= K]), got {}", b.describe()));
        ldb = b.strides[1];
    } else {
        if (b.strides[1] != 1 || b.strides[0] < n)
            c.fail("B", fmt::format("the kernel was built for N-major B (strides [ldb >= N, 1]), got {}", b.describe()));
        ldb = b.strides[0];
    }
    plan.gemm.a = a.data;
    plan.gemm.b = b.data;
    plan.gemm.lda = lda;
    plan.gemm.ldb = ldb;
    plan.gemm.m = static_cast<int>(m);
    plan.gemm.n = static_cast<int>(n);
    plan.gemm.k = static_cast<int>(k);
    plan.gemm.flags = (vectorizable(a.data, lda) ? kGemmVectorA : 0) | (vectorizable(b.data, ldb) ? kGemmVectorB : 0);
    plan.operand_bytes = static_cast<int>(size_of(spec.input));  // B's too: two types are both FP8
}

// A block-scaled GEMM's scales (coda::block_scale_operands), row-major; the mainloop reads them one element at a
// time, from the slots after the bindings' (pointer and leading dimension of each).
void plan_block_scales(const Checker& c, LaunchPlan& plan, std::size_t first) {
    std::size_t slot = first;
    for (const BlockScaleOperand& s : block_scale_operands(c.graph().graph)) {
        const std::string name(s.name);
        const TensorRef& t = c.tensor(name, s.what);
        const BlockScaleShape shape = s.shape(plan.gemm.m, plan.gemm.n, plan.gemm.k);
        c.expect_dtype(name, t, s.dtype);
        c.expect_shape(name, t, {shape.rows, shape.cols}, [&s] { return std::string(s.layout); });
        c.expect_alignment(name, t, size_of(s.dtype));
        plan.slots.at(slot) = reinterpret_cast<std::uintptr_t>(t.data);
        plan.slots.at(slot + 1) = static_cast<std::uint64_t>(c.row_major_ld(name, t, 1));
        slot += BlockScaleOperand::kSlots;
    }
}

// Tile programs take M and N from their first tile tensor that is not transposed, or else from their first
// transposed one (N x M, full width); every other binding must then agree.
void plan_tile_extent(const Checker& c, std::int64_t& m, std::int64_t& n) {
    const Binding* source = nullptr;
    for (const Binding& b : c.graph().bindings) {
        if (!is_tile_tensor(b)) continue;
        if (!b.transposed) {
            source = &b;
            break;
        }
        if (source == nullptr && b.width == Width::Full) source = &b;
    }
    if (source == nullptr)
        throw Error(fmt::format("kernel '{}': a tile program needs a tile tensor to take M and N from; add a "
                                "tile_input or a store", c.kernel()));
    const Binding& b = *source;
    const TensorRef& t = c.tensor(b.name, "tile tensor");
    if (t.shape.size() != 2) c.fail(b.name, fmt::format("must be a 2-D tile tensor, got {}", t.describe()));
    // A transposed one is N x M; the others M x columns(width, N).
    m = t.shape[b.transposed ? 1 : 0];
    const std::int64_t cols = t.shape[b.transposed ? 0 : 1];
    switch (b.width) {
        case Width::Half: n = 2 * cols; break;
        case Width::Full: n = cols; break;
        case Width::Double:
            if (cols % 2 != 0) c.fail(b.name, fmt::format("double-width tensor with an odd column count {}", cols));
            n = cols / 2;
            break;
    }
    check_extent(c, b.name, m);
    check_extent(c, b.name, n);
    if (n % 2 != 0)
        c.fail(b.name, fmt::format("N = {} is odd; coda tile programs work on column pairs and need an even N", n));
}

// Finalizers take L from their first vector and T from their partials.
void plan_finalize_extent(const Checker& c, std::int64_t& l, std::int64_t& t) {
    l = -1;
    t = -1;
    for (const Binding& b : c.graph().bindings) {
        if (b.role == BindingRole::ScalarArg) continue;
        const TensorRef& ref = c.tensor(b.name, b.role == BindingRole::Partials ? "partials tensor" : "vector");
        if (b.role == BindingRole::Partials) {
            if (ref.shape.size() != 2)
                c.fail(b.name, fmt::format("partials must be a 2-D f32 tensor [T x L], got {}", ref.describe()));
            if (t < 0) t = ref.shape[0];
            if (l < 0) l = ref.shape[1];
        } else if (l < 0 && ref.shape.size() == 1) {
            l = ref.shape[0];
        }
    }
    if (l < 0)
        throw Error(fmt::format("kernel '{}': a finalize program needs a vector or partials tensor to take its length "
                                "from", c.kernel()));
    if (t < 0) t = 0;
    check_extent(c, "length", l);
}

}  // namespace

std::vector<std::int64_t> partials_shape(const Binding& b, TileShape tile, std::int64_t m, std::int64_t n) {
    if (b.role == BindingRole::RowPartials) return {ceil_div(n, tile.bn), m};
    if (b.role == BindingRole::ColPartials) return {ceil_div(m, tile.bm), columns(b.width, n)};
    throw Error(fmt::format("'{}' is not a reduction; only reduce_row and reduce_col bindings have a partials shape",
                            b.name));
}

LaunchPlan plan_launch(const CheckedGraph& g, TileShape tile, const Args& args, const std::string& kernel_name) {
    Checker c(g, args, kernel_name);
    c.reject_unknown_names();

    LaunchPlan plan;
    const Domain domain = g.graph.domain();
    std::int64_t m = 0, n = 0, t = 0;
    if (domain == Domain::Gemm) plan_gemm_operands(c, g.graph.spec(), plan, m, n);
    if (domain == Domain::Tile) plan_tile_extent(c, m, n);
    if (domain == Domain::Finalize) plan_finalize_extent(c, m, t);

    plan.slots.assign(static_cast<std::size_t>(std::max(1, args_slots(g))), 0);
    plan_block_scales(c, plan, static_cast<std::size_t>(total_slots(g)));
    std::size_t slot = 0;
    for (const Binding& b : g.bindings) {
        if (b.role == BindingRole::ScalarArg) {
            plan.slots[slot++] = c.scalar_slot(b.name);
            continue;
        }
        const TensorRef& ref = c.tensor(b.name, tensor_role(b.role));
        if (b.role == BindingRole::RowPartials || b.role == BindingRole::ColPartials) {
            c.expect_dtype(b.name, ref, DType::F32);
            const bool rows = b.role == BindingRole::RowPartials;
            const std::int64_t outer = rows ? ceil_div(n, tile.bn) : ceil_div(m, tile.bm);
            const std::int64_t inner = rows ? m : columns(b.width, n);
            c.expect_shape(b.name, ref, {outer, inner}, [rows] {
                return rows ? "one f32 partial per (N-tile, row)" : "one f32 partial per (M-tile, column)";
            });
            c.expect_contiguous_matrix(b.name, ref);
            c.expect_alignment(b.name, ref, pointer_alignment(b));
        } else if (b.role == BindingRole::Partials) {
            c.expect_dtype(b.name, ref, DType::F32);
            c.expect_shape(b.name, ref, {t, m}, [] { return "f32 partials [T x L]"; });
            c.expect_contiguous_matrix(b.name, ref);
            c.expect_alignment(b.name, ref, pointer_alignment(b));
        } else if (b.kind == Kind::Tile && b.transposed) {
            c.expect_dtype(b.name, ref, b.dtype);
            c.expect_shape(b.name, ref, {columns(b.width, n), m}, [&] {
                return fmt::format("{} x M: the {} columns of a {}-width tile by its rows ({})", columns(b.width, n),
                                   columns(b.width, n), to_string(b.width),
                                   b.role == BindingRole::Input ? "tile_input_transposed" : "store_transposed");
            });
            c.expect_alignment(b.name, ref, pointer_alignment(b));
            const long long ld = c.row_major_ld(b.name, ref, 1);
            plan.slots[slot++] = reinterpret_cast<std::uintptr_t>(ref.data);
            plan.slots[slot++] = static_cast<std::uint64_t>(ld);
            continue;
        } else if (b.kind == Kind::Tile) {
            const int v = values_per_pair(b.width);
            c.expect_dtype(b.name, ref, b.dtype);
            c.expect_shape(b.name, ref, {m, columns(b.width, n)}, [&] {
                return fmt::format("M x {} columns of a {}-width tile", columns(b.width, n), to_string(b.width));
            });
            c.expect_alignment(b.name, ref, pointer_alignment(b));
            const long long ld = c.row_major_ld(b.name, ref, v);
            plan.slots[slot++] = reinterpret_cast<std::uintptr_t>(ref.data);
            plan.slots[slot++] = static_cast<std::uint64_t>(ld);
            continue;
        } else if (b.kind == Kind::Row) {
            c.expect_dtype(b.name, ref, b.dtype);
            c.expect_shape(b.name, ref, {m}, [domain] {
                return domain == Domain::Finalize ? "one value per element" : "one value per row (M)";
            });
            c.expect_contiguous_vector(b.name, ref);
            c.expect_alignment(b.name, ref, pointer_alignment(b));
        } else if (b.kind == Kind::Col) {
            c.expect_dtype(b.name, ref, b.dtype);
            c.expect_shape(b.name, ref, {columns(b.width, n)},
                           [&] { return fmt::format("one value per {}-width column", to_string(b.width)); });
            c.expect_contiguous_vector(b.name, ref);
            c.expect_alignment(b.name, ref, pointer_alignment(b));
        }
        plan.slots[slot++] = reinterpret_cast<std::uintptr_t>(ref.data);
    }

    plan.m = m;
    plan.n = n;
    if (domain == Domain::Tile) plan.tile = {static_cast<int>(m), static_cast<int>(n)};
    // (A finalizer's strands are its launcher's, which sizes its grid by them.)
    if (domain == Domain::Finalize) plan.finalize = {static_cast<int>(m), static_cast<int>(t), 0};
    return plan;
}

namespace {

// The binding a rebind names, or a coda::Error that says why there is none.
std::size_t binding_to_rebind(const CheckedGraph& g, const std::string& name, bool scalar,
                              const std::string& kernel_name) {
    for (std::size_t i = 0; i < g.bindings.size(); ++i) {
        const Binding& b = g.bindings[i];
        if (b.name != name) continue;
        if ((b.role == BindingRole::ScalarArg) != scalar)
            throw Error(fmt::format("kernel '{}': argument '{}': cannot rebind {} to {}", kernel_name, name,
                                    b.role == BindingRole::ScalarArg ? "an f32 scalar" : "the " + std::string(tensor_role(b.role)),
                                    scalar ? "a scalar" : "a pointer"));
        return i;
    }
    throw Error(fmt::format("kernel '{}': argument '{}' cannot be rebound: the kernel has no such binding; its "
                            "bindings are: {}", kernel_name, name, list_bindings(g)));
}

void expect_pointer(const std::string& kernel_name, const std::string& name, const void* data, std::size_t bytes) {
    if (data == nullptr)
        throw Error(fmt::format("kernel '{}': argument '{}': cannot rebind to a null pointer", kernel_name, name));
    if (reinterpret_cast<std::uintptr_t>(data) % bytes != 0)
        throw Error(fmt::format("kernel '{}': argument '{}': pointer {} is not aligned to {} bytes, which this "
                                "kernel's accesses need",
                                kernel_name, name, data, bytes));
}

}  // namespace

void rebind_pointer(const CheckedGraph& g, LaunchPlan& plan, const std::string& name, const void* data,
                    const std::string& kernel_name) {
    if (g.graph.domain() == Domain::Gemm && (name == "A" || name == "B")) {
        const bool is_a = name == "A";
        expect_pointer(kernel_name, name, data, size_of(is_a ? g.graph.spec().input : g.graph.spec().b_input()));
        (is_a ? plan.gemm.a : plan.gemm.b) = data;
        const int flag = is_a ? kGemmVectorA : kGemmVectorB;
        plan.gemm.flags = (plan.gemm.flags & ~flag) | (vectorizable(data, is_a ? plan.gemm.lda : plan.gemm.ldb) ? flag : 0);
        return;
    }
    if (const BlockScaleOperand* scales = find_block_scale(g.graph, name)) {
        expect_pointer(kernel_name, name, data, size_of(scales->dtype));
        const auto index = scales - block_scale_operands(g.graph).data();
        plan.slots.at(static_cast<std::size_t>(total_slots(g) + index * BlockScaleOperand::kSlots)) =
            reinterpret_cast<std::uintptr_t>(data);
        return;
    }
    const std::size_t i = binding_to_rebind(g, name, false, kernel_name);
    expect_pointer(kernel_name, name, data, pointer_alignment(g.bindings[i]));
    // A tile tensor's slots are (pointer, leading dimension); the others' only the pointer.
    plan.slots.at(static_cast<std::size_t>(first_slot(g, i))) = reinterpret_cast<std::uintptr_t>(data);
}

namespace {

std::uint64_t& scalar_slot_to_rebind(const CheckedGraph& g, LaunchPlan& plan, const std::string& name,
                                     const std::string& kernel_name) {
    if (g.graph.domain() == Domain::Gemm && (name == "A" || name == "B"))
        throw Error(fmt::format("kernel '{}': argument '{}': cannot rebind GEMM operand {} to a scalar", kernel_name,
                                name, name));
    if (const BlockScaleOperand* scales = find_block_scale(g.graph, name))
        throw Error(fmt::format("kernel '{}': argument '{}': cannot rebind the {}, a tensor, to a scalar", kernel_name,
                                name, scales->what));
    const std::size_t i = binding_to_rebind(g, name, true, kernel_name);
    return plan.slots.at(static_cast<std::size_t>(first_slot(g, i)));
}

}  // namespace

void rebind_scalar(const CheckedGraph& g, LaunchPlan& plan, const std::string& name, float value,
                   const std::string& kernel_name) {
    scalar_slot_to_rebind(g, plan, name, kernel_name) = float_bits(value);
}

void rebind_scalar(const CheckedGraph& g, LaunchPlan& plan, const std::string& name, const DeviceScalar& value,
                   const std::string& kernel_name) {
    std::uint64_t& slot = scalar_slot_to_rebind(g, plan, name, kernel_name);
    slot = device_scalar_bits(value, [&](const std::string& what) {
        throw Error(fmt::format("kernel '{}': argument '{}': {}", kernel_name, name, what));
    });
}

}  // namespace coda
