// cuTensorMapEncodeTiled for A and B. The box shapes must match what hopper_gemm.cuh's producer copies and
// what its expect_tx counts: K-major operands come as one box of 64 x (BM or BN) per stage, M/N-major ones as
// 64 x 64 boxes side by side.
#include "mainloop/hopper_tma.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "coda/error.hpp"
#include "driver/cuda_driver.hpp"

namespace coda {
namespace {

constexpr cuuint32_t kSwizzleBytes = 128;  // one swizzle row: 64 elements of a 16-bit type, 128 of an 8-bit one

// TMA has no 8-bit float type; it moves FP8 operands as bytes, which is all a copy needs.
CUtensorMapDataType tma_type(DType dtype) {
    switch (dtype) {
        case DType::BF16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
        case DType::F16: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
        case DType::E4M3:
        case DType::E5M2: return CU_TENSOR_MAP_DATA_TYPE_UINT8;
        case DType::F32:
        case DType::I32: break;
    }
    throw InternalError(fmt::format("GEMM operands of dtype {} reached the Hopper mainloop's TMA", to_string(dtype)));
}

// A row-major matrix of `rows` x `cols` stored with leading dimension `ld`, cut into boxes of one swizzle row's
// columns x box_rows rows.
CUtensorMap encode(const char* operand, const void* base, DType dtype, long long rows, long long cols, long long ld,
                   int box_rows) {
    CUtensorMap map{};
    const cuuint32_t box_columns = kSwizzleBytes / static_cast<cuuint32_t>(size_of(dtype));
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * size_of(dtype)};
    const cuuint32_t box[2] = {box_columns, static_cast<cuuint32_t>(box_rows)};
    const cuuint32_t element_strides[2] = {1, 1};
    Driver& d = Driver::instance();
    const CUresult r = d.api().cuTensorMapEncodeTiled(
        &map, tma_type(dtype), 2, const_cast<void*>(base), dims, strides, box, element_strides,
        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        d.check(r, "cuTensorMapEncodeTiled",
                fmt::format("operand {}: {} x {} stored with leading dimension {}, box {} x {}", operand, rows, cols, ld,
                            box_rows, box_columns));
    return map;
}

// Whether staging (and so TMA) may move tile tensor b: base and row pitch on 16-byte multiples (the kernel's
// detail::aligned_16 checks the same).
bool aligned_16(const Binding& b, std::uint64_t pointer, std::uint64_t ld) {
    return pointer % 16 == 0 && (ld * size_of(b.dtype)) % 16 == 0;
}

CUtensorMapSwizzle swizzle_for(int span) {
    switch (span) {
        case 32: return CU_TENSOR_MAP_SWIZZLE_32B;
        case 64: return CU_TENSOR_MAP_SWIZZLE_64B;
        case 128: return CU_TENSOR_MAP_SWIZZLE_128B;
        default: throw InternalError(fmt::format("no TMA swizzle spans {} bytes", span));
    }
}

}  // namespace

namespace {

// A tile tensor the kernel's staging covers (a tile input or a store), with its parameter slots' values.
struct TileTensor {
    int node;
    const Binding* binding;
    std::uint64_t pointer;
    std::uint64_t ld;
    bool store;
};

// Calls visit(TileTensor) for each of the graph's tile inputs and stores (with `transposed`: its store_transposed
// outputs instead) as `plan` binds them, in binding order, until it returns false. (No allocation: the launcher asks
// this on every launch.)
template <class Visit>
bool each_tile_tensor(const CheckedGraph& g, const LaunchPlan& plan, Visit&& visit, bool transposed = false) {
    std::size_t slot = 0;  // the binding's first parameter slot, counted along (first_slot, in one pass)
    for (const Binding& b : g.bindings) {
        const std::size_t first = slot;
        slot += static_cast<std::size_t>(slot_count(b));
        if (b.kind != Kind::Tile || b.node < 0) continue;
        const Op op = g.graph.node(b.node).op;
        const bool wanted = transposed ? op == Op::StoreTransposed : op == Op::TileInput || op == Op::Store;
        if (!wanted) continue;
        if (!visit(TileTensor{b.node, &b, plan.slots.at(first), plan.slots.at(first + 1), op != Op::TileInput}))
            return false;
    }
    return true;
}

// Whether staging may move a transposed output (N x M): aligned as any tile tensor, and its rows of m elements
// whole 16-byte units (a TMA store writes whole units).
bool transposed_stageable(const TileTensor& t, long long m) {
    return aligned_16(*t.binding, t.pointer, t.ld) && (static_cast<std::uint64_t>(m) * size_of(t.binding->dtype)) % 16 == 0;
}

bool stageable(const TileTensor& t, long long n) {
    if (!aligned_16(*t.binding, t.pointer, t.ld)) return false;
    // A TMA store writes whole 16-byte units: an output row that ends inside one would clobber its padding.
    const std::uint64_t row_bytes =
        static_cast<std::uint64_t>(n / 2) *
        static_cast<std::uint64_t>(values_per_pair(t.binding->width) * size_of(t.binding->dtype));
    return !t.store || row_bytes % 16 == 0;
}

}  // namespace

bool tile_tensors_stageable(const CheckedGraph& g, const LaunchPlan& plan, bool transposed_outputs) {
    return each_tile_tensor(g, plan, [&](const TileTensor& t) { return stageable(t, plan.gemm.n); }) &&
           (!transposed_outputs ||
            each_tile_tensor(g, plan, [&](const TileTensor& t) { return transposed_stageable(t, plan.gemm.m); }, true));
}

std::vector<CUtensorMap> encode_tile_maps(const CheckedGraph& g, const LaunchPlan& plan, const TmaTileInfo& how) {
    std::vector<CUtensorMap> maps(static_cast<std::size_t>(std::max(how.maps, 1)), CUtensorMap{});
    if (!how.inputs_by_tma && how.outputs == 0 && how.transposed == 0) return maps;
    // In graph order: the generated epilogue's numbering.
    std::vector<TileTensor> inputs, outputs, transposed;
    bool aligned = true;
    each_tile_tensor(g, plan, [&](const TileTensor& t) {
        (t.store ? outputs : inputs).push_back(t);
        aligned = aligned && stageable(t, plan.gemm.n);
        return true;
    });
    if (how.transposed > 0)
        each_tile_tensor(g, plan, [&](const TileTensor& t) {
            transposed.push_back(t);
            aligned = aligned && transposed_stageable(t, plan.gemm.m);
            return true;
        }, true);
    const auto by_node = [](const TileTensor& x, const TileTensor& y) { return x.node < y.node; };
    std::sort(inputs.begin(), inputs.end(), by_node);
    std::sort(outputs.begin(), outputs.end(), by_node);
    std::sort(transposed.begin(), transposed.end(), by_node);
    const int input_maps = how.inputs_by_tma ? static_cast<int>(inputs.size()) : 0;
    if (input_maps + how.outputs + how.transposed != how.maps ||
        (how.outputs > 0 && how.outputs != static_cast<int>(outputs.size())) ||
        (how.transposed > 0 && how.transposed != static_cast<int>(transposed.size())))
        throw InternalError(fmt::format("the kernel takes {} tile maps ({} for outputs, {} for transposed outputs); the "
                                        "graph has {} tile inputs, {} tile outputs and {} transposed outputs",
                                        how.maps, how.outputs, how.transposed, inputs.size(), outputs.size(),
                                        transposed.size()));
    // (A staging kernel never gets such a launch: HopperLauncher::unsupported sends it to the direct variant.)
    if (!aligned) return maps;
    Driver& d = Driver::instance();
    // Tensor t as `rows` rows of `row_bytes` bytes (its row pitch apart), in boxes of `span` bytes (a swizzle mode's
    // width) by `box_rows` rows.
    const auto encode_bytes = [&](CUtensorMap& map, const TileTensor& t, cuuint64_t row_bytes, cuuint64_t rows,
                                  int span, int box_rows, const char* what) {
        const cuuint64_t dims[2] = {row_bytes, rows};
        const cuuint64_t strides[1] = {t.ld * size_of(t.binding->dtype)};
        const cuuint32_t box[2] = {static_cast<cuuint32_t>(span), static_cast<cuuint32_t>(box_rows)};
        const cuuint32_t element_strides[2] = {1, 1};
        const CUresult r = d.api().cuTensorMapEncodeTiled(
            &map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, reinterpret_cast<void*>(t.pointer), dims, strides, box,
            element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle_for(span), CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        if (r != CUDA_SUCCESS)
            d.check(r, "cuTensorMapEncodeTiled",
                    fmt::format("{} '{}': {} rows of {} bytes, {} bytes apart, box {} bytes x {} rows", what,
                                t.binding->name, rows, row_bytes, strides[0], span, box_rows));
    };
    // A tile tensor (M x N): boxes of a chunk's columns (as bytes, in parts of 128) by `rows`.
    const auto encode_chunks = [&](CUtensorMap& map, const TileTensor& t, int rows, const char* what) {
        const Binding& b = *t.binding;
        const int pair_bytes = values_per_pair(b.width) * static_cast<int>(size_of(b.dtype));
        encode_bytes(map, t, static_cast<cuuint64_t>(plan.gemm.n / 2) * static_cast<cuuint64_t>(pair_bytes),
                     static_cast<cuuint64_t>(plan.gemm.m), std::min(how.chunk_columns / 2 * pair_bytes, 128), rows, what);
    };
    for (int i = 0; i < input_maps; ++i)
        encode_chunks(maps[static_cast<std::size_t>(i)], inputs[static_cast<std::size_t>(i)], how.input_rows,
                      "tile input");
    for (int i = 0; i < how.outputs; ++i)
        encode_chunks(maps[static_cast<std::size_t>(input_maps + i)], outputs[static_cast<std::size_t>(i)],
                      how.output_rows, "tile output");
    // A transposed output (N x M): boxes of the warpgroup's rows (output_rows elements, as bytes, in parts of 128) by
    // the chunk's columns times the value's lanes (hopper_staging.cuh, TransposedChunk).
    for (int j = 0; j < how.transposed; ++j) {
        const TileTensor& t = transposed[static_cast<std::size_t>(j)];
        const int lanes = values_per_pair(t.binding->width);
        const int element = static_cast<int>(size_of(t.binding->dtype));
        encode_bytes(maps[static_cast<std::size_t>(input_maps + how.outputs + j)], t,
                     static_cast<cuuint64_t>(plan.gemm.m) * static_cast<cuuint64_t>(element),
                     static_cast<cuuint64_t>(plan.gemm.n / 2) * static_cast<cuuint64_t>(lanes),
                     std::min(how.output_rows * element, 128), how.chunk_columns / 2 * lanes, "transposed output");
    }
    return maps;
}

TmaOperands encode_tma_operands(const GemmProblem& p, const GemmSpec& spec, const KernelInfo& info) {
    TmaOperands t;
    // A K-major is stored M x K; M-major is stored K x M. B K-major is stored N x K; N-major is stored K x N. A
    // K-major operand shared by a cluster comes in one box per CTA, of the tile's rows / CTAs sharing it.
    t.a = spec.a == Major::K ? encode("A", p.a, spec.input, p.m, p.k, p.lda, info.tile_m / info.cluster_n)
                             : encode("A", p.a, spec.input, p.k, p.m, p.lda, 64);
    t.b = spec.b == Major::K ? encode("B", p.b, spec.b_input(), p.n, p.k, p.ldb, info.tile_n / info.cluster_m)
                             : encode("B", p.b, spec.b_input(), p.k, p.n, p.ldb, 64);
    return t;
}

}  // namespace coda
