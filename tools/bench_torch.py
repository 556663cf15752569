#!/usr/bin/env python3
"""Baselines for `coda bench gemm`, measured on the same GPU in the same device call: cuBLAS through
torch.matmul, and the unfused out-proj chain (matmul + residual add + RMSNorm statistics) in eager mode and
under torch.compile. Prints one line per measurement: `name M N K ms TFLOP/s`."""
import argparse

import torch


def median_ms(fn, warmup=5, iters=50):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    return times[len(times) // 2]


def out_proj_chain(a, w, residual, gamma):
    x1 = a @ w.t() + residual
    h = x1 * gamma
    sumsq = x1.float().square().sum(dim=1)
    return x1, h, sumsq


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--m", type=int, default=4096)
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--k", type=int, default=4096)
    parser.add_argument("--chain", action="store_true", help="also time the unfused out-proj chain")
    parser.add_argument("--copy", action="store_true", help="also time a device-to-device copy of an M x N bf16 tile")
    args = parser.parse_args()
    m, n, k = args.m, args.n, args.k
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k**0.5
    flops = 2.0 * m * n * k
    t = median_ms(lambda: a @ w.t())
    print(f"torch.matmul {m} {n} {k} {t:.4f} {flops / t / 1e9:.1f}")
    if args.chain:
        residual = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        gamma = torch.rand(n, device="cuda", dtype=torch.bfloat16) + 0.5
        t = median_ms(lambda: out_proj_chain(a, w, residual, gamma))
        print(f"eager_out_proj_chain {m} {n} {k} {t:.4f} {flops / t / 1e9:.1f}")
        compiled = torch.compile(out_proj_chain)
        t = median_ms(lambda: compiled(a, w, residual, gamma))
        print(f"compiled_out_proj_chain {m} {n} {k} {t:.4f} {flops / t / 1e9:.1f}")
    if args.copy:
        copy_bandwidth(16384, 4096)


def copy_bandwidth(m, n):
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    t = median_ms(lambda: y.copy_(x))
    print(f"torch_copy {m} {n} {t:.4f} {2 * x.numel() * 2 / t / 1e6:.1f} GB/s")


if __name__ == "__main__":
    main()
