#!/usr/bin/env python3
"""The block-wise weight gradients' operands: x [T x F] bf16 to its transposed e4m3 copy [F x T] with one scale per
feature and 128 tokens. coda.torch.fp8.quantize_blockwise_t (one tile program reading x transposed) against torch's
transpose followed by quantize_blockwise (the two-pass form), torch's transpose alone, coda's quantize_blockwise of x
as it is stored (the forward's operand: one scale per token and 128 features), and a copy of x (the bandwidth floor), in
ABBA turns per shape. Prints each one's median ms and GB/s (bytes it must move: bf16 in, e4m3 out, f32 scales; the copy:
2 bytes in and out), the one-pass form's time over the two-pass one's, and each coda quantizer's bandwidth over the
copy's (1.0: at the floor).

Usage: python3 tools/bench_quantize_t.py [--shapes TxF ...] [--rounds 5] [--calls 20]"""
import argparse
import statistics

import torch

from coda.torch import fp8

# The d = 4096 layer's weight-gradient operands at 2 x 8192 tokens: x and dy of the four GEMMs (QKV's 12288-wide
# dz, the out-projection's 4096, gate/up's 28672 and down's 14336).
SHAPES = ("16384x4096", "16384x12288", "16384x28672", "16384x14336")


def ms_per_call(fn, calls):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / calls


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    print("| T x F | one pass ms | GB/s | transpose + quantize ms | transpose alone ms | quantize_blockwise ms | GB/s | "
          "copy ms | copy GB/s | one pass / two passes | one pass / copy bandwidth | quantize_blockwise / copy bandwidth |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for shape in args.shapes:
        t, f = (int(v) for v in shape.split("x"))
        x = torch.randn(t, f, device="cuda", dtype=torch.bfloat16)
        systems = {"one": lambda: fp8.quantize_blockwise_t(x),
                   "two": lambda: fp8.quantize_blockwise(x.t().contiguous()),
                   "transpose": lambda: x.t().contiguous(),
                   "rows": lambda: fp8.quantize_blockwise(x),
                   "copy": lambda: x.clone()}
        for fn in systems.values():  # compile and warm
            ms_per_call(fn, 3)
        times = {name: [] for name in systems}
        names = list(systems)
        for _ in range(args.rounds):
            for name in names + names[::-1]:
                times[name].append(ms_per_call(systems[name], args.calls))
        ms = {name: statistics.median(v) for name, v in times.items()}
        quantize_bytes = t * f * 3 + 4 * f * -(-t // 128)
        rows_bytes = t * f * 3 + 4 * t * -(-f // 128)
        copy_bytes = t * f * 4
        gbs = {"one": quantize_bytes / ms["one"] / 1e6, "rows": rows_bytes / ms["rows"] / 1e6,
               "copy": copy_bytes / ms["copy"] / 1e6}
        print(f"| {t} x {f} | {ms['one']:.4f} | {gbs['one']:.0f} | {ms['two']:.4f} | {ms['transpose']:.4f} | "
              f"{ms['rows']:.4f} | {gbs['rows']:.0f} | {ms['copy']:.4f} | {gbs['copy']:.0f} | "
              f"{ms['one'] / ms['two']:.3f} | {gbs['one'] / gbs['copy']:.3f} | {gbs['rows'] / gbs['copy']:.3f} |",
              flush=True)


if __name__ == "__main__":
    main()
