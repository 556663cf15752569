#!/usr/bin/env python3
"""The tensorwise FP8 layer's step (forward + backward, FP8 weight gradients, SDPA) timed with only the coda.torch API
that every version since the thirtieth session has, so that tools/ab_wheels.sh can run it under an old wheel and a
new one in turns: the A/B behind a layer time that moved between sessions (docs/PERFORMANCE.md, thirty-second
session: 24.58 -> 26.21 ms). The step is tools/bench_block.py's "coda fp8 wgrad" at d = 4096 (its inputs, its
calibrated entry scale). Prints one line per round, `round R: X ms a step`, and the median.

On the device, against the thirtieth session's build (e3d54d0, before the forward's scales were saved for its
backward) and the thirty-first's (75c13de, before the one layer op), each wheel built by tools/pack_device_python.sh
in a worktree of that commit:
    bash tools/ab_wheels.sh carry/base_wheel_30th python3 tools/ab_fp8_layer.py
    bash tools/ab_wheels.sh carry/base_wheel_31st python3 tools/ab_fp8_layer.py
On the CPU (a smoke run through the fp64 reference): python3 tools/ab_fp8_layer.py --cpu"""
import argparse
import statistics
import time

import torch

import coda.torch as ct


def step_fn(d, ffn, heads, batch, seq, device, dtype):
    """The layer step as a function, and the layer: bench_block's layer_step of its tensorwise FP8 layer."""
    torch.manual_seed(0)
    m = batch * seq
    layer = ct.LlamaDecoderLayer(d, heads, ffn, eps=1e-5, attention="sdpa", device=device, dtype=dtype,
                                 fp8="tensorwise", fp8_wgrad=True)
    x = torch.randn(m, d, device=device, dtype=dtype, requires_grad=True)
    dy = torch.randn(m, d, device=device, dtype=dtype) / m
    pos = torch.arange(seq, device=device, dtype=torch.int32).repeat(batch)
    next_gamma = torch.ones(d, device=device, dtype=dtype)
    entry = ct.fp8.Fp8Scaling({"h": "e4m3"}, device=device)
    with torch.no_grad():
        h, rstd = torch.ops.coda.rms_stats(x, layer.attn_norm, 1e-5)
        entry.update(m)  # h's scale calibrated on this x, as a model's previous layer would have written it
        entry.record(torch.ops.coda.rms_stats_fp8(x, layer.attn_norm, 1e-5, entry.inv_scale("h"))[2])
        entry.update(m)
        h8 = torch.ops.coda.rms_stats_fp8(x, layer.attn_norm, 1e-5, entry.inv_scale("h"))[0]
    h_scale = entry.scale("h")

    def step():
        layer.zero_grad(set_to_none=True)
        x.grad = None
        layer(x, h8, rstd, next_gamma, pos, seq, h_scale)[0].backward(dy)
    return step


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, default=4096)
    p.add_argument("--ffn", type=int, default=14336)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--steps", type=int, default=20, help="steps a round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--cpu", action="store_true", help="a tiny layer on the CPU (fp64 reference): a smoke run")
    args = p.parse_args(argv)
    if args.cpu:
        args.d, args.ffn, args.heads, args.batch, args.seq, args.steps, args.rounds = 64, 96, 2, 2, 8, 1, 2
    device, dtype = ("cpu", torch.float64) if args.cpu else ("cuda", torch.bfloat16)
    step = step_fn(args.d, args.ffn, args.heads, args.batch, args.seq, device, dtype)
    for _ in range(3):  # compiles the kernels and moves the delayed scales off their priors
        step()
    times = []
    for r in range(args.rounds):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3 / args.steps)
        print(f"round {r}: {times[-1]:.3f} ms a step", flush=True)
    print(f"median: {statistics.median(times):.3f} ms a step (d = {args.d}, F = {args.ffn}, {args.heads} heads, "
          f"{args.batch} x {args.seq} tokens, {device})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
