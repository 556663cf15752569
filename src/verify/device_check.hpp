// Runs a compiled kernel on fresh random inputs and checks every output against the CPU reference in
// double precision: outputs are poisoned (NaN) first, so an element the kernel never wrote fails the check; bytes
// outside a tile tensor's logical extent (row padding, a guard region) must be left as they were.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "coda/runtime.hpp"

namespace coda::verify {

struct CheckProblem {
    std::int64_t m = 256;   // rows (finalize: vector length L)
    std::int64_t n = 256;   // full columns (ignored by finalize)
    std::int64_t k = 256;   // GEMM depth (gemm only)
    std::int64_t t = 3;     // partial rows a finalize combines
    int operand_pad = 0;    // extra elements on the leading dimension of A and B (0 keeps them tight)
    // Extra elements on the row pitch of every tile tensor (inputs, outputs, accumulates; rounded up to what one
    // access moves). The padding, and a guard region after each tile tensor, hold a sentinel that must survive the
    // launch: an output may be a view into a wider tensor, whose other columns are someone else's data.
    int tile_pad = 0;
    std::uint64_t seed = 1;
    // Inputs given by binding name (logical row-major values, representable in the binding's dtype) instead of
    // random ones: e.g. RoPE's positions up to 2^20 and a model's frequencies; a block-scaled GEMM's scales too
    // (coda::block_scale_operands; random ones are f32 spread over 2^-4 to 2^4 around an rms of 1); and a GEMM's
    // operands ("A", M x K, and "B", K x N, logical: e.g. values of one sign, whose sums grow with K).
    std::map<std::string, std::vector<double>> given;
    // Tighter tolerances for every non-integer output, where non-zero and below those of its dtype.
    double rel_tolerance = 0;
    double max_tolerance = 0;
    // How the kernel is launched: Kernel::launch; Kernel::bind then BoundLaunch::launch; or bound first to other
    // buffers of the same shapes (and other scalar values), every binding then rebound to the real ones.
    enum class Path { Launch, Bound, Rebound } path = Path::Launch;
};

struct OutputReport {
    std::string name;
    DType dtype = DType::F32;
    std::int64_t elements = 0;
    std::int64_t unwritten = 0;  // still poisoned where the reference has a finite value
    double rel_error = 0;        // ||out - ref|| / ||ref||
    double max_error = 0;        // max |out - ref| / (|ref| + rms(ref))
    double rel_tolerance = 0;
    double max_tolerance = 0;
    std::string digest;          // SHA-256 of the output's raw bytes: equal across runs of the same inputs
    bool pass = false;
};

struct CheckReport {
    std::string kernel;
    std::string problem;  // e.g. "M=1000 N=1000 K=1000"
    std::vector<OutputReport> outputs;
    // Tile tensors whose row padding or guard region (or, for inputs, any byte) the launch changed.
    std::vector<std::string> clobbered;
    bool pass = false;
    std::string summary() const;  // one line per output
};

// Needs a GPU (Runtime::compile gave the kernel).
CheckReport check_on_device(const Kernel& kernel, const CheckProblem& problem);

}  // namespace coda::verify
