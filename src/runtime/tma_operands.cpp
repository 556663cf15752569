// cuTensorMapEncodeTiled for A and B. The box shapes must match what hopper_gemm.cuh's producer copies and
// what its expect_tx counts: K-major operands come as one box of 64 x (BM or BN) per stage, M/N-major ones as
// 64 x 64 boxes side by side.
#include "runtime/tma_operands.hpp"

#include <fmt/format.h>

#include "coda/error.hpp"
#include "driver/cuda_driver.hpp"

namespace coda {
namespace {

constexpr cuuint32_t kSwizzleElements = 64;  // 128 bytes of a 16-bit type: one swizzle row

// A row-major matrix of `rows` x `cols` stored with leading dimension `ld`, cut into boxes of
// kSwizzleElements columns x box_rows rows.
CUtensorMap encode(const char* operand, const void* base, DType dtype, long long rows, long long cols, long long ld,
                   int box_rows) {
    CUtensorMap map{};
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * 2};
    const cuuint32_t box[2] = {kSwizzleElements, static_cast<cuuint32_t>(box_rows)};
    const cuuint32_t element_strides[2] = {1, 1};
    Driver& d = Driver::instance();
    const CUresult r = d.api().cuTensorMapEncodeTiled(
        &map, dtype == DType::BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
        const_cast<void*>(base), dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        d.check(r, "cuTensorMapEncodeTiled",
                fmt::format("operand {}: {} x {} stored with leading dimension {}, box {} x {}", operand, rows, cols, ld,
                            box_rows, kSwizzleElements));
    return map;
}

}  // namespace

TmaOperands encode_tma_operands(const abi::GemmProblem& p, const GemmSpec& spec, TileShape tile) {
    TmaOperands t;
    // A K-major is stored M x K; M-major is stored K x M. B K-major is stored N x K; N-major is stored K x N.
    t.a = spec.a == Major::K ? encode("A", p.a, spec.input, p.m, p.k, p.lda, tile.bm)
                             : encode("A", p.a, spec.input, p.k, p.m, p.lda, 64);
    t.b = spec.b == Major::K ? encode("B", p.b, spec.input, p.n, p.k, p.ldb, tile.bn)
                             : encode("B", p.b, spec.input, p.k, p.n, p.ldb, 64);
    return t;
}

}  // namespace coda
