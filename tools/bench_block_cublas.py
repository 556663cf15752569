#!/usr/bin/env python3
"""cuBLAS (torch.matmul) and torch's copy bandwidth beside `coda bench block`, in the same device call.

Reads the CSV that `coda bench block --csv` wrote, times torch.matmul at every GEMM row's shape and operand
layouts (A stored M x K or K x M, B stored N x K or K x N, bf16, as the row's a_major/b_major say) and a
device-to-device copy of a --copy-m x --copy-n bf16 tensor, and prints ONE markdown table: each GEMM epilogue
with coda's time, the identity GEMM's and cuBLAS's, and its ratios to both; then each tile program and finalizer
as GB/s and as a fraction of the copy's GB/s. Timing as tools/bench_torch.py does it (settled 500 ms, median of
back-to-back launches). --csv FILE also writes the cuBLAS and copy measurements."""
import argparse
import csv
import sys

import torch

from bench_torch import median_ms


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def operands(m, n, k, a_major, b_major):
    """Random bf16 operands in coda's layouts, and the matmul that computes A (M x K) times B (K x N) from them."""
    torch.manual_seed(0)
    a = torch.randn((m, k) if a_major == "k" else (k, m), device="cuda", dtype=torch.bfloat16)
    b = torch.randn((n, k) if b_major == "k" else (k, n), device="cuda", dtype=torch.bfloat16) / k**0.5
    a_mk = a if a_major == "k" else a.t()
    b_kn = b.t() if b_major == "k" else b
    return lambda: torch.matmul(a_mk, b_kn)


def copy_gbps(m, n):
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    ms = median_ms(lambda: y.copy_(x))
    return ms, 2 * x.numel() * x.element_size() / ms / 1e6


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("coda_csv", help="the CSV of `coda bench block --csv`")
    parser.add_argument("--copy-m", type=int, default=16384)
    parser.add_argument("--copy-n", type=int, default=4096)
    parser.add_argument("--csv", help="also write torch's measurements to this CSV file")
    args = parser.parse_args()
    rows = read_rows(args.coda_csv)
    if not rows:
        sys.exit(f"{args.coda_csv} holds no measurements")
    out = open(args.csv, "w") if args.csv else None
    if out:
        out.write("name,m,n,k,a_major,b_major,ms\n")

    cublas = {}
    for r in rows:
        if r["kind"] != "gemm":
            continue
        key = (int(r["m"]), int(r["n"]), int(r["k"]), r["a_major"], r["b_major"])
        if key in cublas:
            continue
        cublas[key] = median_ms(operands(*key))
        print(f"torch.matmul {' '.join(map(str, key))} {cublas[key]:.4f} ms", file=sys.stderr, flush=True)
        if out:
            out.write("torch.matmul,{},{},{},{},{},{:.5f}\n".format(*key, cublas[key]))
        torch.cuda.empty_cache()
    copy_ms, copy = copy_gbps(args.copy_m, args.copy_n)
    if out:
        out.write(f"torch_copy,{args.copy_m},{args.copy_n},,,,{copy_ms:.5f}\n")
        out.close()

    print("| epilogue | GEMM | d | M x N x K | B | coda ms | identity ms | cuBLAS ms | / identity | / cuBLAS | config |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["kind"] != "gemm":
            continue
        key = (int(r["m"]), int(r["n"]), int(r["k"]), r["a_major"], r["b_major"])
        ms, identity = float(r["ms"]), float(r["identity_ms"])
        print(f"| {r['epilogue']} | {r['gemm']} | {r['d']} | {r['m']} x {r['n']} x {r['k']} | {r['b_major']}-major "
              f"| {ms:.4f} | {identity:.4f} | {cublas[key]:.4f} | {float(r['vs_identity']):.3f} "
              f"| {ms / cublas[key]:.3f} | {r['config']} |")
    print()
    print(f"torch copy of {args.copy_m} x {args.copy_n} bf16: {copy_ms:.4f} ms, {copy:.1f} GB/s (read + write)")
    print()
    print("| kernel | kind | d | M x N | T | ms | MB moved | GB/s | / torch copy |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["kind"] == "gemm":
            continue
        gbps = float(r["gbps"])
        tiles = r["k"] if r["kind"] == "finalize" else "-"
        print(f"| {r['epilogue']} | {r['kind']} | {r['d']} | {r['m']} x {r['n']} | {tiles} | {float(r['ms']):.4f} "
              f"| {float(r['bytes']) / 1e6:.1f} | {gbps:.1f} | {gbps / copy:.3f} |")


if __name__ == "__main__":
    main()
