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


class _Emulated(torch.autograd.Function):
    """rows * (q(source) @ q(w)^T) in the forward, where `a` is what source stands for in the backward (source = a,
    or rms_norm's input times gamma where rows = rstd); the backward as the recipe has it: da = q(dy) @ q'(w), and
    dw = dy^T a in full precision or, where the emulation has FP8 weight gradients, in FP8. Each q is the
    emulation's (a recipe's policy), for the GEMM named by `gemm` (qkv, o, gate_up or down)."""

    @staticmethod
    def forward(ctx, a, source, w, rows, emulation, gemm):
        w_forward, w_dgrad = emulation.weight(w.detach())
        y = emulation.activation(source.detach(), gemm) @ w_forward.t()
        if rows is not None:
            y = rows[:, None] * y
        ctx.save_for_backward(a, w_dgrad)
        ctx.emulation, ctx.gemm = emulation, gemm
        return y

    @staticmethod
    def backward(ctx, dy):
        a, w_dgrad = ctx.saved_tensors
        em = ctx.emulation
        dy_q = em.gradient(dy, ctx.gemm)
        dw = em.weight_gradient(dy, dy_q, a.detach(), ctx.gemm) if em.fp8_wgrad else dy.t() @ a
        return dy_q @ w_dgrad, None, dw, None, None, None


def _emulated_layer(layer, x: Tensor, pos: Tensor, seq_len: int, emulation) -> Tensor:
    """An FP8 LlamaDecoderLayer's forward (and, through autograd, backward) in eager PyTorch, each GEMM _Emulated."""
    def normed(t, gamma):
        rstd = torch.rsqrt(t.pow(2).mean(-1) + layer.eps)
        return t * rstd[:, None] * gamma, (t * gamma).detach(), rstd.detach()

    u, h, rstd = normed(x, layer.attn_norm)
    qkv = rope(_Emulated.apply(u, h, layer.w_qkv, rstd, emulation, "qkv"), pos, layer.theta)
    a = attend(qkv, layer.n_heads, seq_len, layer.attention, layer.n_kv_heads, layer.head_dim)
    x1 = x + _Emulated.apply(a, a, layer.w_o, None, emulation, "o")
    u1, h1, rstd1 = normed(x1, layer.mlp_norm)
    y = swiglu(_Emulated.apply(u1, h1, layer.w_gate_up, rstd1, emulation, "gate_up"))
    return x1 + _Emulated.apply(y, y, layer.w_down, None, emulation, "down")


class _Tensorwise:
    """Tensorwise FP8: every tensor under its slot's (scale, inv_scale), e4m3 forward, e5m2 gradients."""
    # Each GEMM's slots: its A, its gradient dy, and its activation in an FP8 weight gradient.
    SLOTS = {"qkv": ("h", "dz_qkv", "o_qkv"), "o": ("attn_out", "dx1", "attn_out"),
             "gate_up": ("h_mlp", "dz_mlp", "o_mlp"), "down": ("y", "dx2", "y")}

    def __init__(self, scales: dict, fp8_wgrad: bool):
        self.scales, self.fp8_wgrad = scales, fp8_wgrad

    def weight(self, w):
        w_q = fp8_round(w, *fp8_weight_scales(w), "e4m3")
        return w_q, w_q

    def activation(self, t, gemm):
        return fp8_round(t, *self.scales[self.SLOTS[gemm][0]], "e4m3")

    def gradient(self, dy, gemm):
        return fp8_round(dy, *self.scales[self.SLOTS[gemm][1]], "e5m2")

    def weight_gradient(self, dy, dy_q, a, gemm):
        return dy_q.t() @ fp8_round(a, *self.scales[self.SLOTS[gemm][2]], "e4m3")


def fp8_decoder_layer(layer, x: Tensor, pos: Tensor, seq_len: int, h_scales: tuple[float, float],
                      scales: dict, fp8_wgrad: bool = False) -> Tensor:
    """A tensorwise FP8 layer emulated: h_scales = (scale, inv_scale) of its input h, scales = {slot: (scale,
    inv_scale)} of fp8_recipes.SLOTS as the layer used them. fp8_wgrad: the weight gradients in FP8 too, each
    activation under its slot's scale (o_qkv and o_mlp: the normalized inputs of QKV and gate/up)."""
    return _emulated_layer(layer, x, pos, seq_len, _Tensorwise({**scales, "h": h_scales}, fp8_wgrad))


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


class _Blockwise:
    """Block-wise FP8: weights by 128 x 128 blocks, activations and gradients by 1 x 128 groups. SwiGLU's gradient
    dz is interleaved gate/up, as its epilogue writes it two GEMM columns at a time: its groups are 256 of its
    columns. FP8 weight gradients: q(dy^T) @ q(a^T)^T, both in groups of 128 tokens."""

    def __init__(self, fp8_wgrad: bool):
        self.fp8_wgrad = fp8_wgrad

    def weight(self, w):
        w_q = fp8_weight_block_round(w)
        return w_q, w_q

    def activation(self, t, gemm):
        return fp8_group_round(t)

    def gradient(self, dy, gemm):
        return fp8_group_round(dy, 2 * _BLOCK if gemm == "gate_up" else _BLOCK)

    def weight_gradient(self, dy, dy_q, a, gemm):
        return fp8_group_round(dy.t()) @ fp8_group_round(a.t()).t()


def fp8_blockwise_decoder_layer(layer, x: Tensor, pos: Tensor, seq_len: int, fp8_wgrad: bool = False) -> Tensor:
    """A block-wise FP8 layer emulated; fp8_wgrad: its weight gradients in FP8 too."""
    return _emulated_layer(layer, x, pos, seq_len, _Blockwise(fp8_wgrad))


# ---------------------------------------------------------------------------------------------------------
# Row-wise FP8 (coda.torch.fp8's "rowwise" recipe): activations and gradients under a scale per row, weights per
# output channel (row) in the forward and per input channel (column) in the dgrads.

def fp8_row_round(t: Tensor) -> Tensor:
    """t [M x N] as a row-wise FP8 GEMM sees its A: each row under its own scale."""
    return _block_round(t, 1)


class _Rowwise(_Blockwise):
    """Row-wise FP8: each operand under the scales of its amax over `dims` (rowwise: each row's, 1), weights by row in
    the forward and by column in the dgrads (`columns`: 0), FP8 weight gradients as q_columns(dy)^T q_columns(a) (a
    scale per channel over the tokens)."""
    dims, columns = 1, 0

    def weight(self, w):
        return _block_round(w, self.dims), _block_round(w, self.columns)

    def activation(self, t, gemm):
        return _block_round(t, self.dims)

    def gradient(self, dy, gemm):
        return _block_round(dy, self.dims)

    def weight_gradient(self, dy, dy_q, a, gemm):
        return _block_round(dy, self.columns).t() @ _block_round(a, self.columns)


def fp8_rowwise_decoder_layer(layer, x: Tensor, pos: Tensor, seq_len: int, fp8_wgrad: bool = False) -> Tensor:
    """A row-wise FP8 layer emulated; fp8_wgrad: its weight gradients in FP8 too."""
    return _emulated_layer(layer, x, pos, seq_len, _Rowwise(fp8_wgrad))


def fp8_tensor_round(t: Tensor) -> Tensor:
    """t as a current-scaled FP8 GEMM sees it (the "tensorwise_current" recipe): all of it under one scale, its own."""
    return _block_round(t, (0, 1))


class _TensorwiseCurrent(_Rowwise):
    """Current scaling: every operand under the scale of its own amax, e4m3 throughout."""
    dims = columns = (0, 1)


def fp8_tensorwise_current_decoder_layer(layer, x: Tensor, pos: Tensor, seq_len: int,
                                         fp8_wgrad: bool = False) -> Tensor:
    """A current-scaled FP8 layer emulated; fp8_wgrad: its weight gradients in FP8 too."""
    return _emulated_layer(layer, x, pos, seq_len, _TensorwiseCurrent(fp8_wgrad))
