#!/usr/bin/env python3
"""Every kernel of a training step, coda.torch and torch.compile side by side, each coda kernel next to its floor.

Profiles one decoder layer's forward + backward (d = 2048 or 4096, M = 16384 tokens, as tools/bench_block.py) and,
with --model, a whole model step (8 layers, d = 2048, vocab 32768, AdamW), with torch.profiler over --steps steps.
Kernels are grouped per step:
- coda's by the graph that launched them (each launch of coda.torch's one entry point, _kernels.run, is labelled),
  with its floor: the cuBLAS GEMM of the same shape and layouts (torch.matmul, timed here) for GEMM graphs, and
  the bytes it reads and writes at torch's device-to-device copy bandwidth (measured here) for tile programs and
  finalizers;
- everything else (attention, cuBLAS, Triton, PyTorch's own kernels) by kernel name; a GEMM's floor is itself.
Beside each table, the step's timeline: how long the host took to issue a step, and how much of the GPU's span of a
step no kernel ran (the launch gaps, or a host that falls behind), measured in the same profiled steps.
With --fp8 RECIPE (tensorwise, rowwise, blockwise; "+wgrad" for FP8 weight gradients), the layers are also profiled in
FP8, coda's FP8 layer beside its bf16 one; an FP8 GEMM's floor is per-tensor torch._scaled_mm of its shape with
use_fast_accum=True (both operands K-major, the only layout it takes; none for others): coda's per-tensor mainloop
never promotes its accumulator, nor does cuBLAS's fast-accum kernel, so that is the like-for-like floor (the
block-wise GEMMs, which promote every 128 of K, and the row-wise ones are set against it too). The kernels
coda.torch.fp8 and the FP8 ops launch are labelled too. With --torchao, torchao's recipe beside them in both
accumulations (tools/fp8_baselines.py).
One markdown table per step on stdout and in $OUT/profile_block.md (or --out)."""
import argparse
import bisect
import collections
import copy
import os
import statistics
import time

import torch

import coda.torch as ct
from coda.torch import (_kernels, _steps, fp8, fp8_recipes, ops, ops_fp8_layer,
                        ops_lm_head)
from coda.torch import reference as ref

from bench_block import LLAMA_SEQ, adamw_step, layer_step, llama_fields, llama_models, torchao_layer
from fp8_baselines import torchao_configs

BATCH, SEQ, EPS = 8, 2048, 1e-5
M = BATCH * SEQ
LAYERS = {2048: (8192, 16), 4096: (14336, 32)}
# Every module that launches coda kernels through its own name `run` (from coda.torch._kernels).
LAUNCHERS = (ops, ops_lm_head, _steps, fp8, fp8_recipes, ops_fp8_layer)
_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)


def event_ms(fn, iters=20):
    fn()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


class Launches:
    """Records every coda launch (graph, shape, operand layouts, bytes) and labels it for the profiler."""

    def __init__(self):
        self.records = []
        self._run = _kernels.run

    def __enter__(self):
        def labelled(name, inputs, outputs, m, n, k=0, partials=(), device=None):
            tensors = [t for t in (*inputs.values(), *outputs.values()) if isinstance(t, torch.Tensor)]
            a, b = inputs.get("A"), inputs.get("B")
            self.records.append({
                "graph": name, "m": m, "n": n, "k": k,
                "a_mn_major": a is not None and a.stride(0) == 1 and a.shape[1] > 1,
                "b_n_major": b is not None and b.stride(1) == 1 and b.shape[0] > 1,
                "fp8": a is not None and a.dtype in _FP8,
                "bytes": sum(t.numel() * t.element_size() for t in tensors) if not k else 0})
            with torch.profiler.record_function(f"coda.run#{len(self.records) - 1}"):
                return self._run(name, inputs, outputs, m, n, k, partials, device)
        for module in LAUNCHERS:
            module.run = labelled
        return self

    def __exit__(self, *exc):
        for module in LAUNCHERS:
            module.run = self._run


class Floors:
    def __init__(self):
        big = torch.empty(2 ** 29, dtype=torch.bfloat16, device="cuda").normal_()
        out = torch.empty_like(big)
        self.copy_bytes_per_ms = 2 * big.numel() * 2 / event_ms(lambda: out.copy_(big))
        self._gemm = {}

    def gemm_ms(self, m, n, k, a_mn_major, b_n_major, fp8_operands=False):
        """cuBLAS's time for the GEMM: torch.matmul in bf16, torch._scaled_mm (per-tensor e4m3, fast accumulation, as
        coda's mainloop) for FP8 operands, None for an FP8 layout it does not take."""
        key = (m, n, k, a_mn_major, b_n_major, fp8_operands)
        if fp8_operands and key not in self._gemm:
            if a_mn_major or b_n_major or m % 16 or n % 16 or k % 16:
                self._gemm[key] = None
            else:
                a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
                b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()
                one = torch.ones((), device="cuda")
                self._gemm[key] = event_ms(lambda: torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16,
                                                                    use_fast_accum=True))
        if key not in self._gemm:
            a = torch.randn(k, m, device="cuda", dtype=torch.bfloat16).t() if a_mn_major else \
                torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) if b_n_major else \
                torch.randn(n, k, device="cuda", dtype=torch.bfloat16).t()
            self._gemm[key] = event_ms(lambda: torch.matmul(a, b))
        return self._gemm[key]


class Profiled:
    """A profile of `steps` steps: the profiler's events, and per step the host's time to issue it and the wall
    time to run it (both under the profiler, which slows the host a little)."""

    def __init__(self, events, steps, issue_ms, wall_ms):
        self.events, self.steps, self.issue_ms, self.wall_ms = events, steps, issue_ms, wall_ms


def profile(step, steps):
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            step()
        issued = time.perf_counter()
        torch.cuda.synchronize()
        done = time.perf_counter()
    return Profiled(prof.profiler.function_events, steps, (issued - start) * 1e3 / steps, (done - start) * 1e3 / steps)


def _gpu_kernels(events):
    # The GPU's kernels (and memcpy / memset), without the profiler's own annotations of the timeline.
    return [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA
            and not e.name.startswith("coda.run#") and not e.name.startswith("ProfilerStep")]


def _kernel_spans(events):
    return sorted((e.time_range.start, e.time_range.end) for e in _gpu_kernels(events))


def timeline(profiled):
    """(kernels per step, GPU span ms, busy ms, idle ms, host issue ms, wall ms), per step. The span runs from the
    first kernel's start to the last one's end; busy is the union of the kernels' intervals in it (concurrent kernels
    count once); idle is the rest: the GPU waiting between kernels."""
    spans = _kernel_spans(profiled.events)
    busy, end = 0.0, None
    for s, e in spans:
        if end is None or s >= end:
            busy += e - s
            end = e
        elif e > end:
            busy += e - end
            end = e
    span = (max(e for _, e in spans) - spans[0][0]) if spans else 0.0
    n = profiled.steps
    return (len(spans) / n, span / 1e3 / n, busy / 1e3 / n, (span - busy) / 1e3 / n, profiled.issue_ms,
            profiled.wall_ms)


def _labels(events, launches):
    """label(kernel event) -> (label, coda launch record or None): coda's launches go through the driver API, so a
    kernel is matched to the coda.run#i annotation whose span on the GPU's timeline holds it."""
    gpu = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
    spans = sorted((e.time_range.start, e.time_range.end, int(e.name[len("coda.run#"):]))
                   for e in gpu if e.name.startswith("coda.run#"))
    starts = [s[0] for s in spans]

    def label(kern):
        i = bisect.bisect_right(starts, kern.time_range.start) - 1
        if i >= 0 and kern.time_range.end <= spans[i][1] + 1:
            rec = launches.records[spans[i][2]]
            return f"coda {rec['graph']} {rec['m']}x{rec['n']}" + (f"x{rec['k']}" if rec["k"] else ""), rec
        return (kern.name if len(kern.name) < 90 else kern.name[:87] + "..."), None
    return label


def kernel_rows(profiled, launches, floors):
    """Rows (label, calls per step, ms per step, floor ms per step) grouped by coda graph or kernel name."""
    events, steps = profiled.events, profiled.steps
    label_of = _labels(events, launches)
    rows = collections.OrderedDict()
    for kern in _gpu_kernels(events):
        label, rec = label_of(kern)
        if rec is not None:
            floor = (floors.gemm_ms(rec["m"], rec["n"], rec["k"], rec["a_mn_major"], rec["b_n_major"], rec["fp8"])
                     if rec["k"] else rec["bytes"] / floors.copy_bytes_per_ms)
        else:
            gemm = "coda::" not in kern.name and any(s in kern.name for s in ("gemm", "nvjet", "xmma", "cutlass"))
            floor = kern.time_range.elapsed_us() / 1000 if gemm else None
        row = rows.setdefault(label, [0, 0.0, 0.0, 0])
        row[0] += 1
        row[1] += kern.time_range.elapsed_us() / 1000
        if floor is not None:
            row[2] += floor
            row[3] += 1
    return [(label, c / steps, ms / steps, fl / steps if n else None) for label, (c, ms, fl, n) in rows.items()]


def gap_rows(profiled, launches, top=12):
    """Where the GPU idled: each gap between a kernel's end (the latest so far) and the next kernel's start, grouped by
    the pair of kernels around it; rows (before, after, gaps per step, idle ms per step, longest us), the `top` largest
    by idle time."""
    events, steps = profiled.events, profiled.steps
    label_of = _labels(events, launches)
    kernels = sorted(_gpu_kernels(events), key=lambda e: e.time_range.start)
    groups = collections.defaultdict(lambda: [0, 0.0, 0.0])
    last, end = None, None
    for kern in kernels:
        if end is not None and kern.time_range.start > end:
            gap = kern.time_range.start - end
            g = groups[(label_of(last)[0], label_of(kern)[0])]
            g[0] += 1
            g[1] += gap
            g[2] = max(g[2], gap)
        if end is None or kern.time_range.end > end:
            last, end = kern, kern.time_range.end
    rows = [(before, after, n / steps, us / 1e3 / steps, longest) for (before, after), (n, us, longest) in groups.items()]
    return sorted(rows, key=lambda r: -r[3])[:top]


def system_rows(profiled, launches, floors):
    """What table() prints of one system: its kernel rows, its timeline and its largest gaps."""
    return kernel_rows(profiled, launches, floors), timeline(profiled), gap_rows(profiled, launches)


def table(title, systems):
    lines = [f"### {title}", "", "| system | kernels | GPU span ms | kernels busy ms | GPU idle ms | host issue ms | "
             "wall ms |", "|---|---|---|---|---|---|---|"]
    for system, (_, (kernels, span, busy, idle, issue, wall), _) in systems.items():
        lines.append(f"| {system} | {kernels:g} | {span:.3f} | {busy:.3f} | {idle:.3f} | {issue:.3f} | {wall:.3f} |")
    lines += ["", "| system | kernel (coda: graph M x N [x K]) | calls | ms | floor ms | / floor |",
              "|---|---|---|---|---|---|"]
    for system, (rows, _, _) in systems.items():
        total = sum(r[2] for r in rows)
        floored = sum(r[3] for r in rows if r[3] is not None)
        for label, calls, ms, floor in sorted(rows, key=lambda r: -r[2]):
            ratio = f"{ms / floor:.2f}" if floor else ""
            lines.append(f"| {system} | `{label}` | {calls:g} | {ms:.3f} | {'' if floor is None else f'{floor:.3f}'} "
                         f"| {ratio} |")
        lines.append(f"| {system} | **total** | | **{total:.3f}** | {floored:.3f} (kernels with a floor) | |")
    lines += ["", "Where the GPU idled: the largest gaps between kernels, by the kernels around them (per step).", "",
              "| system | kernel before | kernel after | gaps | idle ms | longest us |", "|---|---|---|---|---|---|"]
    for system, (_, _, gaps) in systems.items():
        for before, after, n, ms, longest in gaps:
            lines.append(f"| {system} | `{before}` | `{after}` | {n:g} | {ms:.3f} | {longest:.0f} |")
    return "\n".join(lines) + "\n"


def profile_layer(d, attention, floors, steps, kv_heads=None):
    ffn, heads = LAYERS[d]
    torch.manual_seed(0)
    layer = ct.LlamaDecoderLayer(d, heads, ffn, eps=EPS, attention=attention, device="cuda", n_kv_heads=kv_heads)
    eager = copy.deepcopy(layer)
    x = torch.randn(M, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(M, d, device="cuda", dtype=torch.bfloat16)
    pos = torch.arange(SEQ, device="cuda", dtype=torch.int32).repeat(BATCH)
    with torch.no_grad():
        h, rstd = torch.ops.coda.rms_stats(x, layer.attn_norm, EPS)
    compiled = torch.compile(lambda x_: ref.decoder_layer(eager, x_, pos, SEQ))

    systems = {}
    with Launches() as launches:
        coda_step = layer_step(layer, x, dy, lambda: layer(x, h, rstd, layer.mlp_norm, pos, SEQ)[0])
        systems["coda"] = system_rows(profile(coda_step, steps), launches, floors)
    systems["torch.compile"] = system_rows(profile(layer_step(eager, x, dy, lambda: compiled(x)), steps), launches,
                                           floors)
    gqa = f", {heads} query heads sharing {kv_heads} KV heads" if kv_heads and kv_heads != heads else ""
    return table(f"Layer fwd+bwd, d = {d}, F = {ffn}, M = {M}, attention {attention}{gqa} (ms per step)", systems)


def profile_fp8_layer(d, attention, floors, steps, recipe, kv_heads=None, torchao=False):
    """coda's FP8 layer (recipe: tensorwise, rowwise or blockwise, "+wgrad" for FP8 weight gradients) beside its bf16
    layer, from the same weights; its input h in e4m3 as the previous layer would write it. With `torchao`, also
    torchao's float8 training of the same recipe (tensorwise or rowwise) under torch.compile in each accumulation
    (fast first), as bench_block.py --fp8 times it: kernel by kernel beside coda's."""
    ffn, heads = LAYERS[d]
    name, wgrad = recipe.removesuffix("+wgrad"), recipe.endswith("+wgrad")
    torch.manual_seed(0)
    layer = ct.LlamaDecoderLayer(d, heads, ffn, eps=EPS, attention=attention, device="cuda", n_kv_heads=kv_heads,
                                 fp8=name, fp8_wgrad=wgrad)
    bf16 = ct.LlamaDecoderLayer(d, heads, ffn, eps=EPS, attention=attention, device="cuda", n_kv_heads=kv_heads)
    bf16.load_state_dict(layer.state_dict(), strict=False)  # the same weights, less the tensorwise scales
    x = torch.randn(M, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(M, d, device="cuda", dtype=torch.bfloat16) / M  # a mean loss's order: the e5m2 scales' prior
    pos = torch.arange(SEQ, device="cuda", dtype=torch.int32).repeat(BATCH)
    with torch.no_grad():
        h, rstd = torch.ops.coda.rms_stats(x, layer.attn_norm, EPS)
        if name == "tensorwise":
            entry = fp8.Fp8Scaling({"h": "e4m3"}, device="cuda")
            for _ in range(2):  # a scale calibrated on this x
                entry.update(M)
                h8, _, amax = torch.ops.coda.rms_stats_fp8(x, layer.attn_norm, EPS, entry.inv_scale("h"))
                entry.record(amax)
            h_scale = entry.scale("h")
        else:
            h8, _, h_scale = torch.ops.coda.rms_stats_fp8(x, layer.attn_norm, EPS, None, name)

    systems = {}
    with Launches() as launches:
        fp8_step = layer_step(layer, x, dy, lambda: layer(x, h8, rstd, layer.mlp_norm, pos, SEQ, h_scale)[0])
        systems[f"coda fp8 {recipe}"] = system_rows(profile(fp8_step, steps), launches, floors)
        bf16_step = layer_step(bf16, x, dy, lambda: bf16(x, h, rstd, bf16.mlp_norm, pos, SEQ)[0])
        systems["coda bf16"] = system_rows(profile(bf16_step, steps), launches, floors)
    if torchao and name in ("tensorwise", "rowwise"):
        try:
            configs = torchao_configs(name)
        except ImportError as e:
            print(f"(torchao {name} left out: {e})")
        else:
            for accum, config in configs.items():
                ao = torchao_layer(bf16, config)  # its norms and SwiGLU in eager PyTorch, compiled with the rest
                ao_step = layer_step(ao, x, dy, lambda c=torch.compile(ao): c(x, pos))
                systems[f"torchao {name} + compile ({accum})"] = system_rows(profile(ao_step, steps), launches,
                                                                              floors)
    gqa = f", {heads} query heads sharing {kv_heads} KV heads" if kv_heads and kv_heads != heads else ""
    return table(f"FP8 layer fwd+bwd ({recipe}), d = {d}, F = {ffn}, M = {M}, attention {attention}{gqa} "
                 f"(ms per step)", systems)


def profile_model(floors, steps):
    vocab, d, n_layers, heads, f = 32768, 2048, 8, 16, 8192
    torch.manual_seed(0)
    model = ct.LlamaModel(vocab, d, n_layers, heads, f, eps=EPS, attention="sdpa", device="cuda")
    twin = copy.deepcopy(model)
    tokens = torch.randint(0, vocab, (BATCH, SEQ), device="cuda")
    labels = torch.randint(0, vocab, (BATCH, SEQ), device="cuda")
    compiled = torch.compile(lambda t, l: ref.model_loss(twin, t, l))

    systems = {}
    with Launches() as launches:
        systems["coda"] = system_rows(profile(adamw_step(model, lambda: model(tokens, labels)), steps), launches,
                                      floors)
    systems["torch.compile"] = system_rows(profile(adamw_step(twin, lambda: compiled(tokens, labels)), steps),
                                           launches, floors)
    return table(f"Model step, {n_layers} layers, d = {d}, V = {vocab}, AdamW, SDPA (ms per step)", systems)


def profile_llama(floors, steps, batch, n_layers):
    """A training step of LLaMA-3.2-1B's architecture (bench_block.py's llama3.2-1b section): coda, without logits,
    and torch.compile of the same model in eager PyTorch, from the same weights."""
    fields = llama_fields(n_layers)
    torch.manual_seed(0)
    hf, _, model = llama_models(fields, "cuda")
    del hf
    twin = copy.deepcopy(model)
    tokens = torch.randint(0, fields["vocab_size"], (batch, LLAMA_SEQ), device="cuda")
    compiled = torch.compile(lambda t: ref.model_loss(twin, t, t))
    systems = {}
    with Launches() as launches:
        systems["coda"] = system_rows(profile(adamw_step(model, lambda: model(tokens, tokens)), steps), launches,
                                      floors)
    systems["torch.compile"] = system_rows(profile(adamw_step(twin, lambda: compiled(tokens)), steps), launches,
                                           floors)
    return table(f"LLaMA-3.2-1B step, {fields['num_hidden_layers']} layers, {batch} x {LLAMA_SEQ} tokens, AdamW "
                 f"(ms per step)", systems)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, nargs="+", default=[2048], choices=sorted(LAYERS))
    p.add_argument("--attention", nargs="+", default=["none", "sdpa"], choices=["none", "sdpa"])
    p.add_argument("--kv-heads", type=int, default=None,
                   help="grouped-query layers: this many KV heads (LLaMA-3: 8); SDPA only")
    p.add_argument("--swiglu-backward", choices=["fused", "split"], default="fused",
                   help="coda.torch's SwiGLU backward: in the dgrad GEMM's epilogue, or a dgrad GEMM then a tile program")
    p.add_argument("--fp8", nargs="+", default=[], metavar="RECIPE",
                   help="also profile the FP8 layers of these recipes (tensorwise, rowwise, blockwise; +wgrad)")
    p.add_argument("--fp8-only", action="store_true", help="profile only the FP8 layers (and coda bf16 beside them)")
    p.add_argument("--torchao", action="store_true",
                   help="beside each tensorwise or rowwise FP8 layer, torchao's float8 training of that recipe under "
                        "torch.compile, with its own config and with fast accumulation in all three GEMMs (needs "
                        "torchao)")
    p.add_argument("--model", action="store_true", help="also profile the 8-layer model step")
    p.add_argument("--llama", action="store_true", help="also profile LLaMA-3.2-1B's training step")
    p.add_argument("--llama-batch", type=int, default=2)
    p.add_argument("--llama-layers", type=int, default=16)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    ct.ops.set_swiglu_backward(args.swiglu_backward)
    floors = Floors()
    parts = [f"torch copy bandwidth: {floors.copy_bytes_per_ms / 1e6:.0f} GB/s (read + write)\n"]
    for d in args.d:
        for attention in args.attention:
            if args.kv_heads and attention == "none":
                print("(attention 'none' left out: the attention-free stand-in needs as many KV heads as query heads)")
                continue
            if not args.fp8_only:
                parts.append(profile_layer(d, attention, floors, args.steps, args.kv_heads))
                print(parts[-1], flush=True)
                torch.cuda.empty_cache()
            for recipe in args.fp8:
                parts.append(profile_fp8_layer(d, attention, floors, args.steps, recipe, args.kv_heads, args.torchao))
                print(parts[-1], flush=True)
                torch.cuda.empty_cache()
    if args.model:
        parts.append(profile_model(floors, args.steps))
        print(parts[-1], flush=True)
        torch.cuda.empty_cache()
    if args.llama:
        parts.append(profile_llama(floors, args.steps, args.llama_batch, args.llama_layers))
        print(parts[-1], flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "profile_block.md"), "w") as f:
        f.write("\n".join(parts))


if __name__ == "__main__":
    main()
