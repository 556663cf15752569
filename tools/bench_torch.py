#!/usr/bin/env python3
"""Baselines for `coda bench gemm`, measured on the same GPU in the same device call: cuBLAS through
torch.matmul, and the unfused out-proj chain (matmul + residual add + RMSNorm statistics) in eager mode and
under torch.compile. Prints one line per measurement: `name M N K ms TFLOP/s` (TFLOP/s counts the GEMM's
2*M*N*K flops, also for the chains); --csv FILE also writes them as CSV rows `name,m,n,k,ms,tflops`.

--shapes one (default) times the --m/--n/--k shape; --shapes set, llama and all time the shape sets of
`coda bench gemm --shapes` (tools/gemm_shapes.py, equal to tools/coda/kernel_timing.cpp's lists); --shapes none
times no GEMM (with --copy: only the copy bandwidth that `coda bench tile` compares against).

--hold-ms MS runs each shape's torch.matmul alone for MS of GPU time after timing it, between
`HOLD cublas M N K start|stop UNIX_SECONDS` lines (as `coda bench gemm --hold-ms`; tools/bench_identity.sh).

--fp8 e4m3|e5m2 times torch._scaled_mm (cuBLASLt) instead, per-tensor scaled, both operands K-major, bf16 out, in
both accumulations: the rows `torch._scaled_mm fast-accum` (use_fast_accum=True: its accumulator never promoted, as in
coda's per-tensor mainloop; what `coda bench gemm --fp8` is compared with like for like, and what --hold-ms holds) and
`torch._scaled_mm precise-accum` (torch's default, promoted: more precise, slower); no chains."""
import argparse
import sys
import time

import torch

from fp8_baselines import FAST, scaled_mm_variants
from gemm_shapes import NAMES as SHAPE_SETS, shape_set


SETTLE_MS = 500.0  # as coda's kernel_timing.hpp kSettleMs


def settle(fn, ms=SETTLE_MS):
    """Runs fn back to back for `ms` of GPU time, as coda's benchmarks settle their kernels
    (tools/coda/kernel_timing.hpp, settle): under sustained load the GPU's clock settles where its power limit
    holds it, and a measurement right after idle, lighter or heavier work would time that history instead."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    elapsed, rounds = 0.0, 1
    while elapsed < ms:
        start.record()
        for _ in range(rounds):
            fn()
        stop.record()
        torch.cuda.synchronize()
        t = start.elapsed_time(stop)
        elapsed += t
        rounds = int(min(max(min(ms - elapsed, 100.0) / max(t / rounds, 1e-3), 1), 100000))


def median_ms(fn, iters=50):
    """Median GPU time of fn, timed as `coda bench` times its kernels (tools/coda/kernel_timing.cpp): after
    settling, calls back to back, an event between calls and one synchronize at the end, so that the host's launch
    cost is not in the time unless the host cannot keep ahead of the GPU."""
    settle(fn)
    events = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
    events[0].record()
    for i in range(iters):
        fn()
        events[i + 1].record()
    torch.cuda.synchronize()
    times = sorted(events[i].elapsed_time(events[i + 1]) for i in range(iters))
    return times[len(times) // 2]


def hold(fn, m, n, k, ms):
    """Runs fn alone, back to back, for `ms` of GPU time between two HOLD lines that tools/identity_table.py
    matches against nvidia-smi's samples of clock and power (as `coda bench gemm --hold-ms`). Both times are taken
    after a synchronize, so the interval holds fn's work and nothing else."""
    torch.cuda.synchronize()
    print(f"HOLD cublas {m} {n} {k} start {time.time():.3f}", flush=True)
    settle(fn, ms)
    torch.cuda.synchronize()
    print(f"HOLD cublas {m} {n} {k} stop {time.time():.3f}", flush=True)


def out_proj_chain(a, w, residual, gamma):
    x1 = a @ w.t() + residual
    h = x1 * gamma
    sumsq = x1.float().square().sum(dim=1)
    return x1, h, sumsq


class Report:
    """Prints each measurement and, with a CSV path, appends it there (flushed: a crash keeps earlier rows)."""

    def __init__(self, csv_path):
        self.csv = open(csv_path, "w") if csv_path else None
        if self.csv:
            self.csv.write("name,m,n,k,ms,tflops\n")

    def row(self, name, m, n, k, ms):
        tflops = 2.0 * m * n * k / ms / 1e9
        print(f"{name} {m} {n} {k} {ms:.4f} {tflops:.1f}", flush=True)
        if self.csv:
            self.csv.write(f"{name},{m},{n},{k},{ms:.5f},{tflops:.2f}\n")
            self.csv.flush()


# [use one dynamic-shape compile for every shape, the compiled function once made]
DYNAMIC_COMPILE = [False, None]


FP8_DTYPES = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}


def bench_scaled_mm(report, m, n, k, fp8, iters=50, hold_ms=0.0):
    """torch._scaled_mm with one fp32 scale per operand, in each accumulation (fast first): A (M x K) row-major, B
    given as the transpose of an N x K row-major tensor (the column-major B cuBLASLt's FP8 GEMM takes)."""
    torch.manual_seed(0)
    dtype = getattr(torch, FP8_DTYPES[fp8])
    a = torch.randn(m, k, device="cuda").to(dtype)
    w = torch.randn(n, k, device="cuda").to(dtype)
    one = torch.ones((), device="cuda", dtype=torch.float32)
    variants = scaled_mm_variants("torch._scaled_mm", a, w.t(), one, one)
    for name, fn in variants.items():
        report.row(name, m, n, k, median_ms(fn, iters=iters))
    if hold_ms > 0:  # the like-for-like one, whose clock and power tools/identity_table.py sets beside coda's
        hold(variants[f"torch._scaled_mm {FAST}"], m, n, k, hold_ms)


def bench_shape(report, m, n, k, chain, chain_iters, iters=50, hold_ms=0.0, fp8=None):
    if fp8:
        return bench_scaled_mm(report, m, n, k, fp8, iters, hold_ms)
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k**0.5
    report.row("torch.matmul", m, n, k, median_ms(lambda: a @ w.t(), iters=iters))
    if hold_ms > 0:
        hold(lambda: a @ w.t(), m, n, k, hold_ms)
    if not chain:
        return
    residual = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    gamma = torch.rand(n, device="cuda", dtype=torch.bfloat16) + 0.5
    report.row("eager_out_proj_chain", m, n, k,
               median_ms(lambda: out_proj_chain(a, w, residual, gamma), iters=chain_iters))
    if DYNAMIC_COMPILE[0]:
        # One compile with symbolic shapes, reused by every shape: a set costs one compile, not twelve.
        if DYNAMIC_COMPILE[1] is None:
            DYNAMIC_COMPILE[1] = torch.compile(out_proj_chain, dynamic=True)
        compiled = DYNAMIC_COMPILE[1]
    else:
        # A fresh compile per shape, specialized to it (dynamic=False: the fastest code torch.compile makes for
        # one shape). reset() drops the previous shapes' entries, which would otherwise count against dynamo's
        # recompile limit and, past it, silently fall back to eager.
        torch._dynamo.reset()
        compiled = torch.compile(out_proj_chain, dynamic=False)
    start = time.perf_counter()
    compiled(a, w, residual, gamma)
    torch.cuda.synchronize()
    print(f"  (torch.compile for {m}x{n}x{k}: {time.perf_counter() - start:.1f} s)", file=sys.stderr, flush=True)
    report.row("compiled_out_proj_chain", m, n, k,
               median_ms(lambda: compiled(a, w, residual, gamma), iters=chain_iters))


def copy_bandwidth(m, n):
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    t = median_ms(lambda: y.copy_(x))
    print(f"torch_copy {m} {n} {t:.4f} {2 * x.numel() * 2 / t / 1e6:.1f} GB/s")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", choices=["one", *SHAPE_SETS, "none"], default="one",
                        help="one: the --m/--n/--k shape; set, llama, all: coda bench gemm's shape sets (chains "
                             "included unless --no-chain); none: no GEMM")
    parser.add_argument("--m", type=int, default=4096)
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--k", type=int, default=4096)
    parser.add_argument("--chain", action="store_true", help="also time the unfused out-proj chain (--shapes one)")
    parser.add_argument("--no-chain", action="store_true",
                        help="torch.matmul only, also for a shape set (skips the chains and their torch.compile)")
    parser.add_argument("--iters", type=int, default=50, help="timed runs of torch.matmul (default 50)")
    parser.add_argument("--hold-ms", type=float, default=0.0, metavar="MS",
                        help="after timing each shape's torch.matmul, run it alone for MS of GPU time between "
                             "HOLD lines, for clock and power sampling (default 0: off)")
    parser.add_argument("--chain-iters", type=int,
                        help="timed runs of each chain; default 50 (as the matmul), 20 for a shape set, whose "
                             "largest chains are slow")
    parser.add_argument("--csv", help="also write the measurements to this CSV file")
    parser.add_argument("--copy", action="store_true", help="also time a device-to-device copy of a 16384 x 4096 bf16 tile")
    parser.add_argument("--fp8", choices=sorted(FP8_DTYPES),
                        help="time torch._scaled_mm per-tensor on FP8 operands of this type instead of torch.matmul, "
                             "with fast and with precise accumulation")
    parser.add_argument("--dynamic-compile", action="store_true",
                        help="torch.compile the chain once with dynamic shapes instead of once per shape")
    args = parser.parse_args()
    DYNAMIC_COMPILE[0] = args.dynamic_compile
    chain_iters = args.chain_iters if args.chain_iters is not None else (50 if args.shapes == "one" else 20)
    if chain_iters < 1:
        parser.error(f"--chain-iters must be at least 1, got {chain_iters}")
    if args.iters < 1:
        parser.error(f"--iters must be at least 1, got {args.iters}")
    if not 0 <= args.hold_ms <= 600000:  # as coda bench gemm: longer is a typo, not a measurement
        parser.error(f"--hold-ms must be in [0, 600000], got {args.hold_ms}")
    if args.fp8 and args.chain:
        parser.error("--fp8 times torch._scaled_mm alone: no --chain")
    report = Report(args.csv)
    if args.shapes == "one":
        bench_shape(report, args.m, args.n, args.k, args.chain and not args.no_chain, chain_iters, args.iters,
                    args.hold_ms, args.fp8)
    elif args.shapes != "none":
        for m, n, k in shape_set(args.shapes):
            bench_shape(report, m, n, k, not args.no_chain and not args.fp8, chain_iters, args.iters, args.hold_ms,
                        args.fp8)
            torch.cuda.empty_cache()
    if args.copy:
        copy_bandwidth(16384, 4096)


if __name__ == "__main__":
    main()
