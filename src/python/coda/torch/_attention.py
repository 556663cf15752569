"""Causal attention over the column blocks of a fused QKV tensor, forward and backward as two explicit steps, so
that attention_block's backward gets SDPA's dq, dk and dv where SDPA writes them (no stack into one dqkv) and feeds
them straight to RoPE's backward.

On CUDA the kernels are PyTorch's own SDPA kernels, the backend F.scaled_dot_product_attention would choose
(flash, cuDNN or memory-efficient) called through their aten ops. On the CPU (the float64 reference path of the
tests) the math is F.scaled_dot_product_attention forward and the backward written out."""
import torch
import torch.nn.functional as F
from torch import Tensor

from coda.torch import _kernels

# torch's SDPBackend numbering, as aten::_fused_sdp_choice returns it.
_FLASH, _EFFICIENT, _CUDNN = 1, 2, 3


def heads(block: Tensor, batch: int, seq_len: int, n_heads: int) -> Tensor:
    """[M x width] (M = batch * seq_len, heads contiguous) as SDPA's [batch, heads, seq, head_dim] view."""
    return block.view(batch, seq_len, n_heads, -1).transpose(1, 2)


def rows(t: Tensor) -> Tensor:
    """SDPA's [batch, heads, seq, head_dim] back to [M x width] (a view where t is laid out token-major)."""
    b, h, s, hd = t.shape
    return t.transpose(1, 2).reshape(b * s, h * hd)


def _grouped(q: Tensor, k: Tensor) -> bool:
    # Grouped-query attention: fewer K and V heads than query heads (query head i reads KV head i // group).
    return k.shape[1] != q.shape[1]


def _backend(q: Tensor, k: Tensor, v: Tensor) -> int:
    # The choice F.scaled_dot_product_attention makes for these inputs (the same in forward and backward). With
    # enable_gqa, the fused backends it may choose take K and V unexpanded, as it passes them.
    if q.device.type != "cuda":
        return 0
    return torch.ops.aten._fused_sdp_choice(q, k, v, is_causal=True, enable_gqa=_grouped(q, k))


def forward(q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Causal attention. Returns (out [batch, heads, seq, hd], logsumexp, rng seed, rng offset); the last three
    are what backward needs besides q, k, v and out."""
    if _kernels.dry_run():  # shapes only: SDPA's output laid out token-major, as its kernels write it
        out = heads(q.new_empty(q.shape[0] * q.shape[2], q.shape[1] * v.shape[3]), q.shape[0], q.shape[2], q.shape[1])
        return (out, *(q.new_empty(0) for _ in range(3)))
    backend = _backend(q, k, v)
    if backend == 0:
        with torch.no_grad():
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=_grouped(q, k))
        return (out, *(q.new_empty(0) for _ in range(3)))
    if backend == _FLASH:
        out, lse, _, _, _, _, seed, offset, _ = torch.ops.aten._scaled_dot_product_flash_attention(
            q, k, v, 0.0, True, False)
    elif backend == _CUDNN:
        out, lse, _, _, _, _, seed, offset, _ = torch.ops.aten._scaled_dot_product_cudnn_attention(
            q, k, v, None, True, 0.0, True, False)
    elif backend == _EFFICIENT:
        out, lse, seed, offset = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.0, True)
    else:
        raise RuntimeError(f"coda.torch: SDPA chose backend {backend} (not flash, cuDNN or memory-efficient) for "
                           f"q {tuple(q.shape)} {q.dtype}; attention_block needs one of those three")
    return out, lse, seed, offset


def backward(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, seed: Tensor,
             offset: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """dq, dk, dv of forward's attention, each [batch, heads, seq, hd], from the same backend."""
    if _kernels.dry_run():
        return tuple(heads(t.new_empty(t.shape[0] * t.shape[2], t.shape[1] * t.shape[3]), t.shape[0], t.shape[2],
                           t.shape[1]) for t in (q, k, v))
    backend = _backend(q, k, v)
    s_q, s_k = q.shape[2], k.shape[2]
    if backend == _FLASH:
        return torch.ops.aten._scaled_dot_product_flash_attention_backward(
            dout, q, k, v, out, lse, None, None, s_q, s_k, 0.0, True, seed, offset)
    if backend == _CUDNN:
        return torch.ops.aten._scaled_dot_product_cudnn_attention_backward(
            dout, q, k, v, out, lse, seed, offset, None, None, None, s_q, s_k, 0.0, True)[:3]
    if backend == _EFFICIENT:
        return torch.ops.aten._scaled_dot_product_efficient_attention_backward(
            dout, q, k, v, None, out, lse, seed, offset, 0.0, [True, True, True, False], True)[:3]
    return _reference_backward(dout, q, k, v)


def _reference_backward(dout: Tensor, q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    # The CPU path's causal attention backward, written out (a custom op's body runs below autograd):
    # P = softmax(q k^T / sqrt(hd) + causal mask), dS = P * (dP - rowsum(dP * P)) with dP = dout v^T. With grouped
    # KV heads, K and V are expanded to the query heads and their gradients summed back over each group.
    group = q.shape[1] // k.shape[1]
    if group > 1:
        dq, dk, dv = _reference_backward(dout, q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1))
        b, h, s_k, hd = dk.shape
        return dq, dk.view(b, h // group, group, s_k, hd).sum(2), dv.view(b, h // group, group, s_k, hd).sum(2)
    scale = q.shape[-1] ** -0.5
    s = q @ k.transpose(-1, -2) * scale
    causal = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).tril()
    p = torch.softmax(s.masked_fill(~causal, float("-inf")), dim=-1)
    dp = dout @ v.transpose(-1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    return ds @ k * scale, ds.transpose(-1, -2) @ q * scale, p.transpose(-1, -2) @ dout
