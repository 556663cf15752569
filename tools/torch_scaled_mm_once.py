#!/usr/bin/env python3
"""One torch._scaled_mm (cuBLASLt) call inside a CUDA profiler range, after a warm-up: for `ncu --profile-from-start
off` (tools/device_fp8.sh ncucublas), to set cuBLAS's FP8 kernel (its name, launch, stall samples) beside coda's.
The call is tools/bench_scaled_mm.py's, on its operands: --recipe blockwise (1 x 128 scales on A, 128 x 128 on B) or
tensorwise (one scale each, fast accumulation as coda's per-tensor GEMM).

Usage: python3 tools/torch_scaled_mm_once.py --m M --n N --k K [--recipe blockwise|tensorwise]"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_scaled_mm  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--m", type=int, required=True)
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--k", type=int, required=True)
    p.add_argument("--recipe", choices=("blockwise", "tensorwise"), default="blockwise")
    args = p.parse_args()
    import torch

    blockwise = args.recipe == "blockwise"
    systems = bench_scaled_mm.shape_systems(args.m, args.n, args.k, blockwise)
    name = "cublas blockwise" if blockwise else "cublas fast-accum"
    if name not in systems:
        sys.exit(f"torch._scaled_mm has no block-wise form in this torch ({torch.__version__})")
    call = systems[name]
    for _ in range(5):
        call()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    call()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


if __name__ == "__main__":
    main()
