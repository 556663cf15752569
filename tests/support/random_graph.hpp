// Random VALID epilogue graphs for round-trip tests and for GPU-versus-CPU-reference tests. Values stay
// tame (bounded, no near-singular ops) so that fp32 kernels and an fp64 reference stay comparable.
#pragma once

#include <random>
#include <vector>

#include "coda/graph.hpp"

namespace coda::test {

struct RandomGraphOptions {
    int max_nodes = 24;  // at least 8
    // The domains random_graph(rng, options) picks from.
    std::vector<Domain> domains{Domain::Gemm, Domain::Tile, Domain::Finalize};
};

// A valid graph of `domain` with at most options.max_nodes nodes. Assumes inputs (tiles, vectors, scalars,
// partials) in [-4, 4] and indices below 4096; every intermediate then stays within about +-64, compares
// only read exact values (inputs, constants, indices), and log/sqrt/rsqrt/div see arguments >= 1. Over
// many seeds it covers every op allowed in the domain, every width, reduce op and sink dtype.
Graph random_graph(std::mt19937_64& rng, Domain domain, GemmSpec spec, const RandomGraphOptions& options = {});

// As above, with the domain drawn from options.domains and a random GemmSpec.
Graph random_graph(std::mt19937_64& rng, const RandomGraphOptions& options = {});

}  // namespace coda::test
