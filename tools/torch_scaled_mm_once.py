#!/usr/bin/env python3
"""One torch._scaled_mm (cuBLASLt) call inside a CUDA profiler range, after a warm-up: for `ncu --profile-from-start
off` (tools/device_fp8.sh ncucublas), to set cuBLAS's FP8 kernel (its name, launch, stall samples) beside coda's.
e4m3 operands on fresh random values, A [M x K] row-major, B the transpose of an N x K row-major tensor, bf16 out;
--recipe blockwise: 1 x 128 scales on A (outer-dim-major), 128 x 128 on B (as tools/bench_scaled_mm.py passes them);
tensorwise: one scale each.

Usage: python3 tools/torch_scaled_mm_once.py --m M --n N --k K [--recipe blockwise|tensorwise]"""
import argparse


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--m", type=int, required=True)
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--k", type=int, required=True)
    p.add_argument("--recipe", choices=("blockwise", "tensorwise"), default="blockwise")
    args = p.parse_args()
    import torch

    m, n, k = args.m, args.n, args.k
    torch.manual_seed(0)
    a = (torch.randn(m, k, device="cuda") / 4).to(torch.float8_e4m3fn)
    w = (torch.randn(n, k, device="cuda") / 4).to(torch.float8_e4m3fn)
    if args.recipe == "blockwise":
        scale_a = (torch.rand(m, (k + 127) // 128, device="cuda") + 0.5).t().contiguous().t()
        scale_b = (torch.rand((n + 127) // 128, (k + 127) // 128, device="cuda") + 0.5).t()
    else:
        scale_a = scale_b = torch.ones((), device="cuda")
    call = lambda: torch._scaled_mm(a, w.t(), scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16)  # noqa: E731
    for _ in range(5):
        call()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    call()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


if __name__ == "__main__":
    main()
