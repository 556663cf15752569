#!/usr/bin/env python3
"""How precisely each FP8 recipe's backward GEMMs accumulate (issue 55): the weight gradients dW = dY^T X at K = 16384
and 65536 tokens and the dgrads dX = dY W at the layer's shapes, each on the same FP8 operands through coda and
through cuBLAS (torch._scaled_mm) with fast accumulation and with its default, precise one (what torchao's tensorwise
recipe runs in its grad GEMMs). The error of each is taken against the fp64 product of the same quantized operands, so
it is the accumulation's alone, not the quantization's: f32 outputs everywhere (coda's f32 += GEMMs, `wgrad_*_accumulate`
into zeros; _scaled_mm with out_dtype=float32).

The recipes quantize as coda.torch's layers do: tensorwise e5m2 gradients x e4m3 activations or weights under one
scale each; rowwise e4m3 with a scale per channel (rows of A, columns of B, over the reduced dimension); blockwise e4m3
with a scale per channel and 128 of the reduced dimension (block-scaled GEMMs promote each 128-k block, so they are
the precise reference point among coda's). The row-wise baselines are torchao's: fast, _scaled_mm's row-wise form;
precise, its per-tensor form with unit scales and the row and column scales applied after (torchao's fallback when
fast accumulation is off).

Prints a table (error of each system, and coda's over the precise baseline's) and writes fp8_accumulation.csv to --out
(default $OUT or .). A row where coda's error is more than twice the precise baseline's is marked: those are the GEMMs
that should promote their accumulator.
Usage: python3 tools/fp8_accumulation.py [--d 4096] [--tokens 16384 65536] [--recipes tensorwise rowwise blockwise]"""
import argparse
import csv
import os

import torch

import coda
from coda.torch._kernels import graph, run

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
LARGEST = {E4M3: 448.0, E5M2: 57344.0}
GROUP = 128  # the block-wise recipe's group along the reduced dimension


def layer_shapes(d: int) -> dict:
    """The d = 4096 LLaMA-3-8B layer's weights (N x K), scaled with d: QKV with 8 KV heads, out-projection, gate/up and
    down (FFN 3.5 d)."""
    ffn = 7 * d // 2
    return {"qkv": (d + d // 2, d), "o": (d, d), "gate_up": (2 * ffn, d), "down": (d, ffn)}


def quantize(t: torch.Tensor, fmt, dims):
    """t in `fmt` with one scale per slice over `dims` (None: the whole tensor): (t_fp8, scale f32 broadcastable to t),
    scale = the slice's amax / the format's largest."""
    amax = t.abs().amax() if dims is None else t.abs().amax(dim=dims, keepdim=True)
    scale = (amax.float() / LARGEST[fmt]).clamp_min(2.0 ** -126)
    return (t.float() / scale).to(fmt), scale


def grouped(t: torch.Tensor, dim: int):
    """t [R x K] (dim=1) quantized in e4m3 per row and GROUP of K, or [K x C] (dim=0) per column and GROUP of K:
    (t_fp8, the scales [R x K/GROUP] or [K/GROUP x C])."""
    k = t.shape[dim]
    blocks = t.unflatten(dim, (k // GROUP, GROUP))
    q, scale = quantize(blocks, E4M3, dim + 1)
    return q.flatten(dim, dim + 1), scale.squeeze(dim + 1)


def operands(recipe: str, a: torch.Tensor, b: torch.Tensor):
    """A [M x K] (the gradient) and B [K x N] quantized for `recipe`: (a_fp8, a_scale, b_fp8, b_scale), the scales
    shaped to broadcast over the product's rows and columns (tensorwise: scalars; rowwise: [M x 1] and [1 x N];
    blockwise: [M x K/GROUP] and [K/GROUP x N])."""
    if recipe == "tensorwise":
        return (*quantize(a, E5M2, None), *quantize(b, E4M3, None))
    if recipe == "rowwise":
        return (*quantize(a, E4M3, 1), *quantize(b, E4M3, 0))
    return (*grouped(a, 1), *grouped(b, 0))


def dequantized(recipe: str, q: torch.Tensor, scale: torch.Tensor, dim: int) -> torch.Tensor:
    if recipe == "blockwise":
        scale = scale.repeat_interleave(GROUP, dim=dim)
    return q.double() * scale.double()


def exact(recipe, a_q, a_s, b_q, b_s, rows: int = 4096) -> torch.Tensor:
    """The fp64 product of the dequantized operands, `rows` of A at a time (fp64 copies of whole operands at K = 65536
    would take tens of GB)."""
    b = dequantized(recipe, b_q, b_s, 0)
    parts = []
    for r in range(0, a_q.shape[0], rows):
        a_s_rows = a_s if a_s.dim() == 0 else a_s[r:r + rows]
        parts.append(dequantized(recipe, a_q[r:r + rows], a_s_rows, 1) @ b)
    return torch.cat(parts)


_CODA_GRAPHS = {"tensorwise": "wgrad_fp8_accumulate", "rowwise": "wgrad_fp8_rowwise_accumulate",
                "blockwise": "wgrad_fp8_blockwise_accumulate"}


def coda_product(recipe, a_q, a_s, b_q, b_s) -> torch.Tensor:
    """A B in f32 through coda's f32 += GEMM of `recipe` (into zeros). Its B is K-major: b_q's transpose, stored
    row-major, as the layers keep their transposed copies."""
    m, k = a_q.shape
    n = b_q.shape[1]
    b_k = b_q.t().contiguous().t()
    if recipe == "tensorwise":
        scales = {"a_scale": a_s.reshape(()), "b_scale": b_s.reshape(())}
    elif recipe == "rowwise":
        scales = {"a_scale": a_s.reshape(m), "b_scale": b_s.reshape(n)}
    else:  # the mainloop reads the scales k-block by k-block: A's [K/GROUP x M], B's per row of B^T, [K/GROUP x N]
        a_name, b_name = coda.block_scale_names(graph(_CODA_GRAPHS[recipe]).spec)
        scales = {a_name: a_s.t().contiguous(), b_name: b_s.contiguous()}
    out = torch.zeros(m, n, dtype=torch.float32, device=a_q.device)
    run(_CODA_GRAPHS[recipe], {"A": a_q, "B": b_k, **scales}, {"D": out}, m, n, k)
    return out


def cublas_product(recipe, a_q, a_s, b_q, b_s, fast: bool) -> torch.Tensor:
    """A B in f32 through torch._scaled_mm, as torchao runs it: per tensor, or for rowwise its row-wise form (fast) or
    the per-tensor one with unit scales, scaled after (precise)."""
    b_k = b_q.t().contiguous().t()
    if recipe == "tensorwise":
        return torch._scaled_mm(a_q, b_k, a_s.reshape(()), b_s.reshape(()), out_dtype=torch.float32,
                                use_fast_accum=fast)
    if fast:
        return torch._scaled_mm(a_q, b_k, a_s, b_s, out_dtype=torch.float32, use_fast_accum=True)
    one = torch.ones((), dtype=torch.float32, device=a_q.device)
    return torch._scaled_mm(a_q, b_k, one, one, out_dtype=torch.float32, use_fast_accum=False) * a_s * b_s


def rel(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return float((actual.double() - expected).norm() / expected.norm().clamp_min(1e-300))


def problems(d: int, tokens: list) -> list:
    """(label, M, K, N) of each GEMM: each weight's gradient at each token count (dW [N x K] = dY^T X: M = the weight's
    N, K = the tokens, N = its K), then each weight's dgrad at the largest (dX = dY W: M = the tokens, K = the
    weight's N, N = its K)."""
    out = []
    for name, (n, k) in layer_shapes(d).items():
        out += [(f"wgrad {name}", n, t, k) for t in tokens]
    for name, (n, k) in layer_shapes(d).items():
        out.append((f"dgrad {name}", max(tokens), n, k))
    return out


def measure(recipe: str, m: int, k: int, n: int, seed: int, baselines: bool) -> dict:
    g = torch.Generator(device="cuda" if torch.cuda.is_available() else "cpu").manual_seed(seed)
    device = g.device
    a = torch.randn(m, k, device=device, generator=g, dtype=torch.bfloat16)
    b = torch.randn(k, n, device=device, generator=g, dtype=torch.bfloat16)
    a_q, a_s, b_q, b_s = operands(recipe, a, b)
    del a, b
    want = exact(recipe, a_q, a_s, b_q, b_s)
    row = {"coda": rel(coda_product(recipe, a_q, a_s, b_q, b_s), want)}
    if baselines and recipe != "blockwise":  # block-scaled GEMMs have no fast-accumulation form to compare
        row["cublas fast-accum"] = rel(cublas_product(recipe, a_q, a_s, b_q, b_s, True), want)
        row["cublas precise-accum"] = rel(cublas_product(recipe, a_q, a_s, b_q, b_s, False), want)
    return row


SYSTEMS = ("coda", "cublas fast-accum", "cublas precise-accum")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, default=4096)
    p.add_argument("--tokens", type=int, nargs="+", default=[16384, 65536])
    p.add_argument("--recipes", nargs="+", default=["tensorwise", "rowwise", "blockwise"],
                   choices=["tensorwise", "rowwise", "blockwise"])
    p.add_argument("--only", help="only the problems whose label contains this text (e.g. 'wgrad')")
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    args = p.parse_args(argv)
    if any(t % GROUP for t in args.tokens) or args.d % GROUP:
        p.error(f"tokens and d must be multiples of {GROUP} (the block-wise recipe's group)")
    baselines = torch.cuda.is_available()
    rows = []
    header = f"{'recipe':<11} {'GEMM':<14} {'M':>6} {'K':>6} {'N':>6} " + " ".join(f"{s:>21}" for s in SYSTEMS)
    print(header + "  coda / precise")
    for recipe in args.recipes:
        for i, (label, m, k, n) in enumerate(problems(args.d, args.tokens)):
            if args.only and args.only not in label:
                continue
            errors = measure(recipe, m, k, n, seed=i, baselines=baselines)
            ratio = errors["coda"] / errors["cublas precise-accum"] if "cublas precise-accum" in errors else None
            cells = " ".join(f"{errors[s]:>21.3e}" if s in errors else f"{'':>21}" for s in SYSTEMS)
            flag = "" if ratio is None else f"  {ratio:6.2f}x" + ("  > 2x: promote" if ratio > 2 else "")
            print(f"{recipe:<11} {label:<14} {m:>6} {k:>6} {n:>6} {cells}{flag}", flush=True)
            rows.append({"recipe": recipe, "gemm": label, "m": m, "k": k, "n": n, **errors,
                         "coda_over_precise": "" if ratio is None else ratio})
            if baselines:
                torch.cuda.empty_cache()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "fp8_accumulation.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["recipe", "gemm", "m", "k", "n", *SYSTEMS, "coda_over_precise"])
        w.writeheader()
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
