"""Host time of an FP8 layer's step (forward and backward) with every coda launch recorded and none made: the Python
work of the op and its autograd, besides PyTorch's own small ops on CPU tensors at tiny shapes. CPU time of this
process (time.process_time), the least of --repeat runs of --steps steps, so other processes on the machine matter
less. To compare two versions of coda.torch, run it under each PYTHONPATH; set OMP_NUM_THREADS=1.

    OMP_NUM_THREADS=1 PYTHONPATH=build/python python3 tools/fp8_layer_host_time.py
"""
import argparse
import time

import torch

import coda.torch as ct
from coda.torch import _kernels


def step_fn(recipe: str, fp8_wgrad: bool, d: int = 256, heads: int = 4, ffn: int = 512, m: int = 256, seq: int = 128):
    torch.manual_seed(0)
    layer = ct.LlamaDecoderLayer(d, heads, ffn, fp8=recipe, fp8_wgrad=fp8_wgrad, device="cpu", dtype=torch.float32)
    x = torch.randn(m, d, requires_grad=True)
    pos = torch.arange(seq).repeat(m // seq).to(torch.int32)
    gamma = torch.ones(d)

    def step():
        norm = layer.attn_norm.detach()
        if recipe == "tensorwise":
            h, rstd, _ = torch.ops.coda.rms_stats_fp8(x.detach(), norm, 1e-5, torch.tensor(1.0))
            h_scale = torch.tensor(1.0)
        else:
            h, rstd, h_scale = torch.ops.coda.rms_stats_fp8(x.detach(), norm, 1e-5, None, recipe)
        x2, *_ = layer(x, h, rstd, gamma, pos, seq, h_scale)
        x2.sum().backward()
    return step


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipes", nargs="+", default=["tensorwise", "rowwise", "blockwise"])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    print("| recipe | fp8_wgrad | host ms a step |\n|---|---|---|")
    for recipe in args.recipes:
        for fp8_wgrad in (False, True):
            step = step_fn(recipe, fp8_wgrad)
            for _ in range(3):
                _kernels.record_launches(step)
            best = float("inf")
            for _ in range(args.repeat):
                start = time.process_time()
                for _ in range(args.steps):
                    _kernels.record_launches(step)
                best = min(best, (time.process_time() - start) / args.steps * 1e3)
            print(f"| {recipe} | {fp8_wgrad} | {best:.3f} |")


if __name__ == "__main__":
    main()
