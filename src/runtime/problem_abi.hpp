// Host mirrors of the kernel parameter structs of templates/coda/epilogue_contract.cuh. The layouts must
// match field for field; the static_asserts catch drift on the host side.
#pragma once

#include <cstddef>
#include <cstdint>

namespace coda::abi {

struct GemmProblem {
    const void* a;
    const void* b;
    long long lda;
    long long ldb;
    int m;
    int n;
    int k;
    int flags;
};
constexpr int kGemmVectorA = 1;
constexpr int kGemmVectorB = 2;
static_assert(sizeof(GemmProblem) == 48 && offsetof(GemmProblem, m) == 32 && offsetof(GemmProblem, flags) == 44,
              "GemmProblem must mirror coda::GemmProblem in templates/coda/epilogue_contract.cuh");

struct TileProblem {
    int m;
    int n;
};
static_assert(sizeof(TileProblem) == 8, "TileProblem must mirror coda::TileProblem");

struct FinalizeProblem {
    int l;
    int t;
};
static_assert(sizeof(FinalizeProblem) == 8, "FinalizeProblem must mirror coda::FinalizeProblem");

}  // namespace coda::abi
