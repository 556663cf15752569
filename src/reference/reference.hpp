// The CPU reference interpreter: evaluates a checked graph in double precision over whole tensors, as the
// independent check of generated kernels. It shares nothing with codegen beyond the IR.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "coda/types.hpp"
#include "ir/checked_graph.hpp"

namespace coda {

struct HostTensor {
    DType dtype = DType::F32;
    std::vector<long long> shape;
    std::vector<double> values;  // row-major
};

struct ReferenceProblem {
    long long m = 0, n = 0, k = 0;             // finalize: m = L elements
    long long t = 0;                           // finalize: rows of every partials tensor
    const HostTensor* a = nullptr;             // logical A [M x K] (gemm only)
    const HostTensor* b = nullptr;             // logical B [K x N]
    std::map<std::string, HostTensor> inputs;  // every input binding, partials, accumulate's initial value, and a
                                               // block-scaled GEMM's scales (coda::block_scale_operands)
    std::map<std::string, double> scalars;
    int bm = 128, bn = 128;                    // the tile that cuts reduction partials
};

// Every sink by name: store -> the value (not rounded to the sink dtype), accumulate -> initial + value,
// reduce_row -> [ceil(N / bn) x M] partials, reduce_col -> [ceil(M / bm) x C] partials (C the operand's
// columns). Inputs are read as stored in their binding's dtype. Missing or misshapen inputs throw coda::Error.
std::map<std::string, HostTensor> run_reference(const CheckedGraph& g, const ReferenceProblem& p);

}  // namespace coda
