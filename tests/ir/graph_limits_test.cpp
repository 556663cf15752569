// The size limits of validation (coda/limits.hpp): graphs of the sizes that broke NVRTC (2100 stores, a
// 10,000-node chain, too many tile tensors for the parameter space) are rejected in milliseconds with messages
// that name the limit and the graph's value; graphs right at each limit pass.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "coda/error.hpp"
#include "coda/limits.hpp"
#include "coda/validate.hpp"

using namespace coda;
using Catch::Matchers::Contains;

namespace {

// check(g)'s message ("" if it passed), and how long check took.
std::string check_error(const Graph& g, double* seconds = nullptr) {
    const auto start = std::chrono::steady_clock::now();
    std::string message;
    try {
        check(g);
    } catch (const Error& e) {
        message = e.what();
    }
    if (seconds) *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return message;
}

// acc, a residual tile, then adds until the graph has `nodes` nodes with its store.
Graph add_chain(int nodes) {
    Graph g = Graph::gemm("chain");
    Value x = g.accumulator();
    Value residual = g.tile_input("residual", DType::BF16);
    for (int i = 0; i < nodes - 3; ++i) x = x + residual;
    g.store(x, "out", DType::BF16);
    return g;
}

// The accumulator times a column vector, stored `stores` times: 1 + 2 * stores parameter slots.
Graph stores_of_one_value(int stores) {
    Graph g = Graph::gemm("stores");
    Value acc = g.accumulator();
    Value gamma = g.col_input("gamma", DType::BF16);
    Value x = acc * gamma;
    for (int i = 0; i < stores; ++i) g.store(x, "out" + std::to_string(i), DType::BF16);
    return g;
}

}  // namespace

TEST_CASE("limits: the fixed part of the kernel parameters is the Hopper GEMM kernel's worst case", "[ir]") {
    // 64-byte GemmProblem, up to 56 bytes of padding to the 64-byte aligned tensor maps, 2 + 16 maps of 128 bytes.
    STATIC_REQUIRE(limits::kKernelFixedParamBytes == 2424);
    STATIC_REQUIRE(limits::kKernelFixedParamBytes < limits::kMaxKernelParamBytes);
}

TEST_CASE("limits: 2100 stores are rejected at once, naming the binding and node limits", "[ir]") {
    Graph g = Graph::gemm("many_stores");
    Value acc = g.accumulator();
    for (int i = 0; i < 2100; ++i) g.store(acc, "out" + std::to_string(i), DType::BF16);
    double seconds = 0;
    const std::string message = check_error(g, &seconds);
    CHECK(seconds < 1.0);
    CHECK_THAT(message, Contains("graph 'many_stores': 2100 inputs and outputs (bound at launch), more "
                                 "than coda::limits::kMaxBindings = " + std::to_string(limits::kMaxBindings)));
    CHECK_THAT(message, Contains("graph 'many_stores': 2101 nodes, more than coda::limits::kMaxNodes = " +
                                 std::to_string(limits::kMaxNodes)));
}

TEST_CASE("limits: a chain of 10,000 nodes is rejected at once, naming the node limit", "[ir]") {
    double seconds = 0;
    const std::string message = check_error(add_chain(10000), &seconds);
    CHECK(seconds < 1.0);
    CHECK(message == "graph 'chain': 10000 nodes, more than coda::limits::kMaxNodes = " + std::to_string(limits::kMaxNodes) +
                         ": NVRTC would take minutes to compile the kernel; split the work into several graphs");
}

TEST_CASE("limits: too many tile tensors overflow the kernel parameters", "[ir]") {
    // 105 stores and the column vector: 211 slots, 2424 + 8 * 211 = 4112 bytes.
    CHECK_THAT(check_error(stores_of_one_value(105)),
               Contains("graph 'stores': the kernel's parameters would take 4112 bytes (2424 for the GEMM problem and "
                        "tensor maps, 8 for each of 211 parameter slots") &&
                   Contains("more than coda::limits::kMaxKernelParamBytes = 4096"));
    // Other problems are still reported with it.
    Graph g = stores_of_one_value(105);
    g.scalar("unused");
    CHECK(find_problems(g).size() == 2);
}

TEST_CASE("limits: graphs right at each limit pass", "[ir]") {
    CHECK(check_error(add_chain(limits::kMaxNodes)).empty());
    CHECK_THAT(check_error(add_chain(limits::kMaxNodes + 1)), Contains(std::to_string(limits::kMaxNodes + 1) + " nodes"));

    // 104 stores and the column vector: 209 slots, exactly 4096 bytes.
    STATIC_REQUIRE(limits::kKernelFixedParamBytes + 209 * limits::kKernelParamSlotBytes == limits::kMaxKernelParamBytes);
    CHECK(check_error(stores_of_one_value(104)).empty());

    // A tile input and `count` row reductions of it: count + 1 bindings in count + 1 nodes.
    const auto reductions = [](int count) {
        Graph g = Graph::tile("reductions");
        Value x = g.tile_input("x", DType::BF16);
        for (int i = 0; i < count; ++i) g.reduce_row(x, ReduceOp::Sum, "r" + std::to_string(i));
        return g;
    };
    CHECK(check_error(reductions(limits::kMaxBindings - 1)).empty());
    CHECK_THAT(check_error(reductions(limits::kMaxBindings)),
               Contains(std::to_string(limits::kMaxBindings + 1) + " inputs and outputs"));
}
