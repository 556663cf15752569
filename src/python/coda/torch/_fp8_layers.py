"""What coda.torch's FP8 layer ops share: a weight gradient's fake, and the autograd wiring of the recipes whose
scales come from each tensor's own blocks or rows (ops_fp8_blockwise, ops_fp8_rowwise), whose ops take the same
arguments and save the same tensors."""
from typing import Optional

import torch
from torch import Tensor

from coda.torch._kernels import run
from coda.torch._register import fake, no_gradient


def weight_grad_like(x: Tensor, t: Tensor, buffer: Optional[Tensor]) -> Tensor:
    """A weight's gradient as an FP8 layer's backward returns it, given the weight's transposed FP8 copy t [K x N]:
    [N x K] in the activations' dtype, or empty where it went into `buffer`."""
    return x.new_empty(0) if buffer is not None else x.new_empty(t.shape[1], t.shape[0])


def fp8_weight_gradient(ins: dict, n: int, k: int, m: int, buffer: Optional[Tensor], like: Tensor,
                        graphs: tuple[str, str]) -> Tensor:
    """dW [N x K], a sum over m tokens, by an FP8 GEMM on `ins` (A, B and their scales): added into the f32 `buffer`
    by graphs[0] (then an empty tensor is returned), else stored in `like`'s dtype by graphs[1]."""
    if buffer is not None:
        run(graphs[0], ins, {"D": buffer}, n, k, m)
        return like.new_empty(0)
    dw = like.new_empty(n, k)
    run(graphs[1], ins, {"D": dw}, n, k, m)
    return dw


def check_fp8_wgrad(fp8_wgrad: bool, m: int) -> None:
    """FP8 weight gradients read the tokens as the K of their GEMMs: K-major FP8 rows of M bytes, which TMA loads only
    where M is a multiple of 16."""
    if fp8_wgrad and m % 16:
        raise ValueError(f"coda.torch: FP8 weight gradients (fp8_wgrad) read the tokens as K-major FP8 rows, which "
                         f"must be a multiple of 16 bytes: M = {m} tokens is not a multiple of 16 (use bf16 weight "
                         f"gradients, or pad the batch)")


# decoder_layer_fp8_{blockwise,rowwise}'s arguments: x, h, h_scale, rstd, attn_norm, w_qkv, w_o, mlp_norm, w_gate_up,
# w_down, next_gamma, pos, theta, eps, n_heads, seq_len, attention, fp8_out, fp8_wgrad, and the four gradient buffers.
_INPUTS = 23


def register_stateless(forward, backward) -> None:
    """The fake of `backward` and the autograd of `forward` (decoder_layer_fp8_<recipe> and its _backward op).
    forward returns (x2, h2, rstd2, h2_scale, qkv, out, lse, seed, offset, x1, rstd1, z, then each weight's
    transposed FP8 copy and its scales); backward takes (dx2, x, rstd, attn_norm, mlp_norm, pos, theta, those 16,
    n_heads, seq_len, attention, fp8_wgrad, the four buffers) and returns (dx, d_attn_norm, d_mlp_norm, the four
    dW)."""

    @fake(backward)
    def _(dx2, x, rstd, attn_norm, mlp_norm, pos, theta, qkv, out, lse, seed, offset, x1, rstd1, z, t_qkv, ts_qkv,
          t_o, ts_o, t_gu, ts_gu, t_d, ts_d, n_heads, seq_len, attention, fp8_wgrad, w_qkv_grad, w_o_grad,
          w_gate_up_grad, w_down_grad):
        grads = [weight_grad_like(x, t, b)
                 for t, b in ((t_qkv, w_qkv_grad), (t_o, w_o_grad), (t_gu, w_gate_up_grad), (t_d, w_down_grad))]
        return (torch.empty_like(x), torch.empty_like(attn_norm), torch.empty_like(mlp_norm), *grads)

    def setup(ctx, inputs, output):
        (x, h, h_scale, rstd, attn_norm, w_qkv, w_o, mlp_norm, w_gate_up, w_down, next_gamma, pos, theta, eps,
         n_heads, seq_len, attention, fp8_out, fp8_wgrad, *buffers) = inputs
        ctx.n_heads, ctx.seq_len, ctx.attention, ctx.fp8_wgrad = n_heads, seq_len, attention, fp8_wgrad
        ctx.save_for_backward(x, rstd, attn_norm, mlp_norm, pos, theta, *output[4:], *buffers)
        ctx.weight_dtypes = tuple(w.dtype for w in (w_qkv, w_o, w_gate_up, w_down))
        no_gradient(ctx, *output[1:])

    def grad(ctx, dx2, *no_grads):
        if dx2 is None:  # x2 reached no loss
            return (None,) * _INPUTS
        saved = ctx.saved_tensors
        x, rstd, attn_norm, mlp_norm, pos, theta = saved[:6]
        activations = saved[6:14]  # qkv, out, lse, seed, offset, x1, rstd1, z
        weights = saved[14:22]  # each weight's transposed copy and its scales
        buffers = saved[22:]
        dx, d_attn, d_mlp, *dws = backward(dx2, x, rstd, attn_norm, mlp_norm, pos, theta, *activations, *weights,
                                           ctx.n_heads, ctx.seq_len, ctx.attention, ctx.fp8_wgrad, *buffers)
        dws = [None if b is not None else dw.to(dtype) for dw, b, dtype in zip(dws, buffers, ctx.weight_dtypes)]
        return (dx, None, None, None, d_attn, dws[0], dws[1], d_mlp, dws[2], dws[3]) + (None,) * (_INPUTS - 10)

    forward.register_autograd(grad, setup_context=setup)
