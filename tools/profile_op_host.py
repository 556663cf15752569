#!/usr/bin/env python3
"""Where a coda.torch op's host time goes, at a shape too small for the GPU to matter: per-call wall time of
torch.ops.coda.scaled_mm (per tensor, e4m3) through PyTorch's dispatcher, of coda.torch.scaled_mm (which skips it in
eager mode), of the op's own Python body called directly, of coda's launch alone (the compiled kernel, its bindings
ready), and of torch._scaled_mm beside them; then a cProfile of the op's calls, its top entries by own time. Needs a
CUDA GPU with FP8 (sm_89+).

Usage: python3 tools/profile_op_host.py [--size 256] [--calls 2000] [--top 25]
"""
import argparse
import cProfile
import pstats
import time

import torch

import coda.torch  # noqa: F401  (registers torch.ops.coda)
from coda.torch import _kernels, ops_fp8


def per_call_us(fn, calls: int) -> float:
    """Median over 5 rounds of the wall time per call of `calls` calls, the queue drained before and after."""
    rounds = []
    for _ in range(5):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        rounds.append((time.perf_counter() - start) / calls * 1e6)
    return sorted(rounds)[2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=256, help="M = N = K")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    s = args.size
    a = torch.randn(s, s, device="cuda").to(torch.float8_e4m3fn)
    w = torch.randn(s, s, device="cuda").to(torch.float8_e4m3fn)
    sa, sb = torch.tensor(0.5, device="cuda"), torch.tensor(2.0, device="cuda")
    out = torch.empty(s, s, dtype=torch.bfloat16, device="cuda")
    kern = _kernels.kernel(_kernels.scaled_mm_name("tensorwise", "e4m3", "e4m3"), s, s, s)
    bindings = {"A": a, "B": w.t(), "scale_a": sa, "scale_b": sb, "D": out}
    calls = {
        "torch.ops.coda.scaled_mm (dispatcher)": lambda: torch.ops.coda.scaled_mm(a, w.t(), sa, sb),
        "coda.torch.scaled_mm (eager: no dispatcher)": lambda: coda.torch.scaled_mm(a, w.t(), sa, sb),
        "the op's Python body alone": lambda: ops_fp8.scaled_mm_op._init_fn(a, w.t(), sa, sb),
        "coda Kernel.launch alone (bindings ready)": lambda: kern.launch(bindings),
        "torch._scaled_mm": lambda: torch._scaled_mm(a, w.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16),
    }
    for fn in calls.values():  # compile and warm each
        for _ in range(20):
            fn()
    print(f"M = N = K = {s}, {args.calls} calls a round, median of 5 rounds:")
    for name, fn in calls.items():
        print(f"  {name:45s} {per_call_us(fn, args.calls):8.2f} us a call")
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(args.calls):
        torch.ops.coda.scaled_mm(a, w.t(), sa, sb)
    torch.cuda.synchronize()
    profile.disable()
    print(f"\ncProfile of {args.calls} calls of torch.ops.coda.scaled_mm, by own time:")
    pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
