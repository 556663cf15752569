"""Eager PyTorch versions of everything coda.torch computes, with the same conventions (interleaved gate/up rows,
RoPE over adjacent column pairs, theta = 0 for V): the reference of the tests and the eager and torch.compile
baselines of the benchmark."""
import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor


def rms_norm(x: Tensor, gamma: Tensor, eps: float) -> Tensor:
    xf = x.float() if x.dtype != torch.float64 else x
    out = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return out.to(x.dtype) * gamma


def rope(t: Tensor, pos: Tensor, theta: Tensor) -> Tensor:
    """Rotates each column pair (2j, 2j+1) of t [M x N] by pos_i * theta_j."""
    angle = pos.to(theta.dtype)[:, None] * theta[None, :]
    c, s = torch.cos(angle).to(t.dtype), torch.sin(angle).to(t.dtype)
    e, o = t[:, 0::2], t[:, 1::2]
    return torch.stack((e * c - o * s, e * s + o * c), dim=-1).flatten(-2)


def swiglu(z: Tensor) -> Tensor:
    return F.silu(z[:, 0::2]) * z[:, 1::2]


def rope_frequencies(head_dim: int, base: float = 10000.0, rope_scaling: Optional[dict] = None) -> Tensor:
    """The rotation frequency of each column pair of one head (float64, head_dim / 2 of them): base^(-2j / head_dim),
    rescaled as LLaMA 3.1 defines it when rope_scaling = {"rope_type": "llama3", "factor", "low_freq_factor",
    "high_freq_factor", "original_max_position_embeddings"} (Hugging Face's config form). Wavelengths shorter than
    original / high_freq_factor keep their frequency, those longer than original / low_freq_factor are divided by
    factor, and the band between blends the two linearly in original / wavelength."""
    freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    if rope_scaling is None:
        return freq
    kind = rope_scaling.get("rope_type", rope_scaling.get("type"))
    if kind == "default":
        return freq
    if kind != "llama3":
        raise ValueError(f"coda.torch: rope_scaling type {kind!r} is not supported (only 'llama3' and 'default')")
    factor = float(rope_scaling["factor"])
    low, high = float(rope_scaling["low_freq_factor"]), float(rope_scaling["high_freq_factor"])
    original = float(rope_scaling["original_max_position_embeddings"])
    if not (factor > 0 and 0 < low < high and original > 0):
        raise ValueError(f"coda.torch: invalid llama3 rope_scaling {rope_scaling}")
    wavelength = 2 * math.pi / freq
    blend = ((original / wavelength - low) / (high - low)).clamp(0.0, 1.0)
    scaled = (1 - blend) * freq / factor + blend * freq
    scaled = torch.where(wavelength < original / high, freq, scaled)
    return torch.where(wavelength > original / low, freq / factor, scaled)


def rope_theta(d: int, n_heads: int, base: float = 10000.0, device=None, n_kv_heads: Optional[int] = None,
               rope_scaling: Optional[dict] = None, head_dim: Optional[int] = None) -> Tensor:
    """theta per column pair of the fused QKV output [n_heads * hd + 2 * n_kv_heads * hd]: Q and K pairs by their
    index in the head (rope_frequencies), V: 0 (no rotation). hd = head_dim, or d / n_heads."""
    hd = head_dim or d // n_heads
    n_kv = n_kv_heads or n_heads
    per_head = rope_frequencies(hd, base, rope_scaling)
    zeros = torch.zeros(n_kv * hd // 2, dtype=torch.float64)
    return torch.cat((per_head.repeat(n_heads), per_head.repeat(n_kv), zeros)).to(torch.float32).to(device)


def attend(qkv: Tensor, n_heads: int, seq_len: int, attention: str = "sdpa", n_kv_heads: Optional[int] = None,
           head_dim: Optional[int] = None) -> Tensor:
    """Causal attention over a fused [M x (n_heads + 2 n_kv_heads) hd] QKV (heads contiguous in each of Q, K, V;
    query head i reads KV head i // (n_heads / n_kv_heads)); "none" is the attention-free stand-in
    v + 0 * (q + k) that keeps the GEMMs and the data flow (n_kv_heads = n_heads only)."""
    m, n = qkv.shape
    n_kv = n_kv_heads or n_heads
    hd = head_dim or n // (n_heads + 2 * n_kv)
    b = m // seq_len
    q = qkv[:, :n_heads * hd].view(b, seq_len, n_heads, hd)
    k, v = qkv[:, n_heads * hd:].view(b, seq_len, 2, n_kv, hd).unbind(2)
    if attention == "none":
        return (v + 0 * (q + k)).reshape(m, n_heads * hd)
    o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True,
                                       enable_gqa=n_kv != n_heads)
    return o.transpose(1, 2).reshape(m, n_heads * hd)


def decoder_layer(layer, x: Tensor, pos: Tensor, seq_len: int) -> Tensor:
    """One coda.torch.LlamaDecoderLayer's forward in eager PyTorch, from its own parameters."""
    qkv = rope(rms_norm(x, layer.attn_norm, layer.eps) @ layer.w_qkv.t(), pos, layer.theta)
    x1 = x + attend(qkv, layer.n_heads, seq_len, layer.attention, layer.n_kv_heads, layer.head_dim) @ layer.w_o.t()
    z = rms_norm(x1, layer.mlp_norm, layer.eps) @ layer.w_gate_up.t()
    return x1 + swiglu(z) @ layer.w_down.t()


def model_loss(model, tokens: Tensor, labels: Tensor) -> Tensor:
    """coda.torch.LlamaModel's loss in eager PyTorch, from its own parameters."""
    b, s = tokens.shape
    x = model.embed(tokens).view(b * s, -1)
    pos = model.positions(b, s, tokens.device)
    for layer in model.layers:
        x = decoder_layer(layer, x, pos, s)
    logits = rms_norm(x, model.norm, model.eps) @ model.lm_head.t()
    ignore = {} if model.ignore_index is None else {"ignore_index": model.ignore_index}
    return F.cross_entropy(logits if logits.dtype == torch.float64 else logits.float(), model.targets(labels), **ignore)


# ---------------------------------------------------------------------------------------------------------
# FP8 (coda.torch.fp8's "tensorwise" recipe) emulated in the activations' dtype, for the FP8 layer's tests: every
# GEMM operand rounded to its FP8 format under the scales the layer used, the rest as decoder_layer.

_FP8 = {"e4m3": (torch.float8_e4m3fn, 448.0), "e5m2": (torch.float8_e5m2, 57344.0)}


def fp8_round(t: Tensor, scale: float, inv_scale: float, fmt: str) -> Tensor:
    """t as an FP8 GEMM sees it: t * inv_scale rounded to `fmt` (saturating at its largest), times scale."""
    dtype, largest = _FP8[fmt]
    return (t * inv_scale).clamp(-largest, largest).to(dtype).to(t.dtype) * scale


def fp8_weight_scales(w: Tensor) -> tuple[float, float]:
    """(scale, inv_scale) of a weight under dynamic scaling, in f32 as coda.torch.fp8.quantize_weight has them."""
    amax = w.detach().abs().amax().to(torch.float32).clamp_min(1e-30)
    return float(amax / 448.0), float(448.0 / amax)


class _Fp8Gemm(torch.autograd.Function):
    """rows * (fp8(source) @ fp8(w)^T) in the forward, where `a` is what source stands for in the backward (source =
    a, or rms_norm's input times gamma where rows = rstd); the backward as the recipe: da = fp8(dy, e5m2) @ fp8(w),
    dw = dy^T a in full precision, or with wgrad_scales (FP8 weight gradients) fp8(dy, e5m2)^T fp8(a, e4m3) under
    wgrad_scales."""

    @staticmethod
    def forward(ctx, a, source, w, rows, a_scales, g_scales, wgrad_scales=None):
        w_scales = fp8_weight_scales(w)
        w_q = fp8_round(w.detach(), *w_scales, "e4m3")
        y = fp8_round(source.detach(), *a_scales, "e4m3") @ w_q.t()
        if rows is not None:
            y = rows[:, None] * y
        ctx.save_for_backward(a, w_q)
        ctx.g_scales, ctx.wgrad_scales = g_scales, wgrad_scales
        return y

    @staticmethod
    def backward(ctx, dy):
        a, w_q = ctx.saved_tensors
        dy_q = fp8_round(dy, *ctx.g_scales, "e5m2")
        if ctx.wgrad_scales is None:
            dw = dy.t() @ a
        else:
            dw = dy_q.t() @ fp8_round(a.detach(), *ctx.wgrad_scales, "e4m3")
        return dy_q @ w_q, None, dw, None, None, None, None


def fp8_decoder_layer(layer, x: Tensor, pos: Tensor, seq_len: int, h_scales: tuple[float, float],
                      scales: dict, fp8_wgrad: bool = False) -> Tensor:
    """An FP8 LlamaDecoderLayer's forward (and, through autograd, backward) in eager PyTorch: h_scales = (scale,
    inv_scale) of its input h, scales = {slot: (scale, inv_scale)} of ops_fp8_layer.SLOTS as the layer used them.
    fp8_wgrad: the weight gradients in FP8 too, each activation under its slot's scale (o_qkv and o_mlp: the
    normalized inputs of QKV and gate/up)."""
    def wgrad(slot):
        return scales[slot] if fp8_wgrad else None

    def normed(t, gamma):
        rstd = torch.rsqrt(t.pow(2).mean(-1) + layer.eps)
        return t * rstd[:, None] * gamma, (t * gamma).detach(), rstd.detach()

    u, h, rstd = normed(x, layer.attn_norm)
    qkv = rope(_Fp8Gemm.apply(u, h, layer.w_qkv, rstd, h_scales, scales["dz_qkv"], wgrad("o_qkv")), pos, layer.theta)
    a = attend(qkv, layer.n_heads, seq_len, layer.attention, layer.n_kv_heads, layer.head_dim)
    x1 = x + _Fp8Gemm.apply(a, a, layer.w_o, None, scales["attn_out"], scales["dx1"], wgrad("attn_out"))
    u1, h1, rstd1 = normed(x1, layer.mlp_norm)
    y = swiglu(_Fp8Gemm.apply(u1, h1, layer.w_gate_up, rstd1, scales["h_mlp"], scales["dz_mlp"], wgrad("o_mlp")))
    return x1 + _Fp8Gemm.apply(y, y, layer.w_down, None, scales["y"], scales["dx2"], wgrad("y"))


# ---------------------------------------------------------------------------------------------------------
# Block-wise FP8 (coda.torch.fp8's "blockwise" recipe) emulated the same way: each operand rounded to e4m3 under the
# scales of its own blocks, 1 x `group` for activations and gradients, 128 x 128 for weights.

_BLOCK, _SMALLEST_SCALE = 128, 2.0 ** -126


def _block_round(blocks: Tensor, amax_dims) -> Tensor:
    # Each block divided by max(its amax / 448, the smallest normal f32), rounded to e4m3, multiplied back.
    scale = (blocks.abs().amax(dim=amax_dims, keepdim=True) / 448.0).clamp_min(_SMALLEST_SCALE)
    return (blocks / scale).to(torch.float8_e4m3fn).to(blocks.dtype) * scale


def fp8_group_round(t: Tensor, group: int = _BLOCK) -> Tensor:
    """t [M x N] as a block-scaled GEMM sees its A: each row's group of `group` columns under its own scale."""
    m, n = t.shape
    g = -(-n // group)
    padded = F.pad(t, (0, g * group - n)).view(m, g, group)
    return _block_round(padded, -1).view(m, g * group)[:, :n]


def fp8_weight_block_round(w: Tensor) -> Tensor:
    """w [N x K] as a block-scaled GEMM sees its B: each 128 x 128 block under its own scale."""
    n, k = w.shape
    nb, kb = -(-n // _BLOCK), -(-k // _BLOCK)
    padded = F.pad(w, (0, kb * _BLOCK - k, 0, nb * _BLOCK - n)).view(nb, _BLOCK, kb, _BLOCK)
    return _block_round(padded, (1, 3)).view(nb * _BLOCK, kb * _BLOCK)[:n, :k]


class _Fp8BlockGemm(torch.autograd.Function):
    """_Fp8Gemm with block-wise scales: forward rows * (q(source) @ q(w)^T); backward da = q(dy) @ q(w), with dy's
    groups `grad_group` columns wide, and dw = dy^T a in full precision or, with fp8_wgrad, q(dy^T) @ q(a^T)^T (both
    in groups of 128 tokens)."""

    @staticmethod
    def forward(ctx, a, source, w, rows, grad_group, fp8_wgrad=False):
        w_q = fp8_weight_block_round(w.detach())
        y = fp8_group_round(source.detach()) @ w_q.t()
        if rows is not None:
            y = rows[:, None] * y
        ctx.save_for_backward(a, w_q)
        ctx.grad_group, ctx.fp8_wgrad = grad_group, fp8_wgrad
        return y

    @staticmethod
    def backward(ctx, dy):
        a, w_q = ctx.saved_tensors
        if ctx.fp8_wgrad:
            dw = fp8_group_round(dy.t()) @ fp8_group_round(a.detach().t()).t()
        else:
            dw = dy.t() @ a
        return fp8_group_round(dy, ctx.grad_group) @ w_q, None, dw, None, None, None


def fp8_blockwise_decoder_layer(layer, x: Tensor, pos: Tensor, seq_len: int, fp8_wgrad: bool = False) -> Tensor:
    """A block-wise FP8 LlamaDecoderLayer's forward (and, through autograd, backward) in eager PyTorch; fp8_wgrad: its
    weight gradients in FP8 too. SwiGLU's gradient dz is interleaved gate/up, as its epilogue writes it two GEMM
    columns at a time: its groups are 256 of its columns."""
    def normed(t, gamma):
        rstd = torch.rsqrt(t.pow(2).mean(-1) + layer.eps)
        return t * rstd[:, None] * gamma, (t * gamma).detach(), rstd.detach()

    u, h, rstd = normed(x, layer.attn_norm)
    qkv = rope(_Fp8BlockGemm.apply(u, h, layer.w_qkv, rstd, _BLOCK, fp8_wgrad), pos, layer.theta)
    a = attend(qkv, layer.n_heads, seq_len, layer.attention, layer.n_kv_heads, layer.head_dim)
    x1 = x + _Fp8BlockGemm.apply(a, a, layer.w_o, None, _BLOCK, fp8_wgrad)
    u1, h1, rstd1 = normed(x1, layer.mlp_norm)
    y = swiglu(_Fp8BlockGemm.apply(u1, h1, layer.w_gate_up, rstd1, 2 * _BLOCK, fp8_wgrad))
    return x1 + _Fp8BlockGemm.apply(y, y, layer.w_down, None, _BLOCK, fp8_wgrad)


# ---------------------------------------------------------------------------------------------------------
# Row-wise FP8 (coda.torch.fp8's "rowwise" recipe): activations and gradients under a scale per row, weights per
# output channel (row) in the forward and per input channel (column) in the dgrads.

class _Fp8RowGemm(torch.autograd.Function):
    """_Fp8Gemm with row-wise scales: forward rows * (q_rows(source) @ q_rows(w)^T); backward da = q_rows(dy) @
    q_columns(w), dw = dy^T a in full precision or, with fp8_wgrad, q_columns(dy)^T q_columns(a) (a scale per
    channel over the tokens)."""

    @staticmethod
    def forward(ctx, a, source, w, rows, fp8_wgrad):
        y = _block_round(source.detach(), 1) @ _block_round(w.detach(), 1).t()
        if rows is not None:
            y = rows[:, None] * y
        ctx.save_for_backward(a, _block_round(w.detach(), 0))
        ctx.fp8_wgrad = fp8_wgrad
        return y

    @staticmethod
    def backward(ctx, dy):
        a, w_q = ctx.saved_tensors
        dw = _block_round(dy, 0).t() @ _block_round(a.detach(), 0) if ctx.fp8_wgrad else dy.t() @ a
        return _block_round(dy, 1) @ w_q, None, dw, None, None


def fp8_row_round(t: Tensor) -> Tensor:
    """t [M x N] as a row-wise FP8 GEMM sees its A: each row under its own scale."""
    return _block_round(t, 1)


def fp8_rowwise_decoder_layer(layer, x: Tensor, pos: Tensor, seq_len: int, fp8_wgrad: bool = False) -> Tensor:
    """A row-wise FP8 LlamaDecoderLayer's forward (and, through autograd, backward) in eager PyTorch; fp8_wgrad: its
    weight gradients in FP8 too."""
    def normed(t, gamma):
        rstd = torch.rsqrt(t.pow(2).mean(-1) + layer.eps)
        return t * rstd[:, None] * gamma, (t * gamma).detach(), rstd.detach()

    u, h, rstd = normed(x, layer.attn_norm)
    qkv = rope(_Fp8RowGemm.apply(u, h, layer.w_qkv, rstd, fp8_wgrad), pos, layer.theta)
    a = attend(qkv, layer.n_heads, seq_len, layer.attention, layer.n_kv_heads, layer.head_dim)
    x1 = x + _Fp8RowGemm.apply(a, a, layer.w_o, None, fp8_wgrad)
    u1, h1, rstd1 = normed(x1, layer.mlp_norm)
    y = swiglu(_Fp8RowGemm.apply(u1, h1, layer.w_gate_up, rstd1, fp8_wgrad))
    return x1 + _Fp8RowGemm.apply(y, y, layer.w_down, None, fp8_wgrad)
