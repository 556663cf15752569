#!/usr/bin/env python3
"""Trains a small LlamaModel (4 layers, d = 512, vocab 8192) for 300 steps on a fixed synthetic corpus, through
coda and through eager PyTorch (bf16, and fp32 as the yardstick of rounding noise), from the same initial weights
on the same batches. Writes loss_curve.png and loss_curve.csv to $OUT (or --out) and asserts the curves track.

Corpus: a seeded Markov chain over the vocabulary; each token has 4 successors with probabilities
(0.55, 0.25, 0.15, 0.05), so the entropy floor is 1.16 nats against log(8192) = 9.01 at the start.

Tolerance: two bf16 runs that differ only in rounding drift apart like bf16 and fp32 runs do. Over the last 100
steps, the mean |coda - eager bf16| gap must be at most max(0.05 nats, 2 x the mean |eager bf16 - eager fp32| gap),
and coda's loss must fall by at least 30% (from log(8192) = 9.0)."""
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

VOCAB, D, LAYERS, HEADS, FFN = 8192, 512, 4, 8, 1408
BATCH, SEQ, STEPS, LR = 8, 512, 300, 1e-3


def corpus(n_seq, seq_len, seed=1234, device="cuda"):
    g = torch.Generator(device="cpu").manual_seed(seed)
    successors = torch.randint(0, VOCAB, (VOCAB, 4), generator=g).to(device)
    probs = torch.tensor([0.55, 0.25, 0.15, 0.05])
    choice = torch.multinomial(probs, n_seq * (seq_len + 1), replacement=True, generator=g)
    choice = choice.view(n_seq, seq_len + 1).to(device)
    tokens = torch.empty(n_seq, seq_len + 1, dtype=torch.long, device=device)
    tokens[:, 0] = torch.randint(0, VOCAB, (n_seq,), generator=g).to(device)
    for t in range(seq_len):
        tokens[:, t + 1] = successors[tokens[:, t], choice[:, t]]
    return tokens


def train(model, loss_fn, data, steps):
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.95), weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20))
    losses = []
    for step in range(steps):
        batch = data[(step * BATCH) % data.shape[0]:][:BATCH]
        loss = loss_fn(model, batch[:, :-1], batch[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--device", default="cuda", help="cpu: a smoke run of the script through coda.reference")
    parser.add_argument("--tiny", action="store_true", help="a 2-layer d=32 model, vocab 256, sequences of 32")
    args = parser.parse_args()
    global VOCAB, D, LAYERS, HEADS, FFN, SEQ
    if args.tiny:
        VOCAB, D, LAYERS, HEADS, FFN, SEQ = 256, 32, 2, 2, 64, 32
    os.makedirs(args.out, exist_ok=True)

    data = corpus(args.steps * BATCH // 2, SEQ, device=args.device)  # every sequence is seen twice
    torch.manual_seed(0)
    coda_model = ct.LlamaModel(VOCAB, D, LAYERS, HEADS, FFN, device=args.device)
    eager16 = copy.deepcopy(coda_model)
    eager32 = copy.deepcopy(coda_model).float()
    curves = {}
    for name, model, fn in (("coda_bf16", coda_model, lambda m, t, l: m(t, l)),
                            ("eager_bf16", eager16, ref.model_loss),
                            ("eager_fp32", eager32, ref.model_loss)):
        start = time.perf_counter()
        curves[name] = train(model, fn, data, args.steps)
        print(f"{name}: {time.perf_counter() - start:.1f} s, loss {curves[name][0]:.3f} -> "
              f"{sum(curves[name][-10:]) / 10:.3f}", flush=True)

    with open(os.path.join(args.out, "loss_curve.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step"] + list(curves))
        for i in range(args.steps):
            w.writerow([i] + [f"{curves[k][i]:.5f}" for k in curves])
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(8, 5))
        for k, v in curves.items():
            ax.plot(v, label=k, linewidth=1)
        ax.set_xlabel("step")
        ax.set_ylabel("cross-entropy (nats)")
        ax.set_title(f"LlamaModel {LAYERS}x d={D} vocab={VOCAB}, batch {BATCH}x{SEQ}")
        ax.axhline(1.16, color="gray", linestyle=":", label="entropy floor")
        ax.legend()
        fig.savefig(os.path.join(args.out, "loss_curve.png"), dpi=120)
    except ImportError:
        print("matplotlib missing: no loss_curve.png", file=sys.stderr)

    n_tail = min(100, args.steps)
    tail = slice(args.steps - n_tail, args.steps)
    gap = lambda a, b: sum(abs(x - y) for x, y in zip(curves[a][tail], curves[b][tail])) / n_tail  # noqa: E731
    coda_gap, noise = gap("coda_bf16", "eager_bf16"), gap("eager_bf16", "eager_fp32")
    tol = max(0.05, 2 * noise)
    print(f"mean |coda - eager bf16| over the last {n_tail} steps: {coda_gap:.4f} nats; "
          f"|eager bf16 - eager fp32|: {noise:.4f}; tolerance {tol:.4f}")
    assert all(math.isfinite(v) for v in curves["coda_bf16"]), "coda's loss is not finite"
    assert coda_gap <= tol, f"coda's loss curve leaves eager bf16's: {coda_gap:.4f} > {tol:.4f}"
    assert curves["coda_bf16"][-1] < 0.7 * curves["coda_bf16"][0], "coda's loss did not fall by 30%"
    print("loss curves track")


if __name__ == "__main__":
    main()
