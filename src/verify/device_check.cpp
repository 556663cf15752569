// Random inputs -> device -> kernel -> host, and the same inputs -> CPU reference; then an elementwise and
// a norm-wise comparison per output, with tolerances set by the output's storage dtype.
#include "verify/device_check.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <utility>

#include <fmt/format.h>

#include "coda/error.hpp"
#include "driver/cuda_driver.hpp"
#include "ir/check_graph.hpp"
#include "reference/reference.hpp"
#include "util/sha256.hpp"
#include "verify/host_data.hpp"

namespace coda::verify {
namespace {

struct Tolerance {
    double rel;
    double max;
};

// bf16 keeps 8 significant bits (relative step 2^-8), f16 11, f32 24; the GEMM accumulates in f32. Except one of
// FP8 operands that does not promote (fp8_accumulation: neither block scales nor Accumulation::Promoted): Hopper's
// FP8 wgmma adds its products into the accumulator with fewer bits than f32 keeps, and nothing promotes them every
// k-block, so an f32 output of such a GEMM is only about as exact as 2^-10 (measured on an H100: 1.07e-3 of the
// norm, K = 4096, one row).
Tolerance tolerance_for(DType d, bool fp8_accumulation = false) {
    switch (d) {
        case DType::BF16: return {1e-2, 5e-2};
        case DType::F16: return {5e-3, 2e-2};
        case DType::F32: return fp8_accumulation ? Tolerance{5e-3, 2e-2} : Tolerance{1e-3, 1e-2};
        case DType::I32: return {0, 0};
        // A tolerance follows an output's dtype, not the GEMM operands' (FP8 operands are exact, their products
        // exact in f32). An FP8 output rounds the kernel's f32 value, which may lie across a rounding boundary
        // from the reference's f64 one: one ulp apart, 2^-3 relative at most for e4m3 (4 significant bits), 2^-2
        // for e5m2 (3).
        case DType::E4M3: return {1e-1, 2e-1};
        case DType::E5M2: return {2e-1, 4e-1};
    }
    return {0, 0};
}

// One device tensor with its host mirror.
struct DeviceTensor {
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;
    std::int64_t ld = 0;  // row stride of a matrix as stored
    DeviceBuffer buffer;
    std::vector<std::uint8_t> initial;  // a guarded tile tensor's bytes before the launch (padding and guard included)
};

constexpr std::uint8_t kSentinel = 0x5A;  // row padding and guard bytes: no kernel writes this pattern by chance
constexpr std::size_t kGuardBytes = 256;  // after a guarded tile tensor's last row

// A rows x cols tile tensor stored with row pitch `ld`, followed by kGuardBytes: the logical elements from
// `logical` (or, without values, 0xFF bytes: NaN in every float dtype), padding and guard the sentinel.
DeviceTensor guarded_tile(const std::vector<double>* logical, DType dtype, std::int64_t rows, std::int64_t cols,
                          std::int64_t ld) {
    const std::size_t elem = size_of(dtype);
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(rows * ld) * elem + kGuardBytes, kSentinel);
    const std::vector<std::uint8_t> values =
        logical ? encode(*logical, dtype) : std::vector<std::uint8_t>(static_cast<std::size_t>(rows * cols) * elem, 0xFF);
    for (std::int64_t r = 0; r < rows; ++r)
        std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r * cols) * elem),
                    static_cast<std::size_t>(cols) * elem,
                    bytes.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r * ld) * elem));
    DeviceTensor t{dtype, {rows, cols}, ld, DeviceBuffer(bytes.size()), bytes};
    Driver::instance().copy_to_device(t.buffer.ptr(), bytes.data(), bytes.size());
    return t;
}

// The logical elements of a guarded tile tensor's bytes, row by row.
std::vector<std::uint8_t> logical_bytes(const DeviceTensor& t, const std::vector<std::uint8_t>& bytes) {
    const std::size_t elem = size_of(t.dtype), row = static_cast<std::size_t>(t.shape[1]) * elem;
    std::vector<std::uint8_t> out;
    out.reserve(static_cast<std::size_t>(t.shape[0]) * row);
    for (std::int64_t r = 0; r < t.shape[0]; ++r) {
        const auto first = bytes.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r * t.ld) * elem);
        out.insert(out.end(), first, first + static_cast<std::ptrdiff_t>(row));
    }
    return out;
}

// Bytes of a guarded tile tensor that changed where nothing may write: its padding and guard, or anywhere in an
// input.
std::int64_t clobbered_bytes(const DeviceTensor& t, const std::vector<std::uint8_t>& bytes, bool input) {
    const std::size_t elem = size_of(t.dtype), row = static_cast<std::size_t>(t.shape[1]) * elem,
                      pitch = static_cast<std::size_t>(t.ld) * elem;
    std::int64_t changed = 0;
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        const bool logical = i < static_cast<std::size_t>(t.shape[0]) * pitch && i % pitch < row;
        if ((input || !logical) && bytes[i] != t.initial[i]) ++changed;
    }
    return changed;
}

DeviceTensor upload(const std::vector<double>& stored_values, DType dtype, std::vector<std::int64_t> shape,
                    std::int64_t ld) {
    DeviceTensor t{dtype, std::move(shape), ld, DeviceBuffer(stored_values.size() * size_of(dtype)), {}};
    const auto bytes = encode(stored_values, dtype);
    Driver::instance().copy_to_device(t.buffer.ptr(), bytes.data(), bytes.size());
    return t;
}

// An output tensor filled with NaN bytes (0xFF..: NaN in every float dtype, e4m3 and e5m2 included; -1 in i32).
DeviceTensor poisoned(DType dtype, std::vector<std::int64_t> shape) {
    std::size_t count = 1;
    for (auto e : shape) count *= static_cast<std::size_t>(e);
    const std::int64_t ld = shape.size() == 2 ? shape[1] : 0;
    DeviceTensor t{dtype, std::move(shape), ld, DeviceBuffer(count * size_of(dtype)), {}};
    Driver::instance().memset8(t.buffer.ptr(), 0xFF, count * size_of(dtype));
    return t;
}

std::vector<std::uint8_t> download(const DeviceTensor& t) {
    std::vector<std::uint8_t> bytes(t.buffer.bytes());
    Driver::instance().copy_to_host(bytes.data(), t.buffer.ptr(), bytes.size());
    return bytes;
}

TensorRef ref_of(const DeviceTensor& t) {
    const void* p = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(t.buffer.ptr()));
    if (t.shape.size() == 1) return vector(p, t.dtype, t.shape[0]);
    return matrix(p, t.dtype, t.shape[0], t.shape[1], t.ld);
}

// Lays a logical rows x cols matrix out as stored: row-major with `ld`, or transposed (column-major) with
// `ld`; padding is NaN so that a kernel reading it would poison its output.
std::vector<double> lay_out(const std::vector<double>& logical, std::int64_t rows, std::int64_t cols, bool transposed,
                            std::int64_t ld) {
    const std::int64_t outer = transposed ? cols : rows;
    std::vector<double> stored(static_cast<std::size_t>(outer * ld), std::numeric_limits<double>::quiet_NaN());
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
            stored[static_cast<std::size_t>(transposed ? c * ld + r : r * ld + c)] =
                logical[static_cast<std::size_t>(r * cols + c)];
    return stored;
}

// f32 block scales (GemmSpec::scales) that tell a misplaced one: 2^u with u uniform in [-4, 4], times a factor
// uniform in [0.5, 1], over their root mean square (sqrt(E[4^u] E[f^2]), 4.70), so that the accumulator keeps the
// variance of an unscaled one and outputs keep their usual range.
std::vector<double> random_block_scales(std::mt19937_64& rng, std::size_t count) {
    std::uniform_int_distribution<int> exponent(-4, 4);
    std::uniform_real_distribution<double> factor(0.5, 1.0);
    double mean_4u = 0;
    for (int u = -4; u <= 4; ++u) mean_4u += std::ldexp(1.0, 2 * u) / 9;
    const double rms = std::sqrt(mean_4u * 7.0 / 12.0);
    std::vector<double> values(count);
    for (double& v : values) v = std::ldexp(factor(rng), exponent(rng)) / rms;
    round_in_place(values, DType::F32);
    return values;
}

OutputReport compare(const std::string& name, DType dtype, const std::vector<double>& out,
                     const std::vector<double>& ref, const CheckProblem& p, bool fp8_accumulation) {
    OutputReport r;
    r.name = name;
    r.dtype = dtype;
    r.elements = static_cast<std::int64_t>(ref.size());
    Tolerance tol = tolerance_for(dtype, fp8_accumulation);
    if (p.rel_tolerance > 0) tol.rel = std::min(tol.rel, p.rel_tolerance);
    if (p.max_tolerance > 0) tol.max = std::min(tol.max, p.max_tolerance);
    r.rel_tolerance = tol.rel;
    r.max_tolerance = tol.max;
    double ref_sq = 0, diff_sq = 0;
    std::int64_t finite = 0;
    for (double v : ref)
        if (std::isfinite(v)) {
            ref_sq += v * v;
            ++finite;
        }
    const double rms = finite > 0 ? std::sqrt(ref_sq / static_cast<double>(finite)) : 0.0;
    bool mismatched_special = false;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        const double a = out[i], b = ref[i];
        if (!std::isfinite(b)) {
            // -inf partials (an empty log-sum-exp) must match exactly; NaN in the reference is a test bug.
            if (std::isnan(b) || a != b) mismatched_special = true;
            continue;
        }
        if (std::isnan(a)) {
            ++r.unwritten;
            continue;
        }
        const double d = a - b;
        diff_sq += d * d;
        r.max_error = std::max(r.max_error, std::fabs(d) / (std::fabs(b) + rms + 1e-30));
    }
    r.rel_error = std::sqrt(diff_sq) / std::max(std::sqrt(ref_sq), 1e-30);
    r.pass = !mismatched_special && r.unwritten == 0 && r.rel_error <= tol.rel && r.max_error <= tol.max;
    if (dtype == DType::I32) r.pass = !mismatched_special && r.unwritten == 0 && diff_sq == 0;
    return r;
}

}  // namespace

std::string CheckReport::summary() const {
    std::string s;
    for (const std::string& c : clobbered) s += "  CLOBBERED " + c + "\n";
    for (const OutputReport& o : outputs)
        s += fmt::format("  {:<18} {:>4} {:>10} elems  rel {:.2e} (tol {:.0e})  max {:.2e} (tol {:.0e})  "
                         "unwritten {}  {}\n",
                         o.name, to_string(o.dtype), o.elements, o.rel_error, o.rel_tolerance, o.max_error,
                         o.max_tolerance, o.unwritten, o.pass ? "PASS" : "FAIL");
    return s;
}

CheckReport check_on_device(const Kernel& kernel, const CheckProblem& p) {
    const CheckedGraph g = check_graph(kernel.graph());
    const Domain domain = g.graph.domain();
    std::mt19937_64 rng(p.seed);
    const std::int64_t m = p.m, n = p.n, k = p.k;

    ReferenceProblem ref;
    ref.m = m;
    ref.n = n;
    ref.k = k;
    ref.t = p.t;
    // The kernel's tile cuts reduction partials; a finalizer has none (0 x 0) and cuts nothing.
    ref.bm = std::max(1, kernel.tile().bm);
    ref.bn = std::max(1, kernel.tile().bn);

    Args args;
    std::map<std::string, DeviceTensor> device;
    HostTensor a_host, b_host;
    if (domain == Domain::Gemm) {
        const GemmSpec spec = g.graph.spec();
        const DType a_type = spec.input, b_type = spec.b_input();  // two types are both FP8
        if (a_type == DType::E4M3 || a_type == DType::E5M2) {
            // Scaling only B by 1/sqrt(k) would push it into FP8's few coarse subnormals (e4m3 is normal from
            // 2^-6 only), so both operands share the scale: uniform in [-s, s], s = sqrt(3) * k^(-1/4), keeps
            // the accumulator's variance at 1 as below. random_values rounds them to FP8: the inputs are exact.
            const double s = std::sqrt(3.0) * std::pow(static_cast<double>(std::max<std::int64_t>(k, 1)), -0.25);
            a_host = {a_type, {m, k},
                      random_values(rng, static_cast<std::size_t>(m * k), a_type, Distribution::Uniform, s)};
            b_host = {b_type, {k, n},
                      random_values(rng, static_cast<std::size_t>(k * n), b_type, Distribution::Uniform, s)};
        } else {
            a_host = {a_type, {m, k},
                      random_values(rng, static_cast<std::size_t>(m * k), a_type, Distribution::Normal)};
            b_host = {b_type, {k, n},
                      random_values(rng, static_cast<std::size_t>(k * n), b_type, Distribution::Normal,
                                    1.0 / std::sqrt(static_cast<double>(k)))};
        }
        for (auto& [name, host] : {std::pair<const char*, HostTensor*>{"A", &a_host}, {"B", &b_host}})
            if (auto given = p.given.find(name); given != p.given.end()) {
                if (given->second.size() != host->values.size())
                    throw Error(fmt::format("check: operand '{}' given {} values, the problem needs {}", name,
                                            given->second.size(), host->values.size()));
                host->values = given->second;
            }
        const bool a_t = spec.a == Major::MN;  // stored K x M
        const bool b_t = spec.b == Major::K;   // stored N x K
        const std::int64_t lda = (a_t ? m : k) + p.operand_pad, ldb = (b_t ? k : n) + p.operand_pad;
        device["A"] = upload(lay_out(a_host.values, m, k, a_t, lda), a_type, {m, k}, lda);
        device["B"] = upload(lay_out(b_host.values, k, n, b_t, ldb), b_type, {k, n}, ldb);
        const void* pa = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(device["A"].buffer.ptr()));
        const void* pb = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(device["B"].buffer.ptr()));
        args.bind("A", a_t ? matrix_col_major(pa, a_type, m, k, lda) : matrix(pa, a_type, m, k, lda));
        args.bind("B", b_t ? matrix_col_major(pb, b_type, k, n, ldb) : matrix(pb, b_type, k, n, ldb));
        ref.a = &a_host;
        ref.b = &b_host;
        for (const BlockScaleOperand& scales : block_scale_operands(spec)) {
            const std::string name(scales.name);
            const BlockScaleShape extent = scales.shape(m, n, k);
            const std::vector<std::int64_t> shape{extent.rows, extent.cols};
            const std::size_t count = static_cast<std::size_t>(extent.rows * extent.cols);
            std::vector<double> values = random_block_scales(rng, count);
            if (auto given = p.given.find(name); given != p.given.end()) {
                if (given->second.size() != count)
                    throw Error(fmt::format("check: '{}' ({}) given {} values, the problem needs {}", name,
                                            scales.what, given->second.size(), count));
                values = given->second;
            }
            ref.inputs[name] = HostTensor{scales.dtype, {extent.rows, extent.cols}, values};
            device[name] = upload(values, scales.dtype, shape, extent.cols);
            args.bind(name, ref_of(device[name]));
        }
    }

    const std::int64_t index_limit = domain == Domain::Finalize ? m : n;
    // A tile tensor's row pitch: its columns plus p.tile_pad, rounded up to the elements one access moves.
    const auto padded_pitch = [&p](const Binding& b, std::int64_t cols) {
        const std::int64_t v = values_per_pair(b.width);
        return cols + (p.tile_pad + v - 1) / v * v;
    };
    for (const Binding& b : g.bindings) {
        std::vector<std::int64_t> shape;
        if (b.kind == Kind::Tile) shape = {m, columns(b.width, n)};
        if (b.transposed) shape = {columns(b.width, n), m};
        if (b.kind == Kind::Row) shape = {m};
        if (b.kind == Kind::Col) shape = {columns(b.width, n)};
        if (b.role == BindingRole::Partials) shape = {p.t, m};
        if (b.role == BindingRole::RowPartials || b.role == BindingRole::ColPartials)
            shape = kernel.partials_shape(b.name, m, n);
        std::size_t count = 1;
        for (auto e : shape) count *= static_cast<std::size_t>(e);

        switch (b.role) {
            case BindingRole::ScalarArg: {
                const double v = random_values(rng, 1, DType::F32, Distribution::Positive)[0];
                args.bind(b.name, static_cast<float>(v));
                ref.scalars[b.name] = v;
                continue;
            }
            case BindingRole::Input:
            case BindingRole::Partials:
            case BindingRole::InOut: {
                const Distribution d = b.dtype == DType::I32 ? Distribution::Index
                                       : (b.kind == Kind::Tile && b.role != BindingRole::Partials) ? Distribution::Normal
                                                                                                  : Distribution::Positive;
                auto values = random_values(rng, count, b.dtype, d, 1.0, index_limit);
                if (auto given = p.given.find(b.name); given != p.given.end()) {
                    if (given->second.size() != count)
                        throw Error(fmt::format("check: input '{}' given {} values, the problem needs {}", b.name,
                                                given->second.size(), count));
                    values = given->second;
                }
                ref.inputs[b.name] = HostTensor{b.dtype, std::vector<long long>(shape.begin(), shape.end()), values};
                if (is_tile_tensor(b))
                    device[b.name] = guarded_tile(&values, b.dtype, shape[0], shape[1], padded_pitch(b, shape[1]));
                else
                    device[b.name] = upload(values, b.dtype, shape, shape.size() == 2 ? shape[1] : 0);
                break;
            }
            case BindingRole::Output:
                if (is_tile_tensor(b))
                    device[b.name] = guarded_tile(nullptr, b.dtype, shape[0], shape[1], padded_pitch(b, shape[1]));
                else
                    device[b.name] = poisoned(b.dtype, shape);
                break;
            case BindingRole::RowPartials:
            case BindingRole::ColPartials:
                device[b.name] = poisoned(b.dtype, shape);
                break;
        }
        args.bind(b.name, ref_of(device[b.name]));
    }

    if (p.path == CheckProblem::Path::Launch) kernel.launch(args);
    if (p.path == CheckProblem::Path::Bound) kernel.bind(args).launch();
    std::vector<DeviceBuffer> decoys;  // alive until the launch is done: a stale pointer must not fault
    if (p.path == CheckProblem::Path::Rebound) {
        // Bound to decoys (never launched on): a binding rebind missed leaves the real outputs poisoned.
        Args decoy_args = args;
        for (const auto& [name, t] : args.tensors()) {
            decoys.emplace_back(device.count(name) ? device[name].buffer.bytes() : std::size_t{1} << 20);
            TensorRef other = t;
            other.data = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(decoys.back().ptr()));
            decoy_args.bind(name, other);
        }
        for (const auto& [name, value] : args.scalars()) decoy_args.bind(name, value + 1.0f);
        BoundLaunch bound = kernel.bind(decoy_args);
        for (const auto& [name, t] : args.tensors()) bound.rebind(name, t.data);
        for (const auto& [name, value] : args.scalars()) bound.rebind(name, value);
        bound.launch();
    }
    Driver::instance().synchronize();

    const auto expected = run_reference(g, ref);
    CheckReport report;
    report.kernel = kernel.report().kernel_name;
    report.problem = domain == Domain::Finalize ? fmt::format("L={} T={}", m, p.t)
                     : domain == Domain::Tile  ? fmt::format("M={} N={}", m, n)
                                               : fmt::format("M={} N={} K={}{}", m, n, k,
                                                             p.operand_pad ? fmt::format(" pad={}", p.operand_pad) : "");
    if (p.tile_pad) report.problem += fmt::format(" tile_pad={}", p.tile_pad);
    report.pass = true;
    for (const Binding& b : g.bindings) {
        const DeviceTensor* t = device.count(b.name) ? &device[b.name] : nullptr;
        if (t == nullptr || t->initial.empty()) continue;
        if (const std::int64_t changed = clobbered_bytes(*t, download(*t), b.role == BindingRole::Input))
            report.clobbered.push_back(fmt::format("{} ({} bytes of {} changed{})", b.name, changed,
                                                   b.role == BindingRole::Input ? "an input" : "padding or guard",
                                                   p.tile_pad ? fmt::format(", row pitch {}", t->ld) : ""));
    }
    report.pass = report.clobbered.empty();
    const bool fp8_accumulation = domain == Domain::Gemm && size_of(g.graph.spec().input) == 1 &&
                                  !g.graph.spec().promotes();
    for (const Binding& b : g.bindings) {
        if (b.role == BindingRole::Input || b.role == BindingRole::Partials || b.role == BindingRole::ScalarArg) continue;
        auto it = expected.find(b.name);
        if (it == expected.end()) throw InternalError(fmt::format("reference produced no output '{}'", b.name));
        const DeviceTensor& t = device[b.name];
        const auto bytes = t.initial.empty() ? download(t) : logical_bytes(t, download(t));
        report.outputs.push_back(
            compare(b.name, b.dtype, decode(bytes, b.dtype), it->second.values, p, fp8_accumulation));
        report.outputs.back().digest =
            sha256_hex(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
        report.pass = report.pass && report.outputs.back().pass;
    }
    return report;
}

}  // namespace coda::verify
