"""coda's block epilogues as torch custom ops (torch.ops.coda.*) with fake kernels and autograd: the layer's ops
here, the LM head's in ops_lm_head.py.

Forward ops take the residual stream x and its RMSNorm inputs h = x * gamma and rstd, as the previous GEMM's
epilogue wrote them (DESIGN.md section 3). h and rstd carry no gradient: an op that reads them differentiates
through x instead, whose gradient it returns in full (the norm's backward runs in the epilogue of the dgrad
GEMM). Backward graphs run as ops of their own, so AOTAutograd traces the backward too.

A decoder layer is two ops, attention_block and mlp, so that each residual gradient is summed in an epilogue and
autograd never adds, fills, stacks or copies a tensor between coda's kernels (tests/python/test_torch_gpu.py
profiles a layer step and fails on any other kernel than coda's and attention's).

Weights are [N x K] (nn.Linear) and enter GEMMs as B = w.t(). A weight-gradient buffer (f32, `*_grad`
arguments) makes the wgrad GEMM accumulate into it, and the op then returns no gradient for that weight.
"""
from typing import NamedTuple, Optional

import torch
from torch import Tensor

from coda.torch import _attention, _steps
from coda.torch._kernels import launching, run
from coda.torch._register import config_text, custom_op, no_gradient, parse_config

acc_dtype = _steps.acc_dtype


# ---------------------------------------------------------------------------------------------------------
# rms_stats: the embedding entry (h = x * gamma and rstd for the first layer), a tile program + finalize.

@custom_op("coda::rms_stats")
def rms_stats(x: Tensor, gamma: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    m, d = x.shape
    h = torch.empty_like(x)
    parts = run("rms_entry", {"x": x.contiguous(), "gamma": gamma}, {"h": h}, m, d, partials=("x1_sumsq",))
    return h, _steps.rstd(parts["x1_sumsq"], m, d, eps, x)


def _rms_stats_setup(ctx, inputs, output):
    no_gradient(ctx, *output)


def _rms_stats_backward(ctx, dh, drstd):
    return None, None, None


rms_stats.register_autograd(_rms_stats_backward, setup_context=_rms_stats_setup)


# ---------------------------------------------------------------------------------------------------------
# attention_block: the attention half of a decoder layer. qkv = rope(rstd * (h W_qkv^T)); a = causal attention
# over qkv's Q, K, V blocks (SDPA's kernels; "none": the stand-in a = v); x1 = a W_o^T + x; h1 = x1 * mlp_norm;
# rstd1. Also returns what its backward reads: qkv, SDPA's output and its logsumexp and RNG state.
#
# Grouped-query attention comes from the weights' shapes: w_o [d x n_heads * hd] gives the head size hd, and
# w_qkv [(n_heads + 2 n_kv_heads) hd x d] the KV heads. SDPA's kernels read K and V unexpanded.

class _Widths:
    """The column blocks of the fused QKV output: Q [n_heads * hd], K and V [n_kv_heads * hd] each."""

    def __init__(self, w_qkv: Tensor, w_o: Tensor, n_heads: int):
        self.q = w_o.shape[1]
        self.head_dim = self.q // n_heads
        self.kv = (w_qkv.shape[0] - self.q) // 2
        if self.q % n_heads or self.kv <= 0 or self.kv % self.head_dim or self.q + 2 * self.kv != w_qkv.shape[0]:
            raise ValueError(f"coda.torch: w_qkv {tuple(w_qkv.shape)} and w_o {tuple(w_o.shape)} do not split into "
                             f"{n_heads} query heads and whole KV heads of the same size")
        self.n_heads, self.n_kv_heads = n_heads, self.kv // self.head_dim
        if n_heads % self.n_kv_heads:
            raise ValueError(f"coda.torch: {n_heads} query heads do not share {self.n_kv_heads} KV heads evenly")

    def blocks(self) -> list[tuple[int, int]]:
        """(first column, width) of Q, K and V."""
        return [(0, self.q), (self.q, self.kv), (self.q + self.kv, self.kv)]


def _qkv_heads(qkv: Tensor, widths: _Widths, seq_len: int) -> list[Tensor]:
    batch = qkv.shape[0] // seq_len
    return [_attention.heads(qkv[:, c:c + w], batch, seq_len, w // widths.head_dim) for c, w in widths.blocks()]


def _attention_input(qkv: Tensor, out: Tensor, widths: _Widths, attention: str) -> Tensor:
    # The out-projection's A: SDPA's output as [M x n_heads hd], or V read in place for the attention-free stand-in.
    return qkv[:, widths.q + widths.kv:] if attention == "none" else _attention.rows(out)


def _attention_gradient_blocks(da: Tensor, qkv: Tensor, out: Tensor, lse: Tensor, seed: Tensor, offset: Tensor,
                               widths: _Widths, seq_len: int, n_heads: int, attention: str) -> list:
    """The gradient of each column block of qkv (Q, K, V), with its width, from da, the gradient of attention's
    output: SDPA's backward, or for the attention-free stand-in a = v + 0 * (q + k), None (zero) for Q and K and da
    for V. RoPE's backward (_steps.rope_backward) reads them where they are."""
    if attention == "none":
        return [(None, widths.q), (None, widths.kv), (da, widths.kv)]
    m = qkv.shape[0]
    q, k, v = _qkv_heads(qkv, widths, seq_len)
    grads = _attention.backward(_attention.heads(da, m // seq_len, seq_len, n_heads), q, k, v, out, lse, seed, offset)
    return [(_attention.rows(g), w) for g, (_, w) in zip(grads, widths.blocks())]


def _attention_forward(qkv: Tensor, widths: _Widths, seq_len: int, attention: str):
    if attention == "none":  # four distinct tensors: a custom op's outputs may not alias each other
        if widths.kv != widths.q:
            raise ValueError("coda.torch: the attention-free stand-in ('none') needs as many KV heads as query heads")
        return tuple(qkv.new_empty(0) for _ in range(4))
    if attention != "sdpa":
        raise ValueError(f"coda.torch: attention must be 'sdpa' or 'none', got {attention!r}")
    return _attention.forward(*_qkv_heads(qkv, widths, seq_len))


class AttentionConfig(NamedTuple):
    """attention_block's settings, passed to its ops as one text (_register.config_text)."""
    eps: float
    n_heads: int
    seq_len: int
    attention: str = "sdpa"
    text = config_text
    parse = classmethod(parse_config)


# What attention_block's backward reads: its inputs and SDPA's output, logsumexp and RNG state.
_AttentionSaved = NamedTuple("_AttentionSaved", [(name, Tensor) for name in
                                                 "x rstd attn_norm w_qkv w_o pos theta qkv out lse seed offset".split()])
_ATTENTION_OUTPUTS = 3  # attention_block's outputs before the saved ones: x1, h1, rstd1


@custom_op("coda::attention_block")
def attention_block(x: Tensor, entry: list[Tensor], weights: list[Tensor], norms: list[Tensor], rope: list[Tensor],
                    buffers: list[Optional[Tensor]], config: str) -> tuple[(Tensor,) * 8]:
    """entry: the previous op's (h, rstd); weights: (w_qkv, w_o); norms: (attn_norm, mlp_norm); rope: (pos, theta);
    buffers: the weights' f32 gradient buffers (None each where the gradient is returned); config: AttentionConfig's
    text. Returns x1, h1, rstd1, then qkv and SDPA's output, logsumexp and RNG state."""
    cfg = AttentionConfig.parse(config)
    (h, rstd), (w_qkv, w_o), (pos, theta) = entry, weights, rope
    m, d = x.shape
    n = w_qkv.shape[0]
    widths = _Widths(w_qkv, w_o, cfg.n_heads)
    qkv = h.new_empty(m, n)
    run("qkv_rope", {"A": h, "B": w_qkv.t(), "rstd": rstd, "pos": pos, "theta": theta}, {"qkv": qkv}, m, n, d)
    out, lse, seed, offset = _attention_forward(qkv, widths, cfg.seq_len, cfg.attention)
    x1 = x.new_empty(m, d)
    h1 = x.new_empty(m, d)
    parts = run("out_proj", {"A": _attention_input(qkv, out, widths, cfg.attention), "B": w_o.t(),
                             "residual": x.contiguous(), "gamma": norms[1]}, {"x1": x1, "h": h1}, m, d, widths.q,
                partials=("x1_sumsq",))
    return x1, h1, _steps.rstd(parts["x1_sumsq"], m, d, cfg.eps, x), qkv, out, lse, seed, offset


@custom_op("coda::attention_block_backward", mutates_args=("w_qkv_grad", "w_o_grad"))
def attention_block_backward(dx1: Tensor, saved: list[Tensor], w_qkv_grad: Optional[Tensor],
                             w_o_grad: Optional[Tensor], config: str) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """saved: _AttentionSaved's fields. Returns dx, d_attn_norm, dW_qkv and dW_o (empty where added into a
    buffer)."""
    cfg, sv = AttentionConfig.parse(config), _AttentionSaved(*saved)
    m, d = sv.x.shape
    widths = _Widths(sv.w_qkv, sv.w_o, cfg.n_heads)
    dx1 = dx1.contiguous()
    da = _steps.dgrad(dx1, sv.w_o)
    dw_o = _steps.wgrad(dx1, _attention_input(sv.qkv, sv.out, widths, cfg.attention), w_o_grad)
    blocks = _attention_gradient_blocks(da, sv.qkv, sv.out, sv.lse, sv.seed, sv.offset, widths, cfg.seq_len,
                                        cfg.n_heads, cfg.attention)
    dz, parts = _steps.rope_backward(blocks, sv.qkv, sv.pos, sv.theta)
    s = _steps.s_factor(parts, m, d, sv.x)
    # x feeds the norm (through h, rstd) and the residual add: dx1 joins the norm's gradient in the epilogue.
    dx, o, dgamma = _steps.norm_backward(dz, sv.w_qkv, sv.x, sv.rstd, s, sv.attn_norm, dx_in=dx1)
    return dx, dgamma, _steps.wgrad(dz, o, w_qkv_grad), dw_o


def _attention_block_setup(ctx, inputs, output):
    x, (h, rstd), (w_qkv, w_o), (attn_norm, _), (pos, theta), buffers, config = inputs
    ctx.config, ctx.no_buffers = config, all(b is None for b in buffers)
    ctx.save_for_backward(x, rstd, attn_norm, w_qkv, w_o, pos, theta, *output[_ATTENTION_OUTPUTS:], *buffers)
    no_gradient(ctx, *output[1:])


def _attention_block_grad(ctx, dx1, *no_grads):
    # A list of gradients for each list of tensors; torch.library takes a list of Nones alone as one.
    buffers = None if ctx.no_buffers else [None, None]
    if dx1 is None:  # x1 reached no loss
        return None, [None, None], [None, None], [None, None], [None, None], buffers, None
    saved = ctx.saved_tensors
    w_qkv_grad, w_o_grad = saved[len(_AttentionSaved._fields):]
    dx, dgamma, dw_qkv, dw_o = torch.ops.coda.attention_block_backward(
        dx1, list(saved[:len(_AttentionSaved._fields)]), w_qkv_grad, w_o_grad, ctx.config)
    weights = [None if w_qkv_grad is not None else dw_qkv, None if w_o_grad is not None else dw_o]
    return dx, [None, None], weights, [dgamma, None], [None, None], buffers, None


attention_block.register_autograd(_attention_block_grad, setup_context=_attention_block_setup)


# ---------------------------------------------------------------------------------------------------------
# qkv_rope: qkv = rope(rstd * (h W^T)), for attention outside coda (attention_block fuses its own).

@custom_op("coda::qkv_rope")
def qkv_rope(x: Tensor, h: Tensor, rstd: Tensor, gamma: Tensor, w: Tensor, pos: Tensor, theta: Tensor,
             w_grad: Optional[Tensor] = None) -> Tensor:
    m, d = h.shape
    n = w.shape[0]
    qkv = h.new_empty(m, n)
    run("qkv_rope", {"A": h, "B": w.t(), "rstd": rstd, "pos": pos, "theta": theta}, {"qkv": qkv}, m, n, d)
    return qkv


@custom_op("coda::qkv_rope_backward", mutates_args=("w_grad",))
def qkv_rope_backward(dqkv: Tensor, qkv: Tensor, x: Tensor, rstd: Tensor, gamma: Tensor, w: Tensor,
                      pos: Tensor, theta: Tensor, w_grad: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    m, d = x.shape
    dz, parts = _steps.rope_backward([(dqkv.contiguous(), qkv.shape[1])], qkv, pos, theta)
    s = _steps.s_factor(parts, m, d, x)
    dx, o, dgamma = _steps.norm_backward(dz, w, x, rstd, s, gamma)
    return dx, dgamma, _steps.wgrad(dz, o, w_grad)


def _qkv_rope_setup(ctx, inputs, output):
    x, h, rstd, gamma, w, pos, theta, w_grad = inputs
    ctx.save_for_backward(output, x, rstd, gamma, w, pos, theta, w_grad)


def _qkv_rope_grad(ctx, dqkv):
    if dqkv is None:
        return (None,) * 8
    qkv, x, rstd, gamma, w, pos, theta, w_grad = ctx.saved_tensors
    dx, dgamma, dw = torch.ops.coda.qkv_rope_backward(dqkv, qkv, x, rstd, gamma, w, pos, theta, w_grad)
    return dx, None, None, dgamma, (None if w_grad is not None else dw), None, None, None


qkv_rope.register_autograd(_qkv_rope_grad, setup_context=_qkv_rope_setup)


# ---------------------------------------------------------------------------------------------------------
# out_proj: x1 = a W^T + residual; h1 = x1 * gamma; rstd1 (gamma: the next RMSNorm's weight).

@custom_op("coda::out_proj")
def out_proj(a: Tensor, w: Tensor, residual: Tensor, gamma: Tensor, eps: float,
             w_grad: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Tensor]:
    m, k = a.shape
    d = w.shape[0]
    x1 = residual.new_empty(m, d)
    h1 = residual.new_empty(m, d)
    parts = run("out_proj", {"A": a, "B": w.t(), "residual": residual.contiguous(), "gamma": gamma},
                {"x1": x1, "h": h1}, m, d, k, partials=("x1_sumsq",))
    return x1, h1, _steps.rstd(parts["x1_sumsq"], m, d, eps, residual)


@custom_op("coda::out_proj_backward", mutates_args=("w_grad",))
def out_proj_backward(dx1: Tensor, a: Tensor, w: Tensor, w_grad: Optional[Tensor]) -> tuple[Tensor, Tensor]:
    dx1 = dx1.contiguous()
    return _steps.dgrad(dx1, w), _steps.wgrad(dx1, a, w_grad)


def _out_proj_setup(ctx, inputs, output):
    a, w, residual, gamma, eps, w_grad = inputs
    ctx.save_for_backward(a, w, w_grad)
    no_gradient(ctx, *output[1:])


def _out_proj_grad(ctx, dx1, dh1, drstd1):
    if dx1 is None:
        return (None,) * 6
    a, w, w_grad = ctx.saved_tensors
    da, dw = torch.ops.coda.out_proj_backward(dx1, a, w, w_grad)
    return da, (None if w_grad is not None else dw), dx1, None, None, None


out_proj.register_autograd(_out_proj_grad, setup_context=_out_proj_setup)


# ---------------------------------------------------------------------------------------------------------
# How mlp's backward runs SwiGLU's backward. "fused": in the epilogue of the down projection's dgrad GEMM (dy never
# leaves the accumulator). "split": a plain dgrad GEMM stores dy in bf16, then a tile program (coda.blocks.
# swiglu_backward_tile): the unfused pair, for GPUs and shapes where the fused epilogue costs the GEMM more than the
# extra pass over dy does. tools/bench_block.py times a layer both ways. Read at each backward, so a change applies
# to the next step (also under torch.compile, where the op's body is not traced).
SWIGLU_BACKWARD = "fused"


def set_swiglu_backward(mode: str) -> None:
    """Chooses how mlp's backward runs SwiGLU's backward: "fused" (the default) or "split"."""
    global SWIGLU_BACKWARD
    if mode not in ("fused", "split"):
        raise ValueError(f"coda.torch: SwiGLU backward must be 'fused' or 'split', got {mode!r}")
    SWIGLU_BACKWARD = mode


# ---------------------------------------------------------------------------------------------------------
# mlp: z = rstd1 * (h1 W_gu^T) (interleaved gate/up), y = silu(gate) * up, x2 = y W_d^T + x1, h2 = x2 * gamma_next,
# rstd2. Returns z for the backward (SwiGLU backward lives in the epilogue of the down-projection's dgrad).

@custom_op("coda::mlp")
def mlp(x1: Tensor, h1: Tensor, rstd1: Tensor, gamma: Tensor, w_gate_up: Tensor, w_down: Tensor,
        gamma_next: Tensor, eps: float, w_gate_up_grad: Optional[Tensor] = None,
        w_down_grad: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    m, d = h1.shape
    f2 = w_gate_up.shape[0]
    z = h1.new_empty(m, f2)
    y = h1.new_empty(m, f2 // 2)
    run("gate_up_swiglu", {"A": h1, "B": w_gate_up.t(), "rstd": rstd1}, {"z": z, "y": y}, m, f2, d)
    x2 = x1.new_empty(m, d)
    h2 = x1.new_empty(m, d)
    parts = run("out_proj", {"A": y, "B": w_down.t(), "residual": x1.contiguous(), "gamma": gamma_next},
                {"x1": x2, "h": h2}, m, d, f2 // 2, partials=("x1_sumsq",))
    return x2, h2, _steps.rstd(parts["x1_sumsq"], m, d, eps, x1), z


@custom_op("coda::mlp_backward", mutates_args=("w_gate_up_grad", "w_down_grad"))
def mlp_backward(dx2: Tensor, x1: Tensor, rstd1: Tensor, gamma: Tensor, w_gate_up: Tensor, w_down: Tensor,
                 z: Tensor, w_gate_up_grad: Optional[Tensor],
                 w_down_grad: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    m, d = x1.shape
    f2 = z.shape[1]
    dx2 = dx2.contiguous()
    dz = torch.empty_like(z)
    y = z.new_empty(m, f2 // 2)
    if SWIGLU_BACKWARD == "split":
        parts = run("swiglu_backward_tile", {"dy": _steps.dgrad(dx2, w_down), "z": z}, {"dz": dz, "y": y}, m,
                    f2 // 2, partials=("zdz_partials",))
    else:
        parts = run("swiglu_backward", {"A": dx2, "B": w_down, "z": z}, {"dz": dz, "y": y}, m, f2 // 2, d,
                    partials=("zdz_partials",))
    s = _steps.s_factor(parts["zdz_partials"], m, d, x1)
    # dx2 is also x1's gradient through the residual add: joined in the norm backward's epilogue.
    dx1, o, dgamma = _steps.norm_backward(dz, w_gate_up, x1, rstd1, s, gamma, dx_in=dx2)
    dw_down = _steps.wgrad(dx2, y, w_down_grad)
    dw_gate_up = _steps.wgrad(dz, o, w_gate_up_grad)
    return dx1, dgamma, dw_gate_up, dw_down


def _mlp_setup(ctx, inputs, output):
    x1, h1, rstd1, gamma, w_gate_up, w_down, gamma_next, eps, gu_grad, d_grad = inputs
    ctx.save_for_backward(x1, rstd1, gamma, w_gate_up, w_down, output[3], gu_grad, d_grad)
    no_gradient(ctx, *output[1:])


def _mlp_grad(ctx, dx2, dh2, drstd2, dz):
    if dx2 is None:
        return (None,) * 10
    x1, rstd1, gamma, w_gate_up, w_down, z, gu_grad, d_grad = ctx.saved_tensors
    dx1, dgamma, dw_gu, dw_d = torch.ops.coda.mlp_backward(dx2, x1, rstd1, gamma, w_gate_up, w_down, z,
                                                            gu_grad, d_grad)
    return (dx1, None, None, dgamma, None if gu_grad is not None else dw_gu,
            None if d_grad is not None else dw_d, None, None, None, None)


mlp.register_autograd(_mlp_grad, setup_context=_mlp_setup)


# ---------------------------------------------------------------------------------------------------------
# embedding with its weight gradient added into an f32 buffer (fp32_grad_accumulation; with tied embeddings the
# LM head's weight-gradient GEMM accumulates into the same buffer). Without a buffer, nn.Embedding serves.

@custom_op("coda::embedding")
def embedding(weight: Tensor, tokens: Tensor, w_grad: Optional[Tensor] = None) -> Tensor:
    return torch.nn.functional.embedding(tokens, weight)


@custom_op("coda::embedding_backward", mutates_args=("w_grad",))
def embedding_backward(dx: Tensor, tokens: Tensor, weight: Tensor, w_grad: Optional[Tensor]) -> Tensor:
    if w_grad is None:
        return torch.ops.aten.embedding_dense_backward(dx, tokens, weight.shape[0], -1, False)
    if not launching():  # a dry run's dx holds no values: nothing to add into the buffer (coda's wgrads add none)
        return weight.new_empty(0)
    # index_put_ with accumulate sorts the indices on CUDA: the same sum in the same order every run.
    w_grad.index_put_((tokens.long(),), dx.to(w_grad.dtype), accumulate=True)
    return weight.new_empty(0)


def _embedding_setup(ctx, inputs, output):
    weight, tokens, w_grad = inputs
    ctx.save_for_backward(tokens, weight)
    # Not saved as a tensor: with tied embeddings the LM head's backward adds into the buffer first, and saved
    # tensors may not change between forward and backward.
    ctx.w_grad = w_grad


def _embedding_grad(ctx, dx):
    if dx is None:
        return None, None, None
    tokens, weight = ctx.saved_tensors
    dw = torch.ops.coda.embedding_backward(dx.contiguous(), tokens, weight, ctx.w_grad)
    return (None if ctx.w_grad is not None else dw), None, None


embedding.register_autograd(_embedding_grad, setup_context=_embedding_setup)
