"""Per-launch cost of Kernel.launch's argument conversion (dict -> coda::Args), on the CPU: no GPU needed.

Times coda._coda._convert_bindings on out_proj's seven bindings (tensors imported through DLPack, as launch does,
but host tensors allowed) for torch and numpy arrays. Usage: PYTHONPATH=build/python python tools/bench_launch_args.py
"""

import timeit

import numpy as np

import coda

convert = coda._coda._convert_bindings


def per_call_us(bindings, repeat=20000):
    convert(bindings, device_only=False, describe=False)
    best = min(timeit.repeat(lambda: convert(bindings, device_only=False, describe=False), number=repeat, repeat=5))
    return best / repeat * 1e6


def out_proj_bindings(zeros, transpose, m=256, n=256, k=128):
    return {"A": zeros((m, k)), "B": transpose(zeros((n, k))), "residual": zeros((m, n)), "gamma": zeros((n,)),
            "x1": zeros((m, n)), "h": zeros((m, n)), "x1_sumsq": zeros((2, m))}


def main():
    rows = [("numpy", out_proj_bindings(lambda s: np.zeros(s, np.float32), lambda a: a.T))]
    try:
        import torch

        rows.append(("torch", out_proj_bindings(lambda s: torch.zeros(s), lambda a: a.t())))
    except ImportError:
        pass
    rows.append(("floats only", {f"s{i}": float(i) for i in range(7)}))
    for name, bindings in rows:
        print(f"{name:12s} {len(bindings)} bindings: {per_call_us(bindings):6.2f} us per launch")


if __name__ == "__main__":
    main()
