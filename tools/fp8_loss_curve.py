#!/usr/bin/env python3
"""FP8 training's loss curves against bf16 and fp32: exits 1 when an FP8 recipe's loss gap to bf16 passes its tolerance.

Issues 28 and "FP8 you can trust": the same LLaMA model, from the same initial weights and on the same batches,
trained `--steps` AdamW steps in fp32 (eager PyTorch, coda.torch.reference.model_loss: the reference), coda.torch in
bf16, and coda.torch with each FP8 recipe of --recipes (fp8="tensorwise", "rowwise", "blockwise",
"tensorwise_current", each also with '+wgrad': FP8 weight gradients). The data is learnable: token sequences of a
fixed random Markov chain (each token has `--branch` likely successors), so the loss falls from ln(vocab) toward
the chain's entropy and a precision problem shows as a curve that falls slower or stalls.

The bf16 and FP8 runs train as mixed precision does: AdamW steps an fp32 master copy of every parameter and the
model's bf16 parameters are copied from it after each step (MasterWeights), so the gaps measure the GEMMs' precision
and not the optimizer's bf16 rounding. The fp32 run steps its fp32 parameters directly.

A recipe's loss gap is the mean |loss_fp8 - loss_bf16| over the last third of the steps, as a fraction of bf16's mean
loss over those steps. Relative rather than absolute because the loss the runs reach depends on the settings (vocab,
branch, steps: about 1.85 nats after the default 300 steps, another level in a short test), and FP8's rounding is a
relative error of each GEMM's output. The exit status is 1 when any recipe's gap passes its tolerance (TOLERANCES,
or --max-gap / --tolerance), and the failing recipes are named; a loss that is not finite fails too. Each curve's gap
to fp32 (the same mean against the fp32 run, in nats) is reported beside it. fp8_loss_curve.csv (step, fp32, bf16,
one column per recipe) goes to $OUT (or --out).
On a CPU (no CUDA) it runs coda.torch's reference path in float64 for bf16 and FP8: only for a smoke test at tiny
sizes."""
import argparse
import copy
import csv
import math
import os
import sys
import time

import torch

import coda.torch as ct
from coda.torch import reference as ref

# Each recipe's tolerance on its loss gap to bf16, a fraction of bf16's loss. Where the numbers come from:
# - docs/PERFORMANCE.md's 300-step curves on GPUs (the default sizes; bf16 parameters then stepped in bf16): the FP8
#   losses ended 0.0014-0.0062 nats (0.08-0.33%) from bf16's 1.864, and FP8's gap to fp32 was 0.91-1.23x bf16's.
# - This tool on the CPU's float64 reference at the GPU test's settings (d = 256, 60 steps): gaps of 0.07-0.13% for
#   all six; with every FP8 value doubled (a scale off by two) 232%, the loss stalling at 5.96 instead of 1.75;
#   with every FP8 value truncated instead of rounded 0.26%, which no loss tolerance tells from noise (that is for
#   the kernels' numerics tests). The tiny CPU test with doubled FP8 values: 7.1-9.1% after 30 steps.
# 2% is six times the largest of those healthy gaps and below every wrong scale's. FP8 weight gradients (e5m2
# gradients in every weight update) have no GPU curve yet: 3% until they have.
# tensorwise_current (added after those measurements) takes its neighbours' tolerances.
TOLERANCES = {"tensorwise": 0.02, "tensorwise+wgrad": 0.03, "rowwise": 0.02, "rowwise+wgrad": 0.03,
              "blockwise": 0.02, "blockwise+wgrad": 0.03,
              "tensorwise_current": 0.02, "tensorwise_current+wgrad": 0.03}


def markov_batches(vocab, branch, batch, seq, steps, seed):
    """`steps` (tokens, labels) batches [batch x seq] from one random Markov chain: labels are the next tokens."""
    g = torch.Generator().manual_seed(seed)
    successors = torch.randint(0, vocab, (vocab, branch), generator=g)
    out = []
    for _ in range(steps):
        t = torch.empty(batch, seq + 1, dtype=torch.long)
        t[:, 0] = torch.randint(0, vocab, (batch,), generator=g)
        for i in range(seq):
            pick = torch.randint(0, branch, (batch,), generator=g)
            t[:, i + 1] = successors[t[:, i], pick]
        out.append((t[:, :-1].contiguous(), t[:, 1:].contiguous()))
    return out, math.log(branch)


def adamw(params, lr):
    return torch.optim.AdamW(params, lr=lr, weight_decay=0.0)


class MasterWeights:
    """Mixed-precision training's optimizer: AdamW steps an fp32 copy (master) of each of `params`, with the
    parameters' gradients cast to fp32 into the masters' .grad, and each parameter is copied from its master after
    the step. Buffers (an FP8 model's Fp8Scaling state) are not parameters and stay the model's own."""

    def __init__(self, params, lr):
        self.params = list(params)
        self.masters = [p.detach().float().clone().requires_grad_() for p in self.params]
        self.optimizer = adamw(self.masters, lr)

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self):
        for p, master in zip(self.params, self.masters):
            master.grad = None if p.grad is None else p.grad.float()
        self.optimizer.step()
        for p, master in zip(self.params, self.masters):
            p.copy_(master)


def train(loss_fn, optimizer, batches, device):
    losses = []
    for tokens, labels in batches:
        optimizer.zero_grad()
        loss = loss_fn(tokens.to(device), labels.to(device))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def tail_gap(curve, base):
    """The mean |curve - base| over the last third of the steps."""
    start = 2 * len(curve) // 3
    return sum(abs(a - b) for a, b in zip(curve[start:], base[start:])) / (len(curve) - start)


def relative_gap(curve, bf16):
    """A recipe's loss gap: tail_gap to bf16 as a fraction of bf16's mean loss over the same steps."""
    start = 2 * len(bf16) // 3
    return tail_gap(curve, bf16) / (sum(bf16[start:]) / (len(bf16) - start))


def failures(curves, tolerances):
    """A line for each FP8 recipe of `tolerances` ({recipe: largest relative_gap}) whose curve in `curves` ({"bf16":
    losses, recipe: losses}) passes it or is not finite."""
    out = []
    for recipe, tolerance in tolerances.items():
        gap = relative_gap(curves[recipe], curves["bf16"])
        if not gap <= tolerance:  # a NaN gap fails too
            out.append(f"fp8 {recipe}: loss gap to bf16 {100 * gap:.2f}% of bf16's loss, over its tolerance "
                       f"{100 * tolerance:.2f}%")
    return out


def tolerances_of(recipes, max_gap, overrides):
    """{recipe: tolerance} for `recipes`: max_gap where given, else TOLERANCES, then `overrides` ("recipe=fraction"
    texts); a ValueError names an override of a recipe not run, or a recipe left without a tolerance."""
    out = {recipe: TOLERANCES.get(recipe) if max_gap is None else max_gap for recipe in recipes}
    for text in overrides:
        recipe, _, value = text.partition("=")
        try:
            tolerance = float(value)
        except ValueError:
            tolerance = None
        if recipe not in out or tolerance is None:
            raise ValueError(f"--tolerance {text!r}: expected RECIPE=FRACTION with RECIPE one of --recipes "
                             f"({', '.join(recipes)})")
        out[recipe] = tolerance
    missing = [recipe for recipe, tolerance in out.items() if tolerance is None]
    if missing:
        raise ValueError(f"no default tolerance for {', '.join(missing)} (TOLERANCES has {', '.join(TOLERANCES)}): "
                         f"give one with --tolerance RECIPE=FRACTION or --max-gap")
    return out


def main(argv=None):
    """The curves, their report and fp8_loss_curve.csv; returns the exit status (1 where a recipe failed)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--d", type=int, default=1024)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--ffn", type=int, default=2816)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--branch", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--recipes", default=",".join(TOLERANCES),
                   help="FP8 recipes, comma-separated; a '+wgrad' suffix adds FP8 weight gradients")
    p.add_argument("--max-gap", type=float,
                   help="every recipe's tolerance on its loss gap to bf16, a fraction of bf16's loss (default: "
                        "TOLERANCES, 0.02 and 0.03 with +wgrad)")
    p.add_argument("--tolerance", action="append", default=[], metavar="RECIPE=FRACTION",
                   help="one recipe's tolerance, over --max-gap and the default (repeatable)")
    args = p.parse_args(argv)
    recipes = args.recipes.split(",")
    try:
        tolerances = tolerances_of(recipes, args.max_gap, args.tolerance)
    except ValueError as e:
        p.error(str(e))
    os.makedirs(args.out, exist_ok=True)
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    dtype = torch.bfloat16 if cuda else torch.float64
    batches, entropy = markov_batches(args.vocab, args.branch, args.batch, args.seq, args.steps, args.seed)

    torch.manual_seed(args.seed)
    kw = dict(vocab=args.vocab, d=args.d, n_layers=args.layers, n_heads=args.heads, ffn=args.ffn, device=device,
              dtype=dtype)
    bf16 = ct.LlamaModel(**kw)
    fp32 = copy.deepcopy(bf16).float()
    runs = [("fp32", lambda t, l: ref.model_loss(fp32, t, l), fp32.parameters(), adamw),
            ("bf16", bf16, bf16.parameters(), MasterWeights)]
    for recipe in recipes:
        model = ct.LlamaModel(**kw, fp8=recipe.removesuffix("+wgrad"), fp8_wgrad=recipe.endswith("+wgrad"))
        model.load_state_dict(bf16.state_dict(), strict=False)  # the same weights (tensorwise adds scales)
        runs.append((recipe, model, model.parameters(), MasterWeights))

    curves = {}
    for name, loss_fn, params, optimizer in runs:
        start = time.perf_counter()
        curves[name] = train(loss_fn, optimizer(params, args.lr), batches, device)
        label = name if name in ("fp32", "bf16") else f"fp8 {name}"
        print(f"{label}: {time.perf_counter() - start:.1f} s, loss {curves[name][0]:.4f} -> {curves[name][-1]:.4f} "
              f"(chain entropy {entropy:.4f}, ln(vocab) {math.log(args.vocab):.4f})", flush=True)

    names = ["fp32", "bf16"] + recipes
    with open(os.path.join(args.out, "fp8_loss_curve.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "fp32", "bf16"] + [f"fp8 {recipe}" for recipe in recipes])
        for i in range(args.steps):
            w.writerow([i] + [curves[name][i] for name in names])

    g16 = tail_gap(curves["bf16"], curves["fp32"])
    print(f"over steps {2 * args.steps // 3}-{args.steps - 1}: bf16's gap to fp32 {g16:.4f}")
    for recipe in recipes:
        g32 = tail_gap(curves[recipe], curves["fp32"])
        print(f"fp8 {recipe}: gap to bf16 {100 * relative_gap(curves[recipe], curves['bf16']):.2f}% of bf16's loss "
              f"(tolerance {100 * tolerances[recipe]:.2f}%), gap to fp32 {g32:.4f} ({g32 / max(g16, 1e-12):.2f}x "
              f"bf16's)")
    failed = failures(curves, tolerances)
    for line in failed:
        print(f"FAILED {line}")
    print(f"{len(recipes) - len(failed)} of {len(recipes)} FP8 recipes within their tolerance")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
