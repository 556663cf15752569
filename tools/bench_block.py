#!/usr/bin/env python3
"""One LLaMA decoder layer, forward + backward, at d = 2048 (F = 8192) and d = 4096 (F = 14336), M = 16384 tokens
(batch 8 x sequence 2048), bf16: coda.torch against torch eager, torch.compile, Liger kernels and the cuBLAS GEMM
floor (the layer's 12 GEMMs alone through torch.matmul; with real attention, plus SDPA forward and backward).
Each with causal SDPA and with the attention-free stand-in v + 0 * (q + k). Then a whole model step (8 layers,
d = 2048, vocab 32768, AdamW) in tokens/s and peak memory (coda eager, coda under torch.compile, and coda's step
captured in a CUDA graph and replayed, besides the baselines), and whether torch.compile(fullgraph=True) of a small coda
model (4 layers, d = 512) compiles and matches. Last, "llama3.2-1b step": a training step of LLaMA-3.2-1B's
architecture (llama_rows). One table on stdout; bench_block.csv and bench_block.md in $OUT (or --out).
--fp8: the layers instead with coda's FP8 layers (fp8="tensorwise", "blockwise", "rowwise") against coda bf16, torch.compile bf16 and torchao's
float8 recipes under torch.compile, x_floor against the FP8 GEMM floor (fp8_layer_rows); then "llama3.2-1b fp8 step":
coda's LLaMA-3.2-1B in the tensorwise and rowwise recipes (FP8 weight gradients) against Hugging Face's model under
torchao's same recipe + torch.compile, and in the block-wise one against Hugging Face's in bf16 + torch.compile, each
also against coda bf16 and Hugging Face's with Liger's fused linear cross-entropy (llama_fp8_rows). Every FP8 baseline
runs in both accumulations (tools/fp8_baselines.py): torch._scaled_mm with use_fast_accum True and False, torchao's
recipe with its own config and with fast accumulation in all three GEMMs; the fast one is like-for-like with coda's
per-tensor mainloop, which never promotes its accumulator, and its ratio comes first.

Timing: every system runs twice (compiles, autotuning), then all run in turn for 500 ms to settle the GPU clock,
then rounds: in each round every system runs `per_round` times between two CUDA events; the median over rounds.
Systems take turns within a round, so clock drift hits all alike, in an order that changes from round to round (the
rows of a balanced Latin square, tools/round_order.py): none always runs first, or always after the same other one.
Gradients are set to None before each step (no gradient-accumulation adds are timed). At the power cap, turns share
the power budget between systems whose energy per step differs; --hold-s S then also runs each system alone for S
seconds, as a training loop runs only it, and adds its sustained ms per step, median SM clock and power (nvidia-smi)
and joules per step (tools/power_hold.py)."""
import argparse
import copy
import csv
import gc
import os
import statistics
import sys
import time
import traceback
import types

import torch
import torch.nn.functional as F

import coda.torch as ct
from coda.torch import reference as ref

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fp8_baselines  # noqa: E402
import power_hold  # noqa: E402
from round_order import round_orders  # noqa: E402

BATCH, SEQ = 8, 2048
M = BATCH * SEQ
EPS = 1e-5
# (d, F, query heads, KV heads): the two MHA layers of the issue's table, and LLaMA-3-8B's layer (grouped-query
# attention, 32 query heads sharing 8 KV heads; measured with SDPA only: the attention-free stand-in needs MHA).
LAYER_SIZES = [(2048, 8192, 16, 16), (4096, 14336, 32, 32), (4096, 14336, 32, 8)]
START = time.perf_counter()
HOLD_S = 0.0  # --hold-s: each system also run alone this long (power_hold.hold)
SYSTEMS = []  # --systems: the FP8 sections' systems whose name contains one of these (all when empty)


def kept(name):
    """Whether --systems keeps the system `name`."""
    return not SYSTEMS or any(text in name for text in SYSTEMS)


def kept_systems(systems):
    """`systems` less those --systems leaves out (each left out is never compiled or run)."""
    return {name: fn for name, fn in systems.items() if kept(name)}


def log(*a):
    print(f"[{time.perf_counter() - START:6.1f} s]", *a, flush=True)


def time_systems(systems, rounds, per_round, settle_ms=500, announce=None):
    """Median ms per call of each fn in `systems` (name -> fn), interleaved. `announce`: log each system's first
    run under this label (compiles can take minutes)."""
    for name, fn in systems.items():
        fn()
        if announce:
            torch.cuda.synchronize()
            log(f"{announce}: {name} ran once")
        fn()
    torch.cuda.synchronize()
    t_end = time.perf_counter() + settle_ms / 1000
    while time.perf_counter() < t_end:
        for fn in systems.values():
            fn()
        torch.cuda.synchronize()
    times = {name: [] for name in systems}
    for order in round_orders(list(systems), rounds):
        for name in order:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(per_round):
                systems[name]()
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end) / per_round)
    return {name: statistics.median(v) for name, v in times.items()}


def add_holds(rows, systems):
    """With --hold-s: each system run alone for HOLD_S seconds (tools/power_hold.py), and its sustained time per step,
    median clock and power, and energy per step added to its row."""
    if HOLD_S <= 0:
        return rows
    log(f"holding each of {list(systems)} alone for {HOLD_S} s")
    held = power_hold.hold(systems, HOLD_S)
    for r in rows:
        r.update(held.get(r["system"], {}))
    return rows


def peak_gib(fn):
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2 ** 30


# --- Liger: the same layer with Liger's RMSNorm, RoPE (its half-split convention; same cost) and SwiGLU ---------

def liger_parts():
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction
    from liger_kernel.transformers.rms_norm import LigerRMSNorm
    from liger_kernel.transformers.rope import liger_rotary_pos_emb
    try:
        from liger_kernel.ops.swiglu import LigerFusedGateUpSiLUMulFunction as fused
    except ImportError:
        fused = None
    return LigerRMSNorm, liger_rotary_pos_emb, LigerSiLUMulFunction, fused


class LigerLayer(torch.nn.Module):
    def __init__(self, layer):
        super().__init__()
        RMSNorm, self.rope, self.silu_mul, self.fused_silu_mul = liger_parts()
        d, f = layer.d, layer.ffn
        self.n_heads, self.n_kv_heads, self.attention = layer.n_heads, layer.n_kv_heads, layer.attention
        self.norm1 = RMSNorm(d, eps=EPS).to(device="cuda", dtype=torch.bfloat16)
        self.norm2 = RMSNorm(d, eps=EPS).to(device="cuda", dtype=torch.bfloat16)
        with torch.no_grad():
            self.norm1.weight.copy_(layer.attn_norm)
            self.norm2.weight.copy_(layer.mlp_norm)
        self.w_qkv = torch.nn.Parameter(layer.w_qkv.detach().clone())
        self.w_o = torch.nn.Parameter(layer.w_o.detach().clone())
        # Liger's fused SwiGLU takes [gate | up] halves, not interleaved columns.
        gu = layer.w_gate_up.detach()
        self.w_gate_up = torch.nn.Parameter(torch.cat((gu[0::2], gu[1::2])).contiguous())
        self.w_down = torch.nn.Parameter(layer.w_down.detach().clone())
        hd = d // self.n_heads
        inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, device="cuda", dtype=torch.float32) / hd))
        ang = torch.arange(SEQ, device="cuda", dtype=torch.float32)[:, None] * inv[None]
        emb = torch.cat((ang, ang), -1)
        self.register_buffer("cos", emb.cos()[None].bfloat16())
        self.register_buffer("sin", emb.sin()[None].bfloat16())

    def forward(self, x):
        m, d = x.shape
        b, h, kv = m // SEQ, self.n_heads, self.n_kv_heads
        hd = d // h
        qkv = self.norm1(x) @ self.w_qkv.t()
        q = qkv[:, :d].view(b, SEQ, h, hd).transpose(1, 2)
        k, v = qkv[:, d:].view(b, SEQ, 2, kv, hd).permute(2, 0, 3, 1, 4).unbind(0)
        q, k = self.rope(q, k, self.cos, self.sin)
        if self.attention == "none":
            a = (v + 0 * (q + k)).transpose(1, 2).reshape(m, d)
        else:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kv != h)
            a = a.transpose(1, 2).reshape(m, d)
        x1 = x + a @ self.w_o.t()
        z = self.norm2(x1) @ self.w_gate_up.t()
        if self.fused_silu_mul is not None:
            y = self.fused_silu_mul.apply(z)
        else:
            gate, up = z.chunk(2, -1)
            y = self.silu_mul.apply(gate, up)
        return x1 + y @ self.w_down.t()


# --- the GEMM floor: the layer's 12 GEMMs (4 forward, 4 dgrad, 4 wgrad) ------------------------------------------

def floor_fn(layer, attention):
    d, f = layer.d, layer.ffn
    bf = dict(device="cuda", dtype=torch.bfloat16)
    ws = [layer.w_qkv.detach(), layer.w_o.detach(), layer.w_gate_up.detach(), layer.w_down.detach()]
    ins = [torch.randn(M, d, **bf), torch.randn(M, d, **bf), torch.randn(M, d, **bf), torch.randn(M, f, **bf)]
    douts = [torch.randn(M, w.shape[0], **bf) for w in ws]
    hd, kv = d // layer.n_heads, layer.n_kv_heads
    qkv = [torch.randn(BATCH, heads, SEQ, hd, **bf, requires_grad=True) for heads in (layer.n_heads, kv, kv)]
    do = torch.randn(BATCH, layer.n_heads, SEQ, hd, **bf)

    def run():
        for x, w in zip(ins, ws):
            torch.matmul(x, w.t())
        for x, w, dy in zip(ins, ws, douts):
            torch.matmul(dy, w)
            torch.matmul(dy.t(), x)
        if attention == "sdpa":
            o = F.scaled_dot_product_attention(*qkv, is_causal=True, enable_gqa=kv != layer.n_heads)
            torch.autograd.grad(o, qkv, do)
    return run


def layer_step(module, x, dy, fwd):
    """One layer's forward + backward (gradients of `module` and of its input x set to None first) as a function."""
    def run():
        module.zero_grad(set_to_none=True)
        x.grad = None
        fwd().backward(dy)
    return run


def split_swiglu_backward(fn):
    """fn with coda.torch's SwiGLU backward split into a plain dgrad GEMM and a tile program while it runs."""
    def run():
        ct.ops.set_swiglu_backward("split")
        try:
            return fn()
        finally:
            ct.ops.set_swiglu_backward("fused")
    return run


def layer_label(d, f, heads, kv_heads):
    return f"layer fwd+bwd d={d} F={f}" + (f" GQA {heads}/{kv_heads}" if kv_heads != heads else "")


def layer_sections(sizes):
    """(section name, d, F, heads, KV heads, attention) of each layer row set: both attentions for MHA layers, SDPA
    for grouped-query ones (the attention-free stand-in needs as many KV heads as query heads)."""
    out = []
    for d, f, h, kv in sizes:
        for att in (("none", "sdpa") if kv == h else ("sdpa",)):
            out.append((f"layer d={d}" + (f" kv={kv}" if kv != h else "") + f" {att}", d, f, h, kv, att))
    return out


def layer_rows(d, f, heads, attention, rounds, per_round, skip_compile, kv_heads=None):
    kv_heads = kv_heads or heads
    torch.manual_seed(0)
    layer = ct.LlamaDecoderLayer(d, heads, f, eps=EPS, attention=attention, device="cuda", n_kv_heads=kv_heads)
    eager_layer = copy.deepcopy(layer)
    x = torch.randn(M, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(M, d, device="cuda", dtype=torch.bfloat16)
    pos = torch.arange(SEQ, device="cuda", dtype=torch.int32).repeat(BATCH)
    next_gamma = torch.ones(d, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        h, rstd = torch.ops.coda.rms_stats(x, layer.attn_norm, EPS)

    def step(module, fwd):
        return layer_step(module, x, dy, fwd)

    systems = {"coda": step(layer, lambda: layer(x, h, rstd, next_gamma, pos, SEQ)[0]),
               "coda, split SwiGLU backward": split_swiglu_backward(
                   step(layer, lambda: layer(x, h, rstd, next_gamma, pos, SEQ)[0])),
               "torch eager": step(eager_layer, lambda: ref.decoder_layer(eager_layer, x, pos, SEQ))}
    if not skip_compile:
        compiled = torch.compile(lambda x_: ref.decoder_layer(eager_layer, x_, pos, SEQ))
        systems["torch.compile"] = step(eager_layer, lambda: compiled(x))
    try:
        liger = LigerLayer(eager_layer)
        systems["Liger"] = step(liger, lambda: liger(x))
    except Exception as e:  # noqa: BLE001
        log(f"Liger unavailable: {e!r}")
    systems["cuBLAS GEMM floor"] = floor_fn(layer, attention)

    # Correctness of this very layer against the fp32 eager reference (the tests hold the tolerances).
    with torch.no_grad():
        out = layer(x, h, rstd, next_gamma, pos, SEQ)[0]
        out32 = ref.decoder_layer(copy.deepcopy(layer).float(), x.float(), pos, SEQ)
        err = ((out.float() - out32).norm() / out32.norm()).item()
        del out, out32

    log(f"{layer_label(d, f, heads, kv_heads)} {attention}: compiling and warming {list(systems)}")
    ms = time_systems(systems, rounds, per_round)
    mem = {name: peak_gib(fn) for name, fn in systems.items()}
    floor = ms["cuBLAS GEMM floor"]
    rows = []
    for name in systems:
        rows.append({"bench": layer_label(d, f, heads, kv_heads), "attention": attention, "system": name,
                     "ms": round(ms[name], 3), "x_floor": round(ms[name] / floor, 3),
                     "tokens_per_s": round(M / ms[name] * 1e3), "peak_GiB": round(mem[name], 2),
                     "note": f"rel. error vs fp32 {err:.1e}" if name == "coda" else ""})
    add_holds(rows, systems)
    del systems, layer, eager_layer, x
    torch.cuda.empty_cache()
    return rows


# --- FP8 (--fp8): coda's FP8 layer against torchao's float8 training under torch.compile ----------------------

class LinearLayer(torch.nn.Module):
    """ref.decoder_layer with its four GEMMs as nn.Linear modules (bias-free, the coda layer's weights): what torchao's
    convert_to_float8_training swaps for its Float8Linear."""

    def __init__(self, layer):
        super().__init__()
        self.eps, self.n_heads, self.n_kv_heads, self.head_dim = layer.eps, layer.n_heads, layer.n_kv_heads, layer.head_dim
        self.attention = layer.attention
        self.attn_norm = torch.nn.Parameter(layer.attn_norm.detach().clone())
        self.mlp_norm = torch.nn.Parameter(layer.mlp_norm.detach().clone())
        self.register_buffer("theta", layer.theta.clone())
        self.linears = torch.nn.ModuleList()
        for w in (layer.w_qkv, layer.w_o, layer.w_gate_up, layer.w_down):
            lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=False, device=w.device, dtype=w.dtype)
            with torch.no_grad():
                lin.weight.copy_(w)
            self.linears.append(lin)

    def forward(self, x, pos):
        qkv_l, o_l, gu_l, down_l = self.linears
        qkv = ref.rope(qkv_l(ref.rms_norm(x, self.attn_norm, self.eps)), pos, self.theta)
        x1 = x + o_l(ref.attend(qkv, self.n_heads, SEQ, self.attention, self.n_kv_heads, self.head_dim))
        return x1 + down_l(ref.swiglu(gu_l(ref.rms_norm(x1, self.mlp_norm, self.eps))))


def torchao_layer(layer, config):
    """LinearLayer converted by torchao.float8 (convert_to_float8_training) with `config`: a recipe's config in one
    accumulation (fp8_baselines.torchao_configs)."""
    from torchao.float8 import convert_to_float8_training
    module = LinearLayer(layer)
    convert_to_float8_training(module, config=config)
    return module


def torchao_systems(recipe, prefix=""):
    """{name: config} of torchao's float8 training in `recipe` under torch.compile, named "{prefix}torchao {recipe} +
    compile ({accumulation})", one per accumulation, the like-for-like one (fast) first; those --systems leaves out
    left out."""
    named = ((f"{prefix}torchao {recipe} + compile ({accum})", config)
             for accum, config in fp8_baselines.torchao_configs(recipe).items())
    return {name: config for name, config in named if kept(name)}


def fp8_floor_fn(layer, attention, fast_accum):
    """The FP8 layer's GEMMs alone: the 4 forward (e4m3 x e4m3) and 4 dgrad (e5m2 x e4m3) GEMMs through
    torch._scaled_mm (cuBLASLt, per-tensor scales, bf16 out; use_fast_accum=`fast_accum`), the 4 weight gradients in
    bf16 (torch.matmul), and with real attention SDPA forward and backward."""
    e4, e5 = torch.float8_e4m3fn, torch.float8_e5m2
    bf = dict(device="cuda", dtype=torch.bfloat16)
    one = torch.ones((), device="cuda")
    shapes = [(w.shape[0], w.shape[1]) for w in (layer.w_qkv, layer.w_o, layer.w_gate_up, layer.w_down)]
    ws = [torch.randn(n, k, **bf).to(e4) for n, k in shapes]
    wts = [w.t().contiguous() for w in ws]
    ins = [torch.randn(M, k, **bf) for _, k in shapes]
    ins8 = [x.to(e4) for x in ins]
    douts = [torch.randn(M, n, **bf) for n, _ in shapes]
    douts8 = [dy.to(e5) for dy in douts]
    hd, kv = layer.head_dim, layer.n_kv_heads
    qkv = [torch.randn(BATCH, heads, SEQ, hd, **bf, requires_grad=True) for heads in (layer.n_heads, kv, kv)]
    do = torch.randn(BATCH, layer.n_heads, SEQ, hd, **bf)

    def run():
        for x, w in zip(ins8, ws):
            torch._scaled_mm(x, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=fast_accum)
        for dy, wt in zip(douts8, wts):
            torch._scaled_mm(dy, wt.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=fast_accum)
        for x, dy in zip(ins, douts):
            torch.matmul(dy.t(), x)
        if attention == "sdpa":
            o = F.scaled_dot_product_attention(*qkv, is_causal=True, enable_gqa=kv != layer.n_heads)
            torch.autograd.grad(o, qkv, do)
    return run


def fp8_layer_rows(d, f, heads, attention, rounds, per_round, skip_compile, kv_heads=None):
    """coda's FP8 layers (fp8="tensorwise", "blockwise", "rowwise"; each also with FP8 weight gradients; also
    "tensorwise_current" with them, torchao's tensorwise scaling; and tensorwise
    and rowwise with those and the backward's GEMMs promoted: "promoted wgrad", torchao's default) against coda's
    bf16 layer, torch.compile in bf16, torchao's float8 tensorwise and rowwise recipes under torch.compile and the FP8
    GEMM floor, each of the last two in both accumulations; x_floor is against the fast-accum floor, like-for-like with
    coda's per-tensor GEMMs, and a coda FP8 row's note gives its gain over torchao's same recipe fast-accum first."""
    kv_heads = kv_heads or heads
    torch.manual_seed(0)
    layer = ct.LlamaDecoderLayer(d, heads, f, eps=EPS, attention=attention, device="cuda", n_kv_heads=kv_heads,
                                 fp8="tensorwise")
    bf16_layer = ct.LlamaDecoderLayer(d, heads, f, eps=EPS, attention=attention, device="cuda", n_kv_heads=kv_heads)
    bf16_layer.load_state_dict(layer.state_dict(), strict=False)  # the same weights, less the FP8 scales
    # Tensorwise with FP8 weight gradients too (torchao's tensorwise recipe has them so).
    wgrad_layer = ct.LlamaDecoderLayer(d, heads, f, eps=EPS, attention=attention, device="cuda", n_kv_heads=kv_heads,
                                       fp8="tensorwise", fp8_wgrad=True)
    wgrad_layer.load_state_dict(layer.state_dict())
    fine = {}  # the recipes whose scales come from each tensor's own blocks or rows ("... wgrad": FP8 dW too)
    for recipe in ("blockwise", "blockwise wgrad", "rowwise", "rowwise wgrad", "tensorwise_current wgrad"):
        fine[recipe] = ct.LlamaDecoderLayer(d, heads, f, eps=EPS, attention=attention, device="cuda",
                                            n_kv_heads=kv_heads, fp8=recipe.split()[0],
                                            fp8_wgrad=recipe.endswith("wgrad"))
        fine[recipe].load_state_dict(bf16_layer.state_dict())
    # FP8 weight gradients with the backward's GEMMs promoted: like for like with torchao's default configs.
    promoted = {recipe: ct.LlamaDecoderLayer(d, heads, f, eps=EPS, attention=attention, device="cuda",
                                             n_kv_heads=kv_heads, fp8=recipe, fp8_wgrad=True,
                                             fp8_backward_accumulation="promoted")
                for recipe in ("tensorwise", "rowwise")}
    promoted["tensorwise"].load_state_dict(layer.state_dict())
    promoted["rowwise"].load_state_dict(bf16_layer.state_dict())
    eager_layer = copy.deepcopy(bf16_layer)
    x = torch.randn(M, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(M, d, device="cuda", dtype=torch.bfloat16) / M  # of a mean loss's order: the e5m2 scales' prior
    pos = torch.arange(SEQ, device="cuda", dtype=torch.int32).repeat(BATCH)
    next_gamma = torch.ones(d, device="cuda", dtype=torch.bfloat16)
    entry = ct.fp8.Fp8Scaling({"h": "e4m3"}, device="cuda")
    with torch.no_grad():
        h, rstd = torch.ops.coda.rms_stats(x, layer.attn_norm, EPS)
        # The layer's input in e4m3 under a scale calibrated on this x (a model's previous layer writes it so).
        entry.update(M)
        entry.record(torch.ops.coda.rms_stats_fp8(x, layer.attn_norm, EPS, entry.inv_scale("h"))[2])
        entry.update(M)
        h8, _, _ = torch.ops.coda.rms_stats_fp8(x, layer.attn_norm, EPS, entry.inv_scale("h"))
        fine_h = {recipe: torch.ops.coda.rms_stats_fp8(x, layer.attn_norm, EPS, None, recipe.split()[0])
                  for recipe in fine}  # h in e4m3 with its own scales
    h_scale = entry.scale("h")

    def fine_forward(recipe, module=None):
        h_fp8, _, scales = fine_h[recipe]
        module = module or fine[recipe]
        return lambda: module(x, h_fp8, rstd, next_gamma, pos, SEQ, scales)[0]

    def step(module, fwd):
        return layer_step(module, x, dy, fwd)

    def tensorwise_forward(module):
        return lambda: module(x, h8, rstd, next_gamma, pos, SEQ, h_scale)[0]

    tensorwise_step = step(layer, tensorwise_forward(layer))
    wgrad_step = step(wgrad_layer, tensorwise_forward(wgrad_layer))
    promoted_step = step(promoted["tensorwise"], tensorwise_forward(promoted["tensorwise"]))
    promoted_forward = {"coda fp8 promoted wgrad": tensorwise_forward(promoted["tensorwise"]),
                        "coda fp8 rowwise promoted wgrad": fine_forward("rowwise wgrad", promoted["rowwise"])}
    ao_names = {"tensorwise": [], "rowwise": []}  # torchao's systems of each recipe, the like-for-like one first
    systems = {"coda fp8": tensorwise_step,
               "coda fp8 wgrad": wgrad_step,
               "coda fp8 blockwise": step(fine["blockwise"], fine_forward("blockwise")),
               "coda fp8 blockwise wgrad": step(fine["blockwise wgrad"], fine_forward("blockwise wgrad")),
               "coda fp8 rowwise": step(fine["rowwise"], fine_forward("rowwise")),
               "coda fp8 rowwise wgrad": step(fine["rowwise wgrad"], fine_forward("rowwise wgrad")),
               # torchao's tensorwise recipe's scaling (current, all e4m3), like for like with it in numerics too
               "coda fp8 tensorwise_current wgrad": step(fine["tensorwise_current wgrad"],
                                                         fine_forward("tensorwise_current wgrad")),
               "coda fp8 promoted wgrad": promoted_step,
               "coda fp8 rowwise promoted wgrad": step(promoted["rowwise"],
                                                       promoted_forward["coda fp8 rowwise promoted wgrad"]),
               "coda bf16": step(bf16_layer, lambda: bf16_layer(x, h, rstd, next_gamma, pos, SEQ)[0])}
    if not skip_compile:
        compiled = torch.compile(lambda x_: ref.decoder_layer(eager_layer, x_, pos, SEQ))
        systems["torch.compile bf16"] = step(eager_layer, lambda: compiled(x))
        for recipe in ("tensorwise", "rowwise"):
            try:
                for name, config in torchao_systems(recipe).items():
                    ao = torchao_layer(bf16_layer, config)
                    ao_names[recipe].append(name)
                    systems[name] = step(ao, lambda c=torch.compile(ao): c(x, pos))
            except Exception as e:  # noqa: BLE001
                log(f"torchao {recipe} unavailable: {e!r}")
    for accum, fast in fp8_baselines.ACCUMULATIONS.items():
        systems[f"FP8 GEMM floor {accum}"] = fp8_floor_fn(layer, attention, fast)
    systems = kept_systems(systems)

    # The FP8 layer against the fp32 eager reference (a few steps first: its delayed scales calibrate).
    for _ in range(3):
        tensorwise_step()
        wgrad_step()
        promoted_step()
    with torch.no_grad():
        out32 = ref.decoder_layer(copy.deepcopy(bf16_layer).float(), x.float(), pos, SEQ)
        err = {}
        for name, out in (("coda fp8", tensorwise_forward(layer)()),
                          ("coda fp8 wgrad", tensorwise_forward(wgrad_layer)()),
                          ("coda fp8 blockwise", fine_forward("blockwise")()),
                          ("coda fp8 blockwise wgrad", fine_forward("blockwise wgrad")()),
                          ("coda fp8 rowwise", fine_forward("rowwise")()),
                          ("coda fp8 rowwise wgrad", fine_forward("rowwise wgrad")()),
                          ("coda fp8 tensorwise_current wgrad", fine_forward("tensorwise_current wgrad")()),
                          *((name, fwd()) for name, fwd in promoted_forward.items())):
            err[name] = ((out.float() - out32).norm() / out32.norm()).item()
        del out, out32

    log(f"fp8 {layer_label(d, f, heads, kv_heads)} {attention}: compiling and warming {list(systems)}")
    ms = time_systems(systems, rounds, per_round)
    mem = {name: peak_gib(fn) for name, fn in systems.items()}
    floor = ms.get(f"FP8 GEMM floor {fp8_baselines.FAST}")  # like-for-like with coda's unpromoted GEMMs

    def over(a, b):  # ms[a] / ms[b], where both ran (--systems may leave either out)
        return f"{ms[a] / ms[b]:.3f}x" if a in ms and b in ms else "n/a"

    rows = []
    for name in systems:
        note = ""
        if name in err:
            recipe = "rowwise" if "rowwise" in name else "blockwise" if "blockwise" in name else "tensorwise"
            baselines = ao_names.get(recipe, [])
            if "promoted" in name:  # like for like: torchao's default config (precise backward GEMMs) first
                baselines = baselines[::-1]
            note = "; ".join([f"rel. error vs fp32 {err[name]:.1e}",
                              *fp8_baselines.speedups(ms, name, baselines),
                              f"{over('coda bf16', name)} coda bf16"])
        elif "floor" not in name:
            note = (f"coda fp8 is {over(name, 'coda fp8')} faster, with FP8 wgrad {over(name, 'coda fp8 wgrad')}, "
                    f"blockwise {over(name, 'coda fp8 blockwise')}, with FP8 wgrad "
                    f"{over(name, 'coda fp8 blockwise wgrad')}, rowwise {over(name, 'coda fp8 rowwise')}, "
                    f"with FP8 wgrad {over(name, 'coda fp8 rowwise wgrad')}")
        rows.append({"bench": "fp8 " + layer_label(d, f, heads, kv_heads), "attention": attention, "system": name,
                     "ms": round(ms[name], 3), "x_floor": round(ms[name] / floor, 3) if floor else "",
                     "tokens_per_s": round(M / ms[name] * 1e3), "peak_GiB": round(mem[name], 2), "note": note})
    add_holds(rows, systems)
    del systems, layer, wgrad_layer, bf16_layer, fine, fine_h, eager_layer, x
    torch.cuda.empty_cache()
    return rows


# --- the whole model step ----------------------------------------------------------------------------------------

class LigerModel(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        from liger_kernel.transformers.fused_linear_cross_entropy import LigerFusedLinearCrossEntropyLoss
        from liger_kernel.transformers.rms_norm import LigerRMSNorm
        self.embed = copy.deepcopy(model.embed)
        self.layers = torch.nn.ModuleList(LigerLayer(layer) for layer in model.layers)
        self.norm = LigerRMSNorm(model.head.norm.shape[0], eps=EPS).to(device="cuda", dtype=torch.bfloat16)
        self.lm_head = torch.nn.Parameter(model.head.weight.detach().clone())
        self.loss = LigerFusedLinearCrossEntropyLoss()

    def forward(self, tokens, labels):
        x = self.embed(tokens).view(-1, self.lm_head.shape[1])
        for layer in self.layers:
            x = layer(x)
        return self.loss(self.lm_head, self.norm(x), labels.reshape(-1))


def model_rows(rounds, attention, skip_compile):
    vocab, d, n_layers, heads, f = 32768, 2048, 8, 16, 8192
    torch.manual_seed(0)
    model = ct.LlamaModel(vocab, d, n_layers, heads, f, eps=EPS, attention=attention, device="cuda")
    tokens = torch.randint(0, vocab, (BATCH, SEQ), device="cuda")
    labels = torch.randint(0, vocab, (BATCH, SEQ), device="cuda")

    eager = copy.deepcopy(model)
    no_logits = copy.deepcopy(model)
    no_logits.head.store_logits = False
    entries = {"coda": (model, lambda: model(tokens, labels)),
               "coda (no logits)": (no_logits, lambda: no_logits(tokens, labels)),
               "torch eager": (eager, lambda: ref.model_loss(eager, tokens, labels))}
    if not skip_compile:
        comp = copy.deepcopy(model)
        comp_fn = torch.compile(lambda t, l: ref.model_loss(comp, t, l))
        entries["torch.compile"] = (comp, lambda: comp_fn(tokens, labels))
        coda_comp = copy.deepcopy(model)
        coda_comp_fn = torch.compile(coda_comp)  # the whole coda model under torch.compile
        entries["coda + torch.compile"] = (coda_comp, lambda: coda_comp_fn(tokens, labels))
    try:
        liger = LigerModel(model)
        entries["Liger"] = (liger, lambda: liger(tokens, labels))
    except Exception as e:  # noqa: BLE001
        log(f"Liger model unavailable: {e!r}")

    systems = {name: adamw_step(*entry) for name, entry in entries.items()}
    graphed = copy.deepcopy(model)
    try:
        systems["coda (CUDA graph)"] = graph_stepper(graphed, lambda: graphed(tokens, labels))
    except Exception:  # noqa: BLE001
        log("coda (CUDA graph): capture FAILED")
        traceback.print_exc()
    log(f"model step ({attention}): compiling and warming {list(systems)}")
    ms = time_systems(systems, rounds, 1, announce="model step")
    mem = {name: peak_gib(fn) for name, fn in systems.items()}
    base = ms.get("torch.compile")
    rows = []
    for name in systems:
        rows.append({"bench": f"model step {n_layers}x d={d} V={vocab} AdamW", "attention": attention,
                     "system": name, "ms": round(ms[name], 3),
                     "x_floor": round(ms[name] / base, 3) if base else "",
                     "tokens_per_s": round(M / ms[name] * 1e3),
                     # A replayed graph allocates nothing: its memory was taken from its pool at capture.
                     "peak_GiB": "" if name == "coda (CUDA graph)" else round(mem[name], 2),
                     "note": "memory held by the graph since capture" if name == "coda (CUDA graph)" else ""})
    return add_holds(rows, systems)


def adamw_step(module, fwd):
    """One training step of `module` (zero_grad, loss = fwd(), backward, fused AdamW) as a function."""
    opt = torch.optim.AdamW(module.parameters(), lr=1e-5, fused=True)

    def run():
        opt.zero_grad(set_to_none=True)
        fwd().backward()
        opt.step()
    return run


def graph_stepper(module, fwd):
    """A whole training step (zero_grad, forward, backward, AdamW) captured once into a CUDA graph and replayed:
    the launch gaps of a step go, as a training loop using torch.cuda.graph has it."""
    opt = torch.optim.AdamW(module.parameters(), lr=1e-5, fused=True, capturable=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture stream: kernels compiled, buffers allocated
        for _ in range(2):
            opt.zero_grad(set_to_none=True)
            fwd().backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        fwd().backward()
        opt.step()
    return graph.replay


def fullgraph_rows():
    """torch.compile(fullgraph=True) of a small coda LlamaModel (4 layers, d = 512, vocab 8192, 4 x 512 tokens):
    it raises on a graph break; the loss and gradients are compared with the same model run eagerly."""
    torch.manual_seed(0)
    vocab, d, n_layers, heads, f, b, s = 8192, 512, 4, 4, 1536, 4, 512
    model = ct.LlamaModel(vocab, d, n_layers, heads, f, eps=EPS, attention="sdpa", device="cuda")
    tokens = torch.randint(0, vocab, (b, s), device="cuda")
    labels = torch.randint(0, vocab, (b, s), device="cuda")
    twin = copy.deepcopy(model)
    start = time.perf_counter()
    try:
        loss_c = torch.compile(twin, fullgraph=True)(tokens, labels)
        loss_c.backward()
        loss_e = model(tokens, labels)
        loss_e.backward()
        grad_err = max(((p.grad.float() - q.grad.float()).norm() / q.grad.float().norm()).item()
                       for p, q in zip(twin.parameters(), model.parameters()))
        note = (f"fullgraph=True compiles (no graph break) in {time.perf_counter() - start:.0f} s; loss "
                f"{loss_c.item():.5f} vs {loss_e.item():.5f} eager coda; max grad rel. diff {grad_err:.1e}")
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        note = f"FAILED: {type(e).__name__}: {str(e)[:200]}"
    return [{"bench": f"torch.compile of a coda model {n_layers}x d={d} V={vocab}", "attention": "sdpa",
             "system": "coda + torch.compile", "ms": "", "x_floor": "", "tokens_per_s": "", "peak_GiB": "",
             "note": note}]


# --- LLaMA-3.2-1B: the whole training step at its real shape ----------------------------------------------------

# Meta's config.json of Llama-3.2-1B, in Hugging Face's LlamaConfig fields: GQA (32 query, 8 KV heads of 64), the
# LLaMA 3.1 RoPE rescaling, and the LM head tied to the embedding.
LLAMA32_1B = dict(
    vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
    num_key_value_heads=8, head_dim=64, max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0,
    rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 8192},
    tie_word_embeddings=True, hidden_act="silu", attention_bias=False, mlp_bias=False, attention_dropout=0.0,
    pretraining_tp=1, initializer_range=0.02)
LLAMA_SEQ = 8192  # the rescaling's original context; batch 2 of it gives the M = 16384 of the other sections


def llama_fields(n_layers=None, **changes):
    """LLAMA32_1B's fields, with n_layers layers (default its 16) and any other fields changed (the CPU tests' tiny
    twin)."""
    fields = {**LLAMA32_1B, "rope_scaling": dict(LLAMA32_1B["rope_scaling"]), **changes}
    if n_layers is not None:
        fields["num_hidden_layers"] = n_layers
    return fields


def llama_label(fields, batch, seq):
    layers = fields["num_hidden_layers"]
    shrunk = "" if layers == LLAMA32_1B["num_hidden_layers"] else f" (of {LLAMA32_1B['num_hidden_layers']})"
    return (f"llama3.2-1b step {layers}{shrunk} layers d={fields['hidden_size']} V={fields['vocab_size']} "
            f"b={batch}x{seq} AdamW")


def hf_llama(fields, device, dtype=torch.bfloat16):
    """Hugging Face's LlamaForCausalLM with these fields (SDPA attention, no KV cache), initialized in `dtype` on
    `device`; (None, why) when transformers is not importable."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the device has no network: nothing may wait on the Hub
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as e:
        return None, f"transformers is not importable ({e})"
    config = LlamaConfig(**fields, use_cache=False, attn_implementation="sdpa")
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # built in dtype at once: no f32 copy of the weights on the way
    try:
        with torch.device(device):
            return LlamaForCausalLM(config), ""
    finally:
        torch.set_default_dtype(default)


def llama_models(fields, device, dtype=torch.bfloat16):
    """(Hugging Face's model or None, why not, coda's model with the same weights). coda's follows Hugging Face's
    loss (labels are the input ids, scored one position ahead) and keeps no logits: at V = 128256 they would be
    M x V bf16, 4 GiB at M = 16384. Without transformers coda's model is built from the same fields."""
    hf, why = hf_llama(fields, device, dtype)
    source = hf if hf is not None else types.SimpleNamespace(**fields)
    return hf, why, ct.from_hf(source, device=device, dtype=dtype, store_logits=False)


def remember_first_loss(fwd, losses, name):
    """fwd, which also keeps its first loss (at the starting weights, the same for every system) in losses[name]."""
    def run():
        loss = fwd()
        losses.setdefault(name, loss.detach())
        return loss
    return run


def llama_rows(rounds, skip_compile, batch, n_layers):
    """A training step (forward, loss, backward, fused AdamW) of LLaMA-3.2-1B's architecture on batch x 8192
    tokens: coda eager and replayed as a CUDA graph, torch.compile of the same model in eager PyTorch
    (reference.model_loss), and torch.compile of Hugging Face's LlamaForCausalLM, all from the same weights."""
    fields = llama_fields(n_layers)
    label = llama_label(fields, batch, LLAMA_SEQ)
    torch.manual_seed(0)
    hf, why, model = llama_models(fields, "cuda")
    tokens = torch.randint(0, fields["vocab_size"], (batch, LLAMA_SEQ), device="cuda")
    start = time.perf_counter()
    try:
        ct.warm(model, batch, LLAMA_SEQ)
        log(f"{label}: coda kernels built in {time.perf_counter() - start:.0f} s")
    except Exception:  # noqa: BLE001
        log(f"{label}: coda.torch.warm FAILED (the first step compiles instead)")
        traceback.print_exc()

    losses = {}
    entries = {"coda": (model, lambda: model(tokens, tokens))}
    if not skip_compile:
        comp = copy.deepcopy(model)
        comp_fn = torch.compile(lambda t: ref.model_loss(comp, t, t))
        entries["torch.compile"] = (comp, lambda: comp_fn(tokens))
        if hf is not None:
            hf_fn = torch.compile(hf)
            entries["HF Llama + torch.compile"] = (hf, lambda: hf_fn(input_ids=tokens, labels=tokens).loss)
    systems = {name: adamw_step(module, remember_first_loss(fwd, losses, name))
               for name, (module, fwd) in entries.items()}
    graphed = copy.deepcopy(model)
    try:
        systems["coda (CUDA graph)"] = graph_stepper(
            graphed, remember_first_loss(lambda: graphed(tokens, tokens), losses, "coda (CUDA graph)"))
    except Exception:  # noqa: BLE001
        log(f"{label}: coda (CUDA graph) capture FAILED")
        traceback.print_exc()
    log(f"{label}: compiling and warming {list(systems)}")
    ms = time_systems(systems, rounds, 1, announce=label)
    mem = {name: peak_gib(fn) for name, fn in systems.items()}
    base, hf_ms = ms.get("torch.compile"), ms.get("HF Llama + torch.compile")
    tokens_per_step = batch * LLAMA_SEQ
    rows = []
    for name in systems:
        graphed_row = name == "coda (CUDA graph)"
        note = [f"first loss {losses[name].item():.4f}"] if name in losses else []
        if hf_ms and not name.startswith("HF"):
            note.append(f"{ms[name] / hf_ms:.3f}x HF")
        if name.startswith("coda"):
            note.append("no logits stored")
        if graphed_row:
            note.append("memory held by the graph since capture")
        rows.append({"bench": label, "attention": "sdpa", "system": name, "ms": round(ms[name], 3),
                     "x_floor": round(ms[name] / base, 3) if base else "",
                     "tokens_per_s": round(tokens_per_step / ms[name] * 1e3),
                     "peak_GiB": "" if graphed_row else round(mem[name], 2), "note": "; ".join(note)})
    add_holds(rows, systems)
    if hf is None:
        log(f"{label}: HF Llama + torch.compile SKIPPED: {why}")
        rows.append({"bench": label, "attention": "sdpa", "system": "HF Llama + torch.compile", "ms": "",
                     "x_floor": "", "tokens_per_s": "", "peak_GiB": "", "note": f"SKIPPED: {why}"})
    return rows


# coda's FP8 recipes in the model step: tensorwise and rowwise with FP8 weight gradients too, as torchao's recipes of
# those names have them; blockwise (DeepSeek-V3's scales), whose layer keeps bf16 weight gradients and which torchao's
# float8 training has no recipe for, beside Hugging Face's model in bf16 under torch.compile.
LLAMA_FP8_RECIPES = ("tensorwise", "rowwise", "blockwise")


def llama_fp8_wgrad(recipe):
    """Whether coda's model in `recipe` computes its weight gradients in FP8 here."""
    return recipe != "blockwise"


def llama_fp8_model(source, recipe, device, dtype=torch.bfloat16):
    """coda's LLaMA model in FP8 recipe `recipe` (FP8 weight gradients where llama_fp8_wgrad says), from `source`
    (Hugging Face's model, or its fields), no logits stored, like llama_models' bf16 one."""
    return ct.from_hf(source, device=device, dtype=dtype, store_logits=False, fp8=recipe,
                      fp8_wgrad=llama_fp8_wgrad(recipe))


LIGER_LLAMA = "HF Llama + Liger FLCE + compile"


def torchao_hf(hf, config):
    """A copy of Hugging Face's model with torchao's float8 training (convert_to_float8_training) in `config`
    (fp8_baselines.torchao_configs) on every linear layer but the LM head, which coda's FP8 models keep in bf16 too."""
    from torchao.float8 import convert_to_float8_training
    model = copy.deepcopy(hf)
    convert_to_float8_training(model, config=config, module_filter_fn=lambda module, fqn: fqn != "lm_head")
    return model


def hf_compiled(model):
    """(model, loss(tokens)) of a Hugging Face causal LM under torch.compile, with its own loss (its logits stored)."""
    fn = torch.compile(model)
    return model, lambda tokens: fn(input_ids=tokens, labels=tokens).loss


def llama_fp8_baselines(hf, recipe):
    """{name: (model, loss(tokens))} of the step's FP8 baselines for `recipe`, each a copy of Hugging Face's model under
    torch.compile: with torchao's float8 training of that recipe in each accumulation, the like-for-like one (fast)
    first, or for blockwise, which torchao has no recipe for, in bf16. Those --systems leaves out are not built."""
    if recipe == "blockwise":
        configs = {"HF Llama + torch.compile bf16": None}
    else:
        configs = torchao_systems(recipe, "HF Llama + ")
    return {name: hf_compiled(copy.deepcopy(hf) if config is None else torchao_hf(hf, config))
            for name, config in configs.items() if kept(name)}


def liger_llama_loss(decoder, head_weight):
    """loss(tokens) of a Hugging Face LLaMA's decoder (its LlamaModel) and LM head weight through Liger's fused
    linear cross-entropy: Hugging Face's loss (labels are the input ids, scored one position ahead), no logits
    stored."""
    from liger_kernel.transformers.fused_linear_cross_entropy import LigerFusedLinearCrossEntropyLoss
    loss = LigerFusedLinearCrossEntropyLoss()

    def run(tokens):
        h = decoder(input_ids=tokens).last_hidden_state
        labels = F.pad(tokens[:, 1:], (0, 1), value=-100)  # -100, both libraries' ignore_index: the last position
        return loss(head_weight, h.reshape(-1, h.shape[-1]), labels.reshape(-1))
    return run


def hf_liger(hf):
    """{LIGER_LLAMA: (model, loss(tokens))}, a copy of Hugging Face's model in bf16 with liger_llama_loss, its decoder
    under torch.compile (Liger's loss is Triton kernels already): the baseline without Hugging Face's materialized
    128256-wide logits, which are no FP8 recipe's doing. Empty where --systems leaves it out."""
    if not kept(LIGER_LLAMA):
        return {}
    model = copy.deepcopy(hf)
    return {LIGER_LLAMA: (model, liger_llama_loss(torch.compile(model.model), model.lm_head.weight))}


def llama_fp8_rows(rounds, batch, n_layers, recipes=LLAMA_FP8_RECIPES):
    """The llama3.2-1b step in FP8: coda's model in each FP8 recipe against Hugging Face's LlamaForCausalLM under
    torchao's float8 training of the same recipe + torch.compile in both accumulations (block-wise: in bf16 +
    torch.compile; llama_fp8_baselines), against coda bf16, and against Hugging Face's with Liger's fused linear
    cross-entropy (hf_liger), all from the same weights (AdamW on the bf16 weights); a coda FP8 row's note gives its
    gains in that order. One recipe at a time: its systems are built, timed against each other and freed before the
    next recipe's (six 1.2B-parameter models with AdamW states and a 128256-wide loss do not fit an 80 GB GPU at once;
    a group has five at most, --systems leaves some out). coda bf16 is in every group, so each group's ratios are from
    one interleaved run; HF + torch.compile in bf16 is the "llama3.2-1b step" section's."""
    fields = llama_fields(n_layers)
    label = llama_label(fields, batch, LLAMA_SEQ).replace("step", "fp8 step", 1)
    torch.manual_seed(0)
    hf, why, model = llama_models(fields, "cuda")
    source = hf if hf is not None else types.SimpleNamespace(**fields)
    tokens = torch.randint(0, fields["vocab_size"], (batch, LLAMA_SEQ), device="cuda")
    tokens_per_step = batch * LLAMA_SEQ
    rows = []
    for recipe in recipes:
        losses = {}
        coda_fp8 = llama_fp8_model(source, recipe, "cuda")
        coda_name = f"coda fp8 {recipe}" + (" wgrad" if llama_fp8_wgrad(recipe) else "")
        entries = {"coda bf16": (model, lambda: model(tokens, tokens)),
                   coda_name: (coda_fp8, lambda: coda_fp8(tokens, tokens))}
        baselines = {}  # name -> (model, loss(tokens))
        if hf is not None:
            for build in (lambda: llama_fp8_baselines(hf, recipe), lambda: hf_liger(hf)):
                try:
                    baselines.update(build())
                except Exception as e:  # noqa: BLE001
                    log(f"{label} ({recipe}): a baseline is unavailable: {e!r}")
        entries.update({name: (module, lambda loss=loss: loss(tokens)) for name, (module, loss) in baselines.items()})
        # The order of a coda FP8 row's gains: the FP8 baselines, the like-for-like one first, then the bf16 ones.
        gains = [name for name in baselines if name != LIGER_LLAMA] + ["coda bf16", LIGER_LLAMA]
        systems = {name: adamw_step(module, remember_first_loss(fwd, losses, name))
                   for name, (module, fwd) in entries.items()}
        log(f"{label} ({recipe}): compiling and warming {list(systems)}")
        ms = time_systems(systems, rounds, 1, announce=f"{label} ({recipe})")
        # Each group's times as soon as they are in (a step limit that stops a later group loses only that one).
        log(f"{label} ({recipe}): " + ", ".join(f"{name} {t:.3f} ms" for name, t in ms.items()))
        mem = {name: peak_gib(fn) for name, fn in systems.items()}
        group = []
        for name in systems:
            note = [f"{recipe} group", f"first loss {losses[name].item():.4f}"] if name in losses else [f"{recipe} group"]
            if name == "coda bf16" and recipe != recipes[0]:
                # One bf16 model for every group: the groups before this one stepped it, so its loss is no first one.
                note = [f"{recipe} group", "bf16 weights stepped by the groups before"]
            if name.startswith("coda fp8"):
                note += fp8_baselines.speedups(ms, name, gains)
            group.append({"bench": label, "attention": "sdpa", "system": name, "ms": round(ms[name], 3),
                          "x_floor": "", "tokens_per_s": round(tokens_per_step / ms[name] * 1e3),
                          "peak_GiB": round(mem[name], 2), "note": "; ".join(note)})
        add_holds(group, systems)
        rows += group
        # Free the group (its models, optimizer states and compiled graphs) before the next one is built.
        for module, _ in entries.values():
            for param in module.parameters():
                param.grad = None
        del systems, entries, baselines, coda_fp8, module  # module: the loop's last model
        torch._dynamo.reset()
        gc.collect()
        torch.cuda.empty_cache()
    if hf is None:
        rows.append({"bench": label, "attention": "sdpa", "system": "HF Llama + torchao", "ms": "", "x_floor": "",
                     "tokens_per_s": "", "peak_GiB": "", "note": f"SKIPPED: {why}"})
    return rows


def select_sections(sections, only):
    """The (name, run) sections whose name contains one of the texts in `only` (all of them when it is empty)."""
    return [(name, run) for name, run in sections if not only or any(text in name for text in only)]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--per-round", type=int, default=3)
    p.add_argument("--skip-compile", action="store_true", help="leave out the torch.compile baselines (faster)")
    p.add_argument("--budget-s", type=float, default=270, help="start no section after this many seconds")
    p.add_argument("--only", nargs="+", default=[], metavar="TEXT",
                   help="run only the sections whose name contains one of these (e.g. 'layer d=2048' 'model' "
                        "'llama3.2-1b step')")
    p.add_argument("--llama-batch", type=int, default=2,
                   help="sequences of 8192 tokens in the llama3.2-1b step (default 2: M = 16384, as the others)")
    p.add_argument("--llama-layers", type=int, default=LLAMA32_1B["num_hidden_layers"],
                   help="layers of the llama3.2-1b step (default its 16; fewer if memory runs out, said in the row)")
    p.add_argument("--fp8", action="store_true",
                   help="the FP8 sections instead (fp8 layer d=2048 / d=4096, each attention: coda's "
                        "fp8='tensorwise', 'blockwise' and 'rowwise' layers against coda bf16, torch.compile bf16, "
                        "torchao float8 + compile; 'llama3.2-1b fp8 step': coda's FP8 model against Hugging Face's "
                        "under torchao + compile, block-wise against Hugging Face's in bf16 + compile, each also "
                        "against coda bf16 and Hugging Face's + Liger's fused linear cross-entropy; torch._scaled_mm "
                        "and torchao each in fast and in precise accumulation)")
    p.add_argument("--llama-recipes", nargs="+", default=list(LLAMA_FP8_RECIPES), choices=LLAMA_FP8_RECIPES,
                   help="the FP8 recipes of the 'llama3.2-1b fp8 step', one group each (default all three)")
    p.add_argument("--hold-s", type=float, default=0.0,
                   help="also run each system alone this many seconds, with nvidia-smi sampling clock and power: "
                        "its sustained ms per step, MHz, W and joules per step (default 0: off)")
    p.add_argument("--systems", nargs="+", default=[], metavar="TEXT",
                   help="in the FP8 layer sections, time only the systems whose name contains one of these (e.g. "
                        "'coda fp8 wgrad' 'torchao tensorwise'): an A/B of two builds in one call; in the 'llama3.2-1b "
                        "fp8 step', build only the baselines named so (e.g. 'fast accum' 'Liger'; coda's always run)")
    args = p.parse_args()
    global HOLD_S, SYSTEMS
    HOLD_S = args.hold_s
    SYSTEMS = args.systems
    os.makedirs(args.out, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch._dynamo.config.cache_size_limit = 64

    # Most important first; a section that would start after --budget-s is left out (and says so).
    # (The attention-free layers first, as before: stable in the sizes' order.)
    sections = [(name, lambda d=d, f=f, h=h, kv=kv, att=att: layer_rows(
                    d, f, h, att, args.rounds, args.per_round, args.skip_compile, kv))
                for name, d, f, h, kv, att in sorted(layer_sections(LAYER_SIZES), key=lambda s: s[5] != "none")]
    sections.append(("model step", lambda: model_rows(max(3, args.rounds // 2), "sdpa", args.skip_compile)))
    sections.append(("torch.compile fullgraph", fullgraph_rows))
    sections.append(("llama3.2-1b step", lambda: llama_rows(max(3, args.rounds // 2), args.skip_compile,
                                                            args.llama_batch, args.llama_layers)))
    if args.fp8:
        sections = [("fp8 " + name, lambda d=d, f=f, h=h, kv=kv, att=att: fp8_layer_rows(
                        d, f, h, att, args.rounds, args.per_round, args.skip_compile, kv))
                    for name, d, f, h, kv, att in layer_sections(LAYER_SIZES)]
        sections.append(("llama3.2-1b fp8 step", lambda: llama_fp8_rows(max(3, args.rounds // 2), args.llama_batch,
                                                                        args.llama_layers, args.llama_recipes)))
    sections = select_sections(sections, args.only)
    rows = []
    for name, run in sections:
        if time.perf_counter() - START > args.budget_s:
            log(f"SKIPPED {name}: past the {args.budget_s} s budget")
            continue
        try:
            new_rows = run()
            rows += new_rows
            print_rows(new_rows)
        except Exception:  # noqa: BLE001
            log(f"FAILED {name}")
            traceback.print_exc()
        torch.cuda.empty_cache()

    print()
    print_rows(rows)
    keys = ["bench", "attention", "system", "ms", "x_floor", "tokens_per_s", "peak_GiB", "alone_ms", "MHz", "W", "J",
            "note"]
    with open(os.path.join(args.out, "bench_block.csv"), "w", newline="") as fcsv:
        w = csv.DictWriter(fcsv, keys, restval="")
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(args.out, "bench_block.md"), "w") as fmd:
        fmd.write("| " + " | ".join(keys) + " |\n|" + "---|" * len(keys) + "\n")
        for r in rows:
            fmd.write("| " + " | ".join(str(r.get(k, "")) for k in keys) + " |\n")
    log("done; x_floor: layer rows against the cuBLAS GEMM floor, model rows against torch.compile")


def print_rows(rows):
    def num(value, fmt):  # rows without a timing (the fullgraph check) leave these empty
        return format(value, fmt) if isinstance(value, (int, float)) else str(value)

    def held(r):  # --hold-s: the system alone
        if "alone_ms" not in r:
            return ""
        return (f"alone {num(r['alone_ms'], '.3f')} ms {num(r.get('MHz'), '.0f')} MHz {num(r.get('W'), '.0f')} W "
                f"{num(r.get('J'), '.3f')} J  ")
    for r in rows:
        print(f"{r['bench']:<36} {r['attention']:<5} {r['system']:<26} {num(r['ms'], '>9.3f')} ms  "
              f"{str(r['x_floor']):>6}x  {r['tokens_per_s']:>10} tok/s  {num(r['peak_GiB'], '>7.2f')} GiB  "
              f"{held(r)}{r['note']}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
