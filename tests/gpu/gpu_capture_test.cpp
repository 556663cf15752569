// GPU checks of what a CUDA-graph capture needs: scalars read from device memory when the kernel runs (no host sync
// to bind a value computed on the GPU), and stream-K launches captured on a stream that has no workspace yet. And what
// PyTorch's autograd needs: a launch from a thread that has no current CUDA context yet.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "coda/error.hpp"
#include "coda/hopper_rules.cuh"
#include "coda/runtime.hpp"
#include "driver/cuda_driver.hpp"
#include "gpu/gpu_support.hpp"
#include "mainloop/stream_k_workspace.hpp"

using namespace coda;
using namespace coda::test;

namespace {

template <class T>
std::vector<T> read_back(const DeviceBuffer& buffer) {
    std::vector<T> out(buffer.bytes() / sizeof(T));
    Driver::instance().copy_to_host(out.data(), buffer.ptr(), buffer.bytes());
    return out;
}

template <class T>
void write(const DeviceBuffer& buffer, const std::vector<T>& values) {
    Driver::instance().copy_to_device(buffer.ptr(), values.data(), values.size() * sizeof(T));
}

// Fills with 0xff bytes (NaN in f32 and bf16), done before work on any stream starts.
void poison(const DeviceBuffer& buffer) {
    Driver::instance().memset8(buffer.ptr(), 0xff, buffer.bytes());
    Driver::instance().synchronize();
}

// How many elements differ (bitwise), so a failure prints a count rather than millions of values.
template <class T>
std::size_t mismatches(const std::vector<T>& a, const std::vector<T>& b) {
    if (a.size() != b.size()) return std::max(a.size(), b.size());
    std::size_t count = 0;
    for (std::size_t i = 0; i < a.size(); ++i) count += std::memcmp(&a[i], &b[i], sizeof(T)) != 0;
    return count;
}

const void* at(const DeviceBuffer& buffer) { return reinterpret_cast<const void*>(buffer.ptr()); }
const float* f32_at(const DeviceBuffer& buffer) { return reinterpret_cast<const float*>(buffer.ptr()); }

// Random f32 values in [-4, 4].
std::vector<float> random_f32(std::size_t count, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
    std::vector<float> out(count);
    for (float& v : out) v = uniform(rng);
    return out;
}

// Random bf16 bits of values in [-1, 1].
std::vector<std::uint16_t> random_bf16(std::size_t count, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<std::uint16_t> out(count);
    for (std::uint16_t& v : out) {
        const float x = uniform(rng);
        std::uint32_t bits = 0;
        std::memcpy(&bits, &x, sizeof bits);
        v = static_cast<std::uint16_t>(bits >> 16);
    }
    return out;
}

// A stream of its own for the test, destroyed at the end.
struct Stream {
    CUstream handle = nullptr;
    Stream() {
        Driver& d = Driver::instance();
        d.ensure_context();
        d.check(d.api().cuStreamCreate(&handle, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    }
    ~Stream() { Driver::instance().api().cuStreamDestroy(handle); }
    void synchronize() const {
        Driver& d = Driver::instance();
        d.check(d.api().cuStreamSynchronize(handle), "cuStreamSynchronize");
    }
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
};

// What `launch` issues on `stream`, captured in global mode (as torch.cuda.graph does) and instantiated.
template <class Launch>
CUgraphExec capture(const Stream& stream, Launch&& launch) {
    Driver& d = Driver::instance();
    const DriverApi& api = d.api();
    d.check(api.cuStreamBeginCapture(stream.handle, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
    launch();
    CUgraph graph = nullptr;
    d.check(api.cuStreamEndCapture(stream.handle, &graph), "cuStreamEndCapture");
    CUgraphExec exec = nullptr;
    d.check(api.cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate");
    d.check(api.cuGraphDestroy(graph), "cuGraphDestroy");
    return exec;
}

}  // namespace

TEST_CASE("a scalar bound to device memory gives the bytes a host value gives, read when the kernel runs",
          "[gpu][capture]") {
    Graph g = Graph::tile("scale_shift");
    const Value x = g.tile_input("x", DType::F32);
    g.store(x * g.scalar("alpha") + g.scalar("beta"), "y", DType::F32);
    const Kernel k = Runtime::instance().compile(g);
    constexpr std::int64_t M = 70, N = 96;
    const std::vector<float> host_x = random_f32(M * N, 7);
    DeviceBuffer xs(M * N * sizeof(float)), ys(M * N * sizeof(float)), scalar(sizeof(float));
    write(xs, host_x);
    const auto run = [&](const Args& scalars) {
        Args args = scalars;
        args.bind("x", matrix(at(xs), DType::F32, M, N)).bind("y", matrix(at(ys), DType::F32, M, N));
        poison(ys);
        k.launch(args);
        Driver::instance().synchronize();
        return read_back<float>(ys);
    };
    Args by_value;
    by_value.bind("alpha", 1.75f).bind("beta", -0.25f);
    const std::vector<float> expected = run(by_value);
    CHECK(expected[5] == Approx(host_x[5] * 1.75f - 0.25f));

    write(scalar, std::vector<float>{1.75f});
    Args on_device;
    on_device.bind("alpha", device_scalar(f32_at(scalar))).bind("beta", -0.25f);
    CHECK(mismatches(run(on_device), expected) == 0);

    // A bound launch reads the value each time it runs: a new value needs no rebind.
    Args args = on_device;
    args.bind("x", matrix(at(xs), DType::F32, M, N)).bind("y", matrix(at(ys), DType::F32, M, N));
    BoundLaunch bound = k.bind(args);
    write(scalar, std::vector<float>{-3.0f});
    bound.launch();
    Driver::instance().synchronize();
    by_value.bind("alpha", -3.0f);
    const std::vector<float> negated = run(by_value);
    CHECK(mismatches(read_back<float>(ys), negated) == 0);

    // Rebinding a value to device memory, and back.
    bound.rebind("alpha", 0.5f).rebind("beta", device_scalar(f32_at(scalar)));
    bound.launch();
    Driver::instance().synchronize();
    by_value.bind("alpha", 0.5f).bind("beta", -3.0f);
    const std::vector<float> rebound = read_back<float>(ys);
    CHECK(mismatches(rebound, run(by_value)) == 0);
    CHECK_THROWS_WITH(bound.rebind("beta", device_scalar(nullptr)),
                      Catch::Contains("argument 'beta'") && Catch::Contains("null pointer"));
}

TEST_CASE("a stream-K launch captured into a CUDA graph on a fresh stream replays the eager launch's bytes",
          "[gpu][capture]") {
    // Forced stream-K, on a config that shares tiles; the first sharing launch on the captured stream allocates
    // its workspace during the capture (src/mainloop/stream_k_workspace.cpp).
    std::optional<KernelConfig> sharing;
    for (const KernelConfig& config : gemm_configs_under_test()) {
        const HopperConfig* h = config.hopper();
        if (h != nullptr &&
            hopper_rules::stream_k(h->cluster_m, h->cluster_n, h->bm, h->schedule == Schedule::PingPong)) {
            sharing = config;
            break;
        }
    }
    if (skip_unless(sharing.has_value(), "no config under test shares tiles: stream-K needs an sm_90a device")) return;
    set_stream_k_override(StreamK::Always);
    struct Restore {
        ~Restore() { set_stream_k_override(std::nullopt); }
    } restore;

    Graph g = Graph::gemm("plain");
    g.store(g.accumulator(), "D", DType::BF16);
    const Kernel k = Runtime::instance().compile(g, options_for(*sharing));
    INFO("config: " << sharing->to_text());
    // 4731 x 1000 is 37 x 8 tiles of 128 x 128: not a whole number of rounds on 132 SMs; K = 520 is 9 k-tiles.
    constexpr std::int64_t M = 4731, N = 1000, K = 520;
    DeviceBuffer a(M * K * 2), b(K * N * 2), d(M * N * 2);
    write(a, random_bf16(M * K, 11));
    write(b, random_bf16(K * N, 12));
    Args args;
    args.bind("A", matrix(at(a), DType::BF16, M, K)).bind("B", matrix_col_major(at(b), DType::BF16, K, N));
    args.bind("D", matrix(at(d), DType::BF16, M, N));
    Driver& driver = Driver::instance();

    // Eager, on a stream of its own (this also loads the kernel before any capture).
    const Stream eager;
    poison(d);
    k.launch(args, eager.handle);
    eager.synchronize();
    const std::vector<std::uint16_t> expected = read_back<std::uint16_t>(d);
    // The same bytes again eagerly on that stream: stream-K results do not depend on the run.
    poison(d);
    k.launch(args, eager.handle);
    eager.synchronize();
    CHECK(mismatches(read_back<std::uint16_t>(d), expected) == 0);

    const Stream fresh;
    const CUgraphExec exec = capture(fresh, [&] { k.launch(args, fresh.handle); });
    for (int replay = 0; replay < 2; ++replay) {
        INFO("replay " << replay);
        poison(d);
        driver.check(driver.api().cuGraphLaunch(exec, fresh.handle), "cuGraphLaunch");
        fresh.synchronize();
        CHECK(mismatches(read_back<std::uint16_t>(d), expected) == 0);
    }
    driver.check(driver.api().cuGraphExecDestroy(exec), "cuGraphExecDestroy");

    // An eager launch on the captured stream finds the buffer allocated during the capture and zeroes its flags.
    poison(d);
    k.launch(args, fresh.handle);
    fresh.synchronize();
    CHECK(mismatches(read_back<std::uint16_t>(d), expected) == 0);
}

TEST_CASE("a launch from a thread with no current CUDA context runs in the primary context compile bound", "[gpu]") {
    // PyTorch's autograd worker thread has no current context until its first CUDA runtime call; a backward pass
    // whose first kernel is coda's launches from there.
    Graph g = Graph::tile("shift_on_thread");
    g.store(g.tile_input("x", DType::F32) + g.constant(1.0f), "y", DType::F32);
    const Kernel k = Runtime::instance().compile(g);
    constexpr std::int64_t M = 33, N = 64;
    const std::vector<float> host_x = random_f32(M * N, 11);
    DeviceBuffer xs(M * N * sizeof(float)), ys(M * N * sizeof(float));
    write(xs, host_x);
    poison(ys);
    Args args;
    args.bind("x", matrix(at(xs), DType::F32, M, N)).bind("y", matrix(at(ys), DType::F32, M, N));
    bool no_context_before = false;
    std::string error;
    std::thread worker([&] {
        CUcontext current = nullptr;
        Driver::instance().check(Driver::instance().api().cuCtxGetCurrent(&current), "cuCtxGetCurrent");
        no_context_before = current == nullptr;
        try {
            k.launch(args);
            Driver::instance().synchronize();
        } catch (const Error& e) {
            error = e.what();
        }
    });
    worker.join();
    CHECK(no_context_before);
    REQUIRE(error.empty());
    const std::vector<float> y = read_back<float>(ys);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < y.size(); ++i) wrong += y[i] != host_x[i] + 1.0f;
    CHECK(wrong == 0);
}
