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
