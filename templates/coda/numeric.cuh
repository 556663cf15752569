// Storage types (bf16, f16, and the FP8 e4m3 and e5m2; fp8_operands for a GEMM on two of these, block_scaled and
// promoted for its two ways of adding each 128-k block into fp32), vector loads and stores that widen to / narrow
// from float, and the activation functions of ops.def. Shared by every kernel template and by generated epilogues;
// NVRTC, no host headers.
//
// Contract:
//   - bf16 and f16 are storage only: all arithmetic happens in float (int for i32 tensors).
//   - load<V>(p, out) / store<V>(p, in), V in {1, 2, 4}: ONE aligned access of V * sizeof(element) bytes, so
//     p must be aligned to that size (codegen guarantees it: column pairs start at even element offsets and
//     the host checks leading dimensions and base pointers).
//   - load_shared<T, V>(address, out) reads the same layout from a 32-bit shared-memory address (tiles a
//     mainloop staged there).
//   - Global loads go through the read-only path (ld.global.nc): the compiler may then issue a tile's loads ahead of
//     earlier visits' stores instead of one load latency per visit. That is safe because within a kernel no
//     element is read after it is written: every visit reads its inputs before its stores, visits own disjoint
//     elements, and in-place updates (an output bound to the same tensor as an input) touch the same element
//     in the same visit. Partially overlapping inputs and outputs are unsupported (docs/GUIDE.md).
//   - Narrowing rounds to nearest even (PTX cvt.rn), keeps subnormals, infinities and NaN; to e4m3 and e5m2 it
//     saturates to the largest finite value instead of overflowing (satfinite), and needs sm_89 or newer.
//   - The activations use the accurate expf/erff/tanhf; on sm_90 sigmoid multiplies by rcp.approx of its
//     denominator, which is in [1, 2] (2 ulps in all there): results match a double reference to a few float ulps.
#pragma once

#include "coda/angle.cuh"

namespace coda {

struct bf16 {
    unsigned short bits;
};
struct f16 {
    unsigned short bits;
};
// The 8-bit floats of FP8 training, as GEMM operands (OCP FP8 E4M3 and E5M2).
struct e4m3 {
    unsigned char bits;
};
struct e5m2 {
    unsigned char bits;
};
// GEMM operands of two FP8 types, A's and B's (e5m2 gradients x e4m3 weights): the Hopper mainloop's element type,
// a byte like either, so that only its wgmma tells them apart (detail::Fp8Operands).
template <class A, class B>
struct fp8_operands {
    unsigned char bits;
};

// A mainloop's element type for block-scaled FP8 operands (GemmSpec::block_scales): the operands of T (e4m3, e5m2
// or fp8_operands), multiplied a 128-k block at a time and promoted with their block scales (detail::BlockScaled):
// B's one per 128 x 128 block, or with B_ROWS one per row of B and 128 k, as A's (GemmSpec::b_scales_1x128).
template <class T, bool B_ROWS = false>
struct block_scaled {
    unsigned char bits;
};

// A mainloop's element type for FP8 operands of T whose products are added into fp32 a 128-k block at a time with
// no scales (GemmSpec::accumulation = Promoted): the block-scaled loop with unit scales (detail::PromotesKBlocks).
template <class T>
struct promoted {
    unsigned char bits;
};

namespace detail {

// Whether A and B are the same type (NVRTC has no <type_traits>).
template <class A, class B>
struct SameType {
    static constexpr bool value = false;
};
template <class A>
struct SameType<A, A> {
    static constexpr bool value = true;
};

// The types of A and B under a mainloop's 8-bit element type T: T itself for both, or fp8_operands' two.
template <class T>
struct Fp8Operands {
    using A = T;
    using B = T;
};
template <class TA, class TB>
struct Fp8Operands<fp8_operands<TA, TB>> {
    using A = TA;
    using B = TB;
};
template <class T, bool B_ROWS>
struct Fp8Operands<block_scaled<T, B_ROWS>> : Fp8Operands<T> {};
template <class T>
struct Fp8Operands<promoted<T>> : Fp8Operands<T> {};

// Whether a mainloop's element type T carries block scales, and whether B's are per row (b_rows).
template <class T>
struct BlockScaled {
    static constexpr bool value = false;
    static constexpr bool b_rows = false;
};
template <class T, bool B_ROWS>
struct BlockScaled<block_scaled<T, B_ROWS>> {
    static constexpr bool value = true;
    static constexpr bool b_rows = B_ROWS;
};

// Whether a mainloop's element type T has each 128-k block's sum added into the fp32 accumulator on its own: with
// block scales (block_scaled) or without (promoted).
template <class T>
struct PromotesKBlocks {
    static constexpr bool value = BlockScaled<T>::value;
};
template <class T>
struct PromotesKBlocks<promoted<T>> {
    static constexpr bool value = true;
};

__device__ __forceinline__ float bf16_bits_to_float(unsigned short b) {
    return __uint_as_float(static_cast<unsigned>(b) << 16);
}

__device__ __forceinline__ float f16_bits_to_float(unsigned short b) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(b));
    return f;
}

__device__ __forceinline__ unsigned short float_to_bf16_bits(float x) {
    unsigned short b;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(x));
    return b;
}

__device__ __forceinline__ unsigned short float_to_f16_bits(float x) {
    unsigned short b;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(b) : "f"(x));
    return b;
}

// The x2 forms put their first source operand in the upper half: `lo` is the element at the lower address.
__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

__device__ __forceinline__ unsigned pack_f16x2(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

template <int V>
__device__ __forceinline__ void check_width() {
    static_assert(V == 1 || V == 2 || V == 4, "coda: vector width must be 1, 2 or 4");
}

// Where loads read. Global: the read-only path. Shared: a 32-bit shared-window address, read by volatile asm
// with a "memory" clobber so that it stays after earlier stores in program order; otherwise the compiler,
// seeing that shared reads cannot alias global stores, hoists a whole tile's reads and runs out of registers.
struct GlobalReader {
    const void* p;
    template <class W>
    __device__ __forceinline__ W get() const {
        return __ldg(reinterpret_cast<const W*>(p));
    }
};
struct SharedReader {
    unsigned a;
    template <class W>
    __device__ __forceinline__ W get() const {
        union {
            W w;
            unsigned char b;
            unsigned short h;
            unsigned u[4];
        } r;
        if constexpr (sizeof(W) == 1) {
            unsigned short h;
            asm volatile("ld.shared.u8 %0, [%1];" : "=h"(h) : "r"(a) : "memory");
            r.b = static_cast<unsigned char>(h);
        } else if constexpr (sizeof(W) == 2) {
            asm volatile("ld.shared.u16 %0, [%1];" : "=h"(r.h) : "r"(a) : "memory");
        } else if constexpr (sizeof(W) == 4) {
            asm volatile("ld.shared.u32 %0, [%1];" : "=r"(r.u[0]) : "r"(a) : "memory");
        } else if constexpr (sizeof(W) == 8) {
            asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(r.u[0]), "=r"(r.u[1]) : "r"(a) : "memory");
        } else {
            static_assert(sizeof(W) == 16, "coda: shared reads are 1, 2, 4, 8 or 16 bytes");
            asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(r.u[0]), "=r"(r.u[1]), "=r"(r.u[2]), "=r"(r.u[3])
                         : "r"(a)
                         : "memory");
        }
        return r.w;
    }
};

// Both 16-bit types share one access pattern; only the widening differs.
template <int V, class Reader, class Widen>
__device__ __forceinline__ void load16(Reader at, float (&out)[V], Widen widen) {
    check_width<V>();
    if constexpr (V == 1) {
        out[0] = widen(at.template get<unsigned short>());
    } else if constexpr (V == 2) {
        const unsigned w = at.template get<unsigned>();
        out[0] = widen(static_cast<unsigned short>(w & 0xffffu));
        out[1] = widen(static_cast<unsigned short>(w >> 16));
    } else {
        const uint2 w = at.template get<uint2>();
        out[0] = widen(static_cast<unsigned short>(w.x & 0xffffu));
        out[1] = widen(static_cast<unsigned short>(w.x >> 16));
        out[2] = widen(static_cast<unsigned short>(w.y & 0xffffu));
        out[3] = widen(static_cast<unsigned short>(w.y >> 16));
    }
}

template <int V, class Narrow, class Pack>
__device__ __forceinline__ void store16(unsigned short* p, const float (&in)[V], Narrow narrow, Pack pack) {
    check_width<V>();
    if constexpr (V == 1) {
        *p = narrow(in[0]);
    } else if constexpr (V == 2) {
        *reinterpret_cast<unsigned*>(p) = pack(in[0], in[1]);
    } else {
        *reinterpret_cast<uint2*>(p) = make_uint2(pack(in[0], in[1]), pack(in[2], in[3]));
    }
}

// float and int share one access pattern: the 32-bit vector types of the same width.
template <int V, class S, class S2, class S4, class Reader>
__device__ __forceinline__ void load32(Reader at, S (&out)[V]) {
    check_width<V>();
    if constexpr (V == 1) {
        out[0] = at.template get<S>();
    } else if constexpr (V == 2) {
        const S2 w = at.template get<S2>();
        out[0] = w.x;
        out[1] = w.y;
    } else {
        const S4 w = at.template get<S4>();
        out[0] = w.x;
        out[1] = w.y;
        out[2] = w.z;
        out[3] = w.w;
    }
}

template <int V, class S, class S2, class S4>
__device__ __forceinline__ void store32(S* p, const S (&in)[V]) {
    check_width<V>();
    if constexpr (V == 1) {
        *p = in[0];
    } else if constexpr (V == 2) {
        S2 w;
        w.x = in[0];
        w.y = in[1];
        *reinterpret_cast<S2*>(p) = w;
    } else {
        S4 w;
        w.x = in[0];
        w.y = in[1];
        w.z = in[2];
        w.w = in[3];
        *reinterpret_cast<S4*>(p) = w;
    }
}

struct WidenBf16 {
    __device__ float operator()(unsigned short b) const { return bf16_bits_to_float(b); }
};
struct WidenF16 {
    __device__ float operator()(unsigned short b) const { return f16_bits_to_float(b); }
};
struct NarrowBf16 {
    __device__ unsigned short operator()(float x) const { return float_to_bf16_bits(x); }
};
struct NarrowF16 {
    __device__ unsigned short operator()(float x) const { return float_to_f16_bits(x); }
};
struct PackBf16 {
    __device__ unsigned operator()(float lo, float hi) const { return pack_bf16x2(lo, hi); }
};
struct PackF16 {
    __device__ unsigned operator()(float lo, float hi) const { return pack_f16x2(lo, hi); }
};

// The conversions of a 16-bit storage type, for code templated on it (the shared-memory loads and stores).
template <class T>
struct Convert16;
template <>
struct Convert16<bf16> {
    using widen = WidenBf16;
    using narrow = NarrowBf16;
    using pack = PackBf16;
};
template <>
struct Convert16<f16> {
    using widen = WidenF16;
    using narrow = NarrowF16;
    using pack = PackF16;
};

// The FP8 types' conversions (PTX cvt, sm_89 and newer), two elements at a time, the lower column in the low byte:
// narrowing rounds to nearest even and saturates to the largest finite value (satfinite: what FP8 training casts
// do; NaN stays NaN); widening goes through f16, exactly.
template <class T>
struct Convert8;
template <>
struct Convert8<e4m3> {
    __device__ static unsigned short pack(float lo, float hi) {
        unsigned short d;
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
        return d;
    }
    __device__ static unsigned widen(unsigned short pair) {
        unsigned d;
        asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(d) : "h"(pair));
        return d;
    }
};
template <>
struct Convert8<e5m2> {
    __device__ static unsigned short pack(float lo, float hi) {
        unsigned short d;
        asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
        return d;
    }
    __device__ static unsigned widen(unsigned short pair) {
        unsigned d;
        asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(d) : "h"(pair));
        return d;
    }
};

// Two FP8 elements (the low byte first) as floats.
template <class T>
__device__ __forceinline__ void widen8_pair(unsigned short pair, float& lo, float& hi) {
    const unsigned h2 = Convert8<T>::widen(pair);
    lo = f16_bits_to_float(static_cast<unsigned short>(h2 & 0xffffu));
    hi = f16_bits_to_float(static_cast<unsigned short>(h2 >> 16));
}

// The 8-bit access pattern: one access of V bytes.
template <class T, int V, class Reader>
__device__ __forceinline__ void load8(Reader at, float (&out)[V]) {
    check_width<V>();
    float unused;
    if constexpr (V == 1) {
        widen8_pair<T>(at.template get<unsigned char>(), out[0], unused);
    } else if constexpr (V == 2) {
        widen8_pair<T>(at.template get<unsigned short>(), out[0], out[1]);
    } else {
        const unsigned w = at.template get<unsigned>();
        widen8_pair<T>(static_cast<unsigned short>(w & 0xffffu), out[0], out[1]);
        widen8_pair<T>(static_cast<unsigned short>(w >> 16), out[2], out[3]);
    }
}

// The bytes store8 writes, in the order of memory (at most 4).
template <class T, int V>
__device__ __forceinline__ unsigned pack8(const float (&in)[V]) {
    check_width<V>();
    if constexpr (V == 1)  // the high byte is 0.0f's: 0 (no mask, which cost an instruction a byte stored)
        return Convert8<T>::pack(in[0], 0.0f);
    else if constexpr (V == 2)
        return Convert8<T>::pack(in[0], in[1]);
    else
        return Convert8<T>::pack(in[0], in[1]) | static_cast<unsigned>(Convert8<T>::pack(in[2], in[3])) << 16;
}

template <class T, int V>
__device__ __forceinline__ void store8(unsigned char* p, const float (&in)[V]) {
    const unsigned w = pack8<T, V>(in);
    if constexpr (V == 1)
        *p = static_cast<unsigned char>(w);
    else if constexpr (V == 2)
        *reinterpret_cast<unsigned short*>(p) = static_cast<unsigned short>(w);
    else
        *reinterpret_cast<unsigned*>(p) = w;
}

}  // namespace detail

template <int V>
__device__ __forceinline__ void load(const e4m3* p, float (&out)[V]) {
    detail::load8<e4m3, V>(detail::GlobalReader{p}, out);
}
template <int V>
__device__ __forceinline__ void load(const e5m2* p, float (&out)[V]) {
    detail::load8<e5m2, V>(detail::GlobalReader{p}, out);
}
template <int V>
__device__ __forceinline__ void load(const bf16* p, float (&out)[V]) {
    detail::load16<V>(detail::GlobalReader{p}, out, detail::WidenBf16{});
}
template <int V>
__device__ __forceinline__ void load(const f16* p, float (&out)[V]) {
    detail::load16<V>(detail::GlobalReader{p}, out, detail::WidenF16{});
}
template <int V>
__device__ __forceinline__ void load(const float* p, float (&out)[V]) {
    detail::load32<V, float, float2, float4>(detail::GlobalReader{p}, out);
}
template <int V>
__device__ __forceinline__ void load(const int* p, int (&out)[V]) {
    detail::load32<V, int, int2, int4>(detail::GlobalReader{p}, out);
}

// T is the element type stored at the shared address: e4m3, e5m2, bf16, f16 or float (into float lanes), int (into
// int).
template <class T, int V>
__device__ __forceinline__ void load_shared(unsigned address, float (&out)[V]) {
    if constexpr (sizeof(T) == 1)
        detail::load8<T, V>(detail::SharedReader{address}, out);
    else if constexpr (sizeof(T) == 2)
        detail::load16<V>(detail::SharedReader{address}, out, typename detail::Convert16<T>::widen{});
    else
        detail::load32<V, float, float2, float4>(detail::SharedReader{address}, out);
}
template <class T, int V>
__device__ __forceinline__ void load_shared(unsigned address, int (&out)[V]) {
    detail::load32<V, int, int2, int4>(detail::SharedReader{address}, out);
}

template <int V>
__device__ __forceinline__ void store(e4m3* p, const float (&in)[V]) {
    detail::store8<e4m3, V>(reinterpret_cast<unsigned char*>(p), in);
}
template <int V>
__device__ __forceinline__ void store(e5m2* p, const float (&in)[V]) {
    detail::store8<e5m2, V>(reinterpret_cast<unsigned char*>(p), in);
}
template <int V>
__device__ __forceinline__ void store(bf16* p, const float (&in)[V]) {
    detail::store16<V>(reinterpret_cast<unsigned short*>(p), in, detail::NarrowBf16{}, detail::PackBf16{});
}
template <int V>
__device__ __forceinline__ void store(f16* p, const float (&in)[V]) {
    detail::store16<V>(reinterpret_cast<unsigned short*>(p), in, detail::NarrowF16{}, detail::PackF16{});
}
template <int V>
__device__ __forceinline__ void store(float* p, const float (&in)[V]) {
    detail::store32<V, float, float2, float4>(p, in);
}
template <int V>
__device__ __forceinline__ void store(int* p, const int (&in)[V]) {
    detail::store32<V, int, int2, int4>(p, in);
}

namespace detail {

// Shared-memory writes of raw words, volatile with a "memory" clobber (kept in program order, as the reads).
__device__ __forceinline__ void st_shared_u8(unsigned a, unsigned short x) {
    asm volatile("st.shared.u8 [%0], %1;" ::"r"(a), "h"(x) : "memory");
}
__device__ __forceinline__ void st_shared_u16(unsigned a, unsigned short x) {
    asm volatile("st.shared.u16 [%0], %1;" ::"r"(a), "h"(x) : "memory");
}
template <int kWords>
__device__ __forceinline__ void st_shared_words(unsigned a, const unsigned (&w)[kWords]) {
    if constexpr (kWords == 1)
        asm volatile("st.shared.u32 [%0], %1;" ::"r"(a), "r"(w[0]) : "memory");
    else if constexpr (kWords == 2)
        asm volatile("st.shared.v2.u32 [%0], {%1, %2};" ::"r"(a), "r"(w[0]), "r"(w[1]) : "memory");
    else
        asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(a), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                     : "memory");
}


}  // namespace detail

// store_shared<T, V>(address, in): store<V>'s bytes, written to a 32-bit shared-memory address (outputs a
// mainloop stages there before writing them out in wide, coalesced stores).
// A visit's two 16-bit elements (T = bf16 or f16) as one 32-bit register, the element at the lower column in the
// low half: the unit of an ldmatrix / stmatrix fragment.
template <class T>
__device__ __forceinline__ void unpack_pair(unsigned word, float (&out)[2]) {
    const typename detail::Convert16<T>::widen widen;
    out[0] = widen(static_cast<unsigned short>(word & 0xffffu));
    out[1] = widen(static_cast<unsigned short>(word >> 16));
}
template <class T>
__device__ __forceinline__ unsigned pack_pair(const float (&in)[2]) {
    return typename detail::Convert16<T>::pack{}(in[0], in[1]);
}

template <class T, int V>
__device__ __forceinline__ void store_shared(unsigned address, const float (&in)[V]) {
    detail::check_width<V>();
    if constexpr (sizeof(T) == 1) {
        const unsigned w = detail::pack8<T, V>(in);
        if constexpr (V == 1) {
            detail::st_shared_u8(address, static_cast<unsigned short>(w));
        } else if constexpr (V == 2) {
            detail::st_shared_u16(address, static_cast<unsigned short>(w));
        } else {
            const unsigned words[1] = {w};
            detail::st_shared_words(address, words);
        }
    } else if constexpr (sizeof(T) == 2) {
        const typename detail::Convert16<T>::narrow narrow;
        const typename detail::Convert16<T>::pack pack;
        if constexpr (V == 1) {
            detail::st_shared_u16(address, narrow(in[0]));
        } else if constexpr (V == 2) {
            const unsigned w[1] = {pack(in[0], in[1])};
            detail::st_shared_words(address, w);
        } else {
            const unsigned w[2] = {pack(in[0], in[1]), pack(in[2], in[3])};
            detail::st_shared_words(address, w);
        }
    } else {
        unsigned w[V];
#pragma unroll
        for (int v = 0; v < V; ++v) w[v] = __float_as_uint(in[v]);
        detail::st_shared_words(address, w);
    }
}
template <class T, int V>
__device__ __forceinline__ void store_shared(unsigned address, const int (&in)[V]) {
    detail::check_width<V>();
    unsigned w[V];
#pragma unroll
    for (int v = 0; v < V; ++v) w[v] = static_cast<unsigned>(in[v]);
    detail::st_shared_words(address, w);
}

__device__ __forceinline__ float round_to_bf16(float x) {
    return detail::bf16_bits_to_float(detail::float_to_bf16_bits(x));
}

__device__ __forceinline__ float round_to_f16(float x) {
    return detail::f16_bits_to_float(detail::float_to_f16_bits(x));
}

// 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below: the denominator stays in [1, 2], where the fast division
// (the numerator times rcp.approx, 2 ulps there) needs no special cases. The IEEE division took a slow-path call and
// a reconvergence barrier per element, in SwiGLU's forward and backward epilogues; __fdividef, the same product,
// adds a range check and two rescales for denominators it cannot have here. e^-|x| underflows gracefully, so sigmoid keeps its
// subnormal values far below 0; NaN stays NaN. About 4 ulps in all, with expf's 2. Before sm_90 the IEEE division
// stays: without its call, ptxas spilled the tile program swiglu_backward_tile on sm_80 (at the 64 registers it
// chose there, whatever the formulation).
__device__ __forceinline__ float sigmoid(float x) {
#if __CUDA_ARCH__ >= 900
    const float e = expf(-fabsf(x));
    float inv;  // rcp.approx: 1 ulp
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(inv) : "f"(1.0f + e));
    return (x >= 0.0f ? 1.0f : e) * inv;
#else
    return 1.0f / (1.0f + expf(-x));
#endif
}

__device__ __forceinline__ float silu(float x) {
    return x * sigmoid(x);
}

__device__ __forceinline__ float gelu_erf(float x) {
    constexpr float kInvSqrt2 = 0.70710678118654752f;
    return 0.5f * x * (1.0f + erff(x * kInvSqrt2));
}

__device__ __forceinline__ float gelu_tanh(float x) {
    constexpr float kSqrt2OverPi = 0.79788456080286536f;
    constexpr float kCubic = 0.044715f;
    return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kCubic * x * x * x)));
}

// sin and cos through the fp32 reduction of angle.cuh (no double precision, no local-memory slow path, which
// next to a large accumulator tile would cost a stack frame and register spills). Codegen lowers sin and cos of
// a `mul` node to the *_of_product forms, which see the exact product (RoPE's pos_i * theta_j); sin and cos of
// the same angle share their reduction and polynomials once the compiler has merged the common code.
__device__ __forceinline__ float sin(float x) { return sincos(x).sin; }
__device__ __forceinline__ float cos(float x) { return sincos(x).cos; }
__device__ __forceinline__ float sin_of_product(float a, float b) { return sincos_of_product(a, b).sin; }
__device__ __forceinline__ float cos_of_product(float a, float b) { return sincos_of_product(a, b).cos; }

// A hint: fetch the line holding p into L2 (callers pass addresses inside their tensors). Changes no value.
template <class T>
__device__ __forceinline__ void prefetch_l2(const T* p) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

}  // namespace coda
