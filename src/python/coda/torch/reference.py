"""Eager PyTorch versions of everything coda.torch computes, with the same conventions (interleaved gate/up rows,
RoPE over adjacent column pairs, theta = 0 for V): the reference of the tests and the eager and torch.compile
baselines of the benchmark."""
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


def rope_theta(d: int, n_heads: int, base: float = 10000.0, device=None) -> Tensor:
    """theta per column pair of the fused QKV output [3d]: Q and K pairs by their index in the head, V: 0."""
    hd = d // n_heads
    per_head = base ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    qk = per_head.repeat(n_heads)
    return torch.cat((qk, qk, torch.zeros(d // 2, dtype=torch.float64))).to(torch.float32).to(device)


def attend(qkv: Tensor, n_heads: int, seq_len: int, attention: str = "sdpa") -> Tensor:
    """Causal attention over a fused [M x 3d] QKV (heads contiguous in each of Q, K, V); "none" is the
    attention-free stand-in v + 0 * (q + k) that keeps the GEMMs and the data flow."""
    m, d3 = qkv.shape
    d = d3 // 3
    q, k, v = qkv.view(m // seq_len, seq_len, 3, n_heads, d // n_heads).unbind(2)
    if attention == "none":
        return (v + 0 * (q + k)).reshape(m, d)
    o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
    return o.transpose(1, 2).reshape(m, d)


def decoder_layer(layer, x: Tensor, pos: Tensor, seq_len: int) -> Tensor:
    """One coda.torch.LlamaDecoderLayer's forward in eager PyTorch, from its own parameters."""
    qkv = rope(rms_norm(x, layer.attn_norm, layer.eps) @ layer.w_qkv.t(), pos, layer.theta)
    x1 = x + attend(qkv, layer.n_heads, seq_len, layer.attention) @ layer.w_o.t()
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
    return F.cross_entropy(logits if logits.dtype == torch.float64 else logits.float(), labels.reshape(-1))
