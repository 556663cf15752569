// The sm_90a instructions the Hopper mainloop uses, one thin wrapper each: mbarriers, TMA (bulk tensor copies),
// wgmma and its shared-memory descriptors, register reallocation and named barriers. Compiles under NVRTC with
// no host headers. Semantics are the PTX ISA's; comments say only how coda uses them.
#pragma once

#include "coda/numeric.cuh"

namespace coda {

// A CUtensorMap as the kernel receives it: 128 opaque bytes, 64-byte aligned, passed as a __grid_constant__
// parameter so that TMA reads it from parameter space. The host fills it with cuTensorMapEncodeTiled.
struct alignas(64) TmaDescriptor {
    unsigned long long opaque[16];
};

namespace sm90 {

__device__ __forceinline__ unsigned smem_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// ---- mbarriers (64-bit, in shared memory) --------------------------------------------------------------
__device__ __forceinline__ void mbarrier_init(unsigned bar, unsigned arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(arrivals) : "memory");
}
// Makes the initialized barriers visible to the async proxy (TMA) and to other threads.
__device__ __forceinline__ void fence_barrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbarrier_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// One arrival that also tells the barrier how many bytes the TMA copies of this phase will deliver.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// Waits until the phase with parity `parity` has completed. A fresh barrier is in phase 0, so waiting for
// parity 1 returns at once: that is how producers treat never-used stages as free.
__device__ __forceinline__ void mbarrier_wait(unsigned bar, unsigned parity) {
    unsigned done = 0;
    do {
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    } while (!done);
}

// A 32-bit shared-memory load at a shared-window address (the block scales' slots, hopper_gemm.cuh).
__device__ __forceinline__ float load_shared_f32(unsigned address) {
    float v;
    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(address) : "memory");
    return v;
}

// Two consecutive f32 (8-byte aligned): a thread's two columns of B's per-column block scales.
__device__ __forceinline__ float2 load_shared_f32x2(unsigned address) {
    float2 v;
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(address) : "memory");
    return v;
}

// A 4-byte asynchronous copy from global to shared memory; with `valid` false nothing is read and the word is
// zeroed. cp_async_arrive: an arrival on the mbarrier once all of this thread's earlier cp.asyncs are done (.noinc:
// the barrier's count includes it).
__device__ __forceinline__ void cp_async_f32(unsigned dst, const float* src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_arrive(unsigned bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}

// ---- TMA ------------------------------------------------------------------------------------------------
__device__ __forceinline__ void prefetch_tma_descriptor(const TmaDescriptor* desc) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<unsigned long long>(desc)) : "memory");
}
// Copies the box at (c0 innermost, c1) of the tensor `desc` describes into shared memory at `dst`, completing
// `bytes` of transaction on `bar`. Elements outside the tensor arrive as zeros.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const TmaDescriptor* desc, unsigned bar, int c0, int c1) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(
            dst),
        "l"(reinterpret_cast<unsigned long long>(desc)), "r"(bar), "r"(c0), "r"(c1)
        : "memory");
}

// L2 prefetch of the box at (c0, c1) of the tensor `desc` describes: no shared memory, no completion.
__device__ __forceinline__ void tma_prefetch_2d(const TmaDescriptor* desc, int c0, int c1) {
    asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];" ::"l"(
                     reinterpret_cast<unsigned long long>(desc)),
                 "r"(c0), "r"(c1)
                 : "memory");
}

// The other direction: the box at (c0 innermost, c1) of the tensor `desc` describes, from shared memory at `src`.
// Parts of the box outside the tensor are not written. The copy joins this thread's open bulk group.
__device__ __forceinline__ void tma_store_2d(const TmaDescriptor* desc, unsigned src, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                     reinterpret_cast<unsigned long long>(desc)),
                 "r"(src), "r"(c0), "r"(c1)
                 : "memory");
}
// Closes this thread's bulk group: the stores issued since the last commit.
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Waits until at most kPending of this thread's bulk groups still read their shared memory (which may then be
// overwritten), or with kRead false, until at most kPending are still incomplete (their writes done).
template <int kPending, bool kRead>
__device__ __forceinline__ void bulk_wait() {
    if constexpr (kRead)
        asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
    else
        asm volatile("cp.async.bulk.wait_group %0;" ::"n"(kPending) : "memory");
}
// Orders this thread's earlier shared-memory writes before later async-proxy (TMA) reads of them.
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// The same copy multicast to every CTA of the cluster in `cta_mask`: each receives the box at `dst` in its own
// shared memory and a complete_tx on its own barrier at `bar` (the same offsets in every CTA).
__device__ __forceinline__ void tma_load_2d_multicast(unsigned dst, const TmaDescriptor* desc, unsigned bar, int c0,
                                                      int c1, unsigned short cta_mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%3, "
        "%4}], [%2], %5;" ::"r"(dst),
        "l"(reinterpret_cast<unsigned long long>(desc)), "r"(bar), "r"(c0), "r"(c1), "h"(cta_mask)
        : "memory");
}

// ---- fragments ------------------------------------------------------------------------------------------
// Stores four 8x8 matrices of 16-bit elements from the mma fragment layout (thread t holds row t / 4, elements
// 2 (t % 4) and 2 (t % 4) + 1 of each, one register per matrix): lanes 8k..8k+7 give the row addresses of
// matrix k (16 bytes each, 16-byte aligned). Warp-wide: every lane executes it.
__device__ __forceinline__ void stmatrix_x4(unsigned addr, const unsigned (&r)[4]) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r[0]), "r"(r[1]),
                 "r"(r[2]), "r"(r[3])
                 : "memory");
}

// ---- global memory between CTAs (stream-K's partial sums) ------------------------------------------------
// Through L2 only (.cg): another SM wrote or will read these, and this SM's L1 is not coherent with it.
__device__ __forceinline__ void store_global_cg(float* p, float x, float y, float z, float w) {
    asm volatile("st.global.cg.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(x), "f"(y), "f"(z), "f"(w) : "memory");
}
__device__ __forceinline__ float4 load_global_cg(const float* p) {
    float4 v;
    asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "l"(p)
                 : "memory");
    return v;
}
// A flag between CTAs: the release store publishes what the storing thread saw before it (after a barrier: its
// warpgroup's stores); the acquire load that sees it sees those.
__device__ __forceinline__ void store_release_gpu(unsigned* p, unsigned v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned load_acquire_gpu(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// ---- clusters -------------------------------------------------------------------------------------------
__device__ __forceinline__ int cluster_rank() {
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    return static_cast<int>(rank);
}
// Every thread of every CTA of the cluster: memory operations before it (barrier inits, remote arrivals) are
// visible to every thread of the cluster after it.
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}
// One arrival on the barrier at `bar` (a shared-window address) of CTA `rank` of the cluster (this one included).
// Release at CTA scope, the default: coda uses it to say "this CTA is done reading a stage", which needs no
// cluster-scope fence. (With .release.cluster, one such fence per stage made the mainloop 1.5-3x slower.)
__device__ __forceinline__ void mbarrier_arrive_cluster(unsigned bar, int rank) {
    asm volatile(
        "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}" ::"r"(bar),
        "r"(rank)
        : "memory");
}

// ---- register reallocation and named barriers ----------------------------------------------------------
template <int kRegisters>
__device__ __forceinline__ void release_registers() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void claim_registers() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegisters));
}
// bar.sync with an id other than 0 (which __syncthreads uses) over `threads` threads (a multiple of 32).
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// ---- wgmma ----------------------------------------------------------------------------------------------
// Shared-memory matrix descriptor for a tile written by TMA with 128-byte swizzling: start address, leading
// and stride byte offsets (all in 16-byte units) and the swizzle mode (1 = 128 bytes) in bits 62-63.
//   K-major operand (rows of 64 K-elements = 128 bytes): the stride offset is the step between 8-row groups
//   (1024 bytes); the leading offset is unused. MN-major operand (rows of 64 M/N-elements, one per k): the
//   leading offset steps between 64-element M/N chunks, the stride offset between groups of 8 k-rows.
// A mainloop keeps descriptors as halves: for one operand the high half (stride offset, swizzle) never changes,
// and a move inside shared memory only adds (in 16-byte units) to the start address in the low half, which
// cannot carry out of its 14 bits: shared memory ends below 2^18 bytes.
__device__ __forceinline__ unsigned smem_descriptor_low(unsigned address, unsigned leading_bytes) {
    return ((address & 0x3FFFF) >> 4) | (((leading_bytes & 0x3FFFF) >> 4) << 16);
}
constexpr unsigned smem_descriptor_high(unsigned stride_bytes) { return ((stride_bytes & 0x3FFFF) >> 4) | (1u << 30); }
__device__ __forceinline__ unsigned long long smem_descriptor_join(unsigned low, unsigned high) {
    return (static_cast<unsigned long long>(high) << 32) | low;
}
// Orders earlier register writes (zeroed accumulators, epilogue reads) before the next wgmma reads them.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Waits until at most kPending committed wgmma groups of this warpgroup are still running.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}
// Keeps the compiler from moving accumulator reads or writes across a wgmma boundary.
template <int N>
__device__ __forceinline__ void fence_registers(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// wgmma.mma_async spelled out per N: inline PTX needs every accumulator register as a literal operand.
// kTransA / kTransB: 0 for a K-major operand, 1 for an M/N-major one (the transpose wgmma does itself).
// D (64 x 256 fp32, 128 registers a thread) += A (64 x 16) * B (256 x 16), both from shared memory.
#define CODA_WGMMA_M64N256K16(TYPE)                                                            \
    asm volatile(                                                                              \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                          \
        "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " {"                        \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15," \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31," \
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47," \
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63," \
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79," \
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95," \
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111," \
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127" \
        "}, %128, %129, p, 1, 1, %131, %132;\n}\n" \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127]) \
        : "l"(a_desc), "l"(b_desc), "r"(1), "n"(kTransA), "n"(kTransB))

template <class T, int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], unsigned long long a_desc,
                                                unsigned long long b_desc) {
    if constexpr (detail::SameType<T, bf16>::value)
        CODA_WGMMA_M64N256K16("bf16");
    else
        CODA_WGMMA_M64N256K16("f16");
}
#undef CODA_WGMMA_M64N256K16

// D (64 x 128 fp32, 64 registers a thread) += A (64 x 16) * B (128 x 16), both from shared memory.
#define CODA_WGMMA_M64N128K16(TYPE)                                                            \
    asm volatile(                                                                              \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                          \
        "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " {"                        \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15," \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31," \
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47," \
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63" \
        "}, %64, %65, p, 1, 1, %67, %68;\n}\n" \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
        : "l"(a_desc), "l"(b_desc), "r"(1), "n"(kTransA), "n"(kTransB))

template <class T, int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], unsigned long long a_desc,
                                                unsigned long long b_desc) {
    if constexpr (detail::SameType<T, bf16>::value)
        CODA_WGMMA_M64N128K16("bf16");
    else
        CODA_WGMMA_M64N128K16("f16");
}
#undef CODA_WGMMA_M64N128K16

// The 8-bit forms (e4m3, e5m2): K = 32 a wgmma (the same 32 bytes of a K-major row as k16 of a 16-bit type). They
// take no transpose immediates: wgmma reads 8-bit A and B only K-major. A and B may differ in type (T =
// fp8_operands<A, B>): A_TYPE and B_TYPE spell each one. scale_d = 0 makes d = A * B, ignoring what d held (the
// first wgmma of a block-scaled k-block); 1 adds to it.
#define CODA_WGMMA_M64N256K32(A_TYPE, B_TYPE)                                                  \
    asm volatile(                                                                              \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                          \
        "wgmma.mma_async.sync.aligned.m64n256k32.f32." A_TYPE "." B_TYPE " {"                    \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15," \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31," \
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47," \
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63," \
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79," \
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95," \
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111," \
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127" \
        "}, %128, %129, p, 1, 1;\n}\n" \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127]) \
        : "l"(a_desc), "l"(b_desc), "r"(scale_d))

template <class T>
__device__ __forceinline__ void wgmma_m64n256k32(float (&d)[128], unsigned long long a_desc, unsigned long long b_desc,
                                                 int scale_d = 1) {
    constexpr bool kAE4M3 = detail::SameType<typename detail::Fp8Operands<T>::A, e4m3>::value;
    constexpr bool kBE4M3 = detail::SameType<typename detail::Fp8Operands<T>::B, e4m3>::value;
    if constexpr (kAE4M3 && kBE4M3)
        CODA_WGMMA_M64N256K32("e4m3", "e4m3");
    else if constexpr (kAE4M3)
        CODA_WGMMA_M64N256K32("e4m3", "e5m2");
    else if constexpr (kBE4M3)
        CODA_WGMMA_M64N256K32("e5m2", "e4m3");
    else
        CODA_WGMMA_M64N256K32("e5m2", "e5m2");
}
#undef CODA_WGMMA_M64N256K32

#define CODA_WGMMA_M64N128K32(A_TYPE, B_TYPE)                                                  \
    asm volatile(                                                                              \
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                          \
        "wgmma.mma_async.sync.aligned.m64n128k32.f32." A_TYPE "." B_TYPE " {"                    \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15," \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31," \
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47," \
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63" \
        "}, %64, %65, p, 1, 1;\n}\n" \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
        : "l"(a_desc), "l"(b_desc), "r"(scale_d))

template <class T>
__device__ __forceinline__ void wgmma_m64n128k32(float (&d)[64], unsigned long long a_desc, unsigned long long b_desc,
                                                 int scale_d = 1) {
    constexpr bool kAE4M3 = detail::SameType<typename detail::Fp8Operands<T>::A, e4m3>::value;
    constexpr bool kBE4M3 = detail::SameType<typename detail::Fp8Operands<T>::B, e4m3>::value;
    if constexpr (kAE4M3 && kBE4M3)
        CODA_WGMMA_M64N128K32("e4m3", "e4m3");
    else if constexpr (kAE4M3)
        CODA_WGMMA_M64N128K32("e4m3", "e5m2");
    else if constexpr (kBE4M3)
        CODA_WGMMA_M64N128K32("e5m2", "e4m3");
    else
        CODA_WGMMA_M64N128K32("e5m2", "e5m2");
}
#undef CODA_WGMMA_M64N128K32

}  // namespace sm90
}  // namespace coda
