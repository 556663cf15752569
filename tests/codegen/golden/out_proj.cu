// coda generated kernel
//   graph out_proj gemm in=bf16 a=k b=k
//   %acc = accumulator
//   %residual = tile_input bf16 full
//   %x1 = add %acc %residual
//   %gamma = col_input bf16 full
//   %h = mul %x1 %gamma
//   %x1_out = store bf16 %x1
//   %h_out = store bf16 %h
//   %x1_sumsq = reduce_row sumsq %x1
// hash: 826b28a1cdb8716c
// arch: sm_90a
// config: hopper bm=128 bn=128 bk=64 stages=6 pingpong cluster=1
// kernel: coda::hopper_gemm<coda::bf16, true, true, 128, 128, 6, true, coda_gen::Epilogue>
#include "coda/hopper_gemm.cuh"
#include "coda/numeric.cuh"
#include "coda/reduce.cuh"

namespace coda_gen {

// Parameter slots (64-bit words of coda::EpilogueArgs), in binding order:
//   slots 0-1  residual: input tile bf16 full (pointer, leading dimension in elements)
//   slot 2     gamma: input col bf16 full (pointer)
//   slots 3-4  x1_out: output tile bf16 full (pointer, leading dimension in elements)
//   slots 5-6  h_out: output tile bf16 full (pointer, leading dimension in elements)
//   slot 7     x1_sumsq: row partials f32 (pointer)
struct Epilogue {
    using Args = coda::EpilogueArgs<8>;

    template <class L>
    struct State {
        // %x1_sumsq = reduce_row sumsq %x1
        typename coda::Reducer<coda::RedOp::SumSq>::State r7[L::kRowSlots];
    };

    template <class L>
    static constexpr int scratch_floats() {
        int floats = 0;
        if (coda::row_scratch_floats<L>() > floats) floats = coda::row_scratch_floats<L>();
        return floats;
    }

    template <class L>
    __device__ static void begin_tile(State<L>& st) {
        #pragma unroll
        for (int i = 0; i < L::kRowSlots; ++i) st.r7[i] = coda::Reducer<coda::RedOp::SumSq>::init();
    }

    template <class L>
    __device__ static void prefetch(const Args& args, const coda::Coord& c) {
        const long long m = c.m;
        const int pair = c.n / 2;
        coda::prefetch_l2(reinterpret_cast<const coda::bf16*>(args.slot[0]) + m * static_cast<long long>(args.slot[1]) + pair * 2);
    }

    // Tile inputs, numbered as tiles.load() gets them: bytes per column pair, and where each lives.
    static constexpr int kTileInputs = 1;
    __host__ __device__ static constexpr int tile_input_pair_bytes(int i) { return i == 0 ? 4 : 0; }
    __host__ __device__ static constexpr int tile_input_element_bytes(int i) { return i == 0 ? 2 : 0; }
    __host__ __device__ static constexpr bool tile_input_transposed(int i) { return false; }
    __device__ static coda::TileView tile_input(const Args& args, int i) {
        if (i == 0) return {reinterpret_cast<unsigned char*>(args.slot[0]), static_cast<long long>(args.slot[1]) * 2};
        return {nullptr, 0};
    }

    // Tile outputs, numbered as tiles.store() gets them: bytes per column pair, and where each lives.
    static constexpr int kTileOutputs = 2;
    // Whether a visit reads and writes a tile tensor in global memory itself (an accumulate
    // sink), and how many row reductions it feeds.
    static constexpr bool kAccumulates = false;
    static constexpr int kRowReductions = 1;
    // store_transposed sinks: lanes of each one's value, bytes per element, where each lives.
    static constexpr int kTransposedStores = 0;
    __host__ __device__ static constexpr int transposed_output_lanes(int j) { return 0; }
    __host__ __device__ static constexpr int transposed_output_element_bytes(int j) { return 0; }
    __device__ static coda::TileView transposed_output(const Args& args, int j) {
        (void)args;
        (void)j;
        return {nullptr, 0};
    }
    __host__ __device__ static constexpr int tile_output_pair_bytes(int i) { return i == 0 ? 4 : i == 1 ? 4 : 0; }
    __host__ __device__ static constexpr int tile_output_element_bytes(int i) { return i == 0 ? 2 : i == 1 ? 2 : 0; }
    __device__ static coda::TileView tile_output(const Args& args, int i) {
        if (i == 0) return {reinterpret_cast<unsigned char*>(args.slot[3]), static_cast<long long>(args.slot[4]) * 2};
        if (i == 1) return {reinterpret_cast<unsigned char*>(args.slot[5]), static_cast<long long>(args.slot[6]) * 2};
        return {nullptr, 0};
    }

    // What the visits of one row share: row_values(), once per row slot where a mainloop keeps it.
    struct RowValues {
        int unused;  // nothing to share
    };

    __device__ static void row_values(const Args& args, const coda::Coord& c, RowValues& row) {
        (void)args;
        (void)c;
        (void)row;
    }

    // What the visits of one column pair share: col_values(), once per column slot where a mainloop keeps it.
    struct ColValues {
        float v3_gamma[2];
    };

    __device__ static void col_values(const Args& args, const coda::Coord& c, ColValues& col) {
        const int pair = c.n / 2;  // lane v of V lanes is element pair * V + v
        // %gamma = col_input bf16 full
        float v3_gamma[2];
        coda::load<2>(reinterpret_cast<const coda::bf16*>(args.slot[2]) + pair * 2, v3_gamma);
        #pragma unroll
        for (int v = 0; v < 2; ++v) col.v3_gamma[v] = v3_gamma[v];
    }

    // What a visit reads from tile inputs, loaded by load().
    struct Inputs {
        float v1_residual[2];
    };

    template <class L, class Tiles = coda::GlobalTiles>
    __device__ static void load(const Args& args, const coda::Coord& c, Inputs& in, const Tiles& tiles = Tiles()) {
        const long long m = c.m;  // 64-bit: m * leading dimension can pass 2^31
        const int pair = c.n / 2;  // lane v of V lanes is element pair * V + v
        tiles.template load<2>(0, reinterpret_cast<const coda::bf16*>(args.slot[0]) + m * static_cast<long long>(args.slot[1]) + pair * 2, c, in.v1_residual);
    }

    template <class L, class Tiles = coda::GlobalTiles>
    __device__ static void visit(const Args& args, State<L>& st, const coda::Coord& c, int row_slot,
                                 int col_slot, float acc0, float acc1, const RowValues& row,
                                 const ColValues& col, const Inputs& in, const Tiles& tiles = Tiles()) {
        (void)row;
        (void)col;
        (void)in;
        (void)tiles;
        const long long m = c.m;  // 64-bit: m * leading dimension can pass 2^31
        const int pair = c.n / 2;  // lane v of V lanes is element pair * V + v
        // %gamma = col_input bf16 full
        const float (&v3_gamma)[2] = col.v3_gamma;
        // %acc = accumulator
        float v0_acc[2] = {acc0, acc1};
        // %residual = tile_input bf16 full
        const float (&v1_residual)[2] = in.v1_residual;
        // %x1 = add %acc %residual
        float v2_x1[2];
        #pragma unroll
        for (int v = 0; v < 2; ++v) v2_x1[v] = (v0_acc[v] + v1_residual[v]);
        // %h = mul %x1 %gamma
        float v4_h[2];
        #pragma unroll
        for (int v = 0; v < 2; ++v) v4_h[v] = (v2_x1[v] * v3_gamma[v]);
        // %x1_out = store bf16 %x1
        tiles.template store<2>(0, reinterpret_cast<coda::bf16*>(args.slot[3]) + m * static_cast<long long>(args.slot[4]) + pair * 2, c, v2_x1);
        // %h_out = store bf16 %h
        tiles.template store<2>(1, reinterpret_cast<coda::bf16*>(args.slot[5]) + m * static_cast<long long>(args.slot[6]) + pair * 2, c, v4_h);
        // %x1_sumsq = reduce_row sumsq %x1
        #pragma unroll
        for (int v = 0; v < 2; ++v) coda::add_in_columns<Tiles, coda::RedOp::SumSq>(st.r7[row_slot], c, v2_x1[v]);
    }

    template <class L, class Tiles = coda::GlobalTiles>
    __device__ static void visit(const Args& args, State<L>& st, const coda::Coord& c, int row_slot,
                                 int col_slot, float acc0, float acc1, const Inputs& in,
                                 const Tiles& tiles = Tiles()) {
        RowValues row;
        row_values(args, c, row);
        ColValues col;
        col_values(args, c, col);
        visit<L>(args, st, c, row_slot, col_slot, acc0, acc1, row, col, in, tiles);
    }

    template <class L>
    __device__ static void visit(const Args& args, State<L>& st, const coda::Coord& c, int row_slot,
                                 int col_slot, float acc0, float acc1) {
        Inputs in;
        load<L>(args, c, in);
        visit<L>(args, st, c, row_slot, col_slot, acc0, acc1, in);
    }

    static constexpr int kGroupReductions = 0;

    template <class L>
    __device__ static void end_tile(const Args& args, State<L>& st, float* scratch,
                                    const coda::TileCoord& t) {
        coda::write_row_partials<L, coda::RedOp::SumSq>(st.r7, scratch, reinterpret_cast<float*>(args.slot[7]), t);
    }
};

using Traits = coda::HopperGemmTraits<coda::bf16, true, true, 128, 128, 6, true, 1, 1, coda_gen::Epilogue>;

}  // namespace coda_gen

// Read by the host after loading the module (templates/coda/kernel_abi.cuh).
extern "C" __constant__ coda::KernelInfo coda_kernel_info = coda_gen::Traits::info();
