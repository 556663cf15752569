"""A decoder layer in row-wise FP8 (issue 28, the "rowwise" recipe of coda.torch.fp8: torchao's) as one torch custom op
with its backward: torch.ops.coda.decoder_layer_fp8_rowwise and decoder_layer_fp8_rowwise_backward.

Every FP8 GEMM scales its accumulator by A's row scale and B's column scale in the epilogue (coda.blocks'
*_fp8_rowwise graphs); all FP8 tensors are e4m3. A row's scale needs the whole row's amax, which no epilogue tile
holds, so each tensor a later GEMM reads in FP8 is written in bf16 (the weight gradients read it so anyway) beside its
row amax partials, and a quantize tile program reads it once more: the second pass this recipe costs, which the
tensorwise (delayed scales) and blockwise (128-column groups) recipes do without. Like blockwise, no state:
  - forward: QKV reads h_fp8 with its row scales (the previous layer's op or the embedding entry wrote them),
    the out-projection attention's output (its amax by PyTorch: SDPA writes it), gate/up h1 = x1 * gamma (quantized
    from x1 and gamma, not stored), down y;
  - backward: dx2 (its amax by PyTorch: it comes from the next layer's op), dz from SwiGLU's backward, dx1 from the
    norm backward, dz from RoPE's backward, each quantized after the epilogue that made it;
  - weights twice: by row (output channel) for the forward, by column (input channel), transposed, for the dgrads;
  - the four weight-gradient GEMMs in bf16, as in the other recipes; or, with fp8_wgrad, in FP8 as torchao's
    recipe has them: dW = dY^T X on copies of dY and X quantized with a scale per column (per channel, over all
    tokens) and stored transposed (quantize_e4m3_colwise_t), the accumulator scaled per row and column as in every
    other row-wise GEMM. The columns' amax is a PyTorch reduction over each operand (the epilogues that make them
    write row partials, not column ones). Tokens (M) must then be a multiple of 16."""
from typing import Optional

import torch
from torch import Tensor

from coda.torch import _steps
from coda.torch import ops as _ops
from coda.torch._kernels import partials_rows, run
from coda.torch._fp8_layers import check_fp8_wgrad, fp8_weight_gradient, register_stateless
from coda.torch._register import fake, no_gradient
from coda.torch.fp8 import FORMATS, quantize_rowwise, quantize_weight_rowwise, row_scales

_E4M3 = FORMATS["e4m3"]


def _quantize(t: Tensor, amax_partials=None, gamma: Optional[Tensor] = None) -> tuple[Tensor, Tensor]:
    """t (times gamma, where given with the partials of t * gamma) in e4m3 with each row's scale, from its amax row
    partials or, without them, from its own amax (a read by PyTorch): (t_fp8, the row scales f32 [M])."""
    if amax_partials is None:
        amax_partials = t.abs().amax(1)[None, :]
    scale, inv = row_scales(amax_partials)
    return quantize_rowwise(t, inv, gamma), scale


def _check_h(h: Tensor, h_scale: Tensor, m: int) -> None:
    if h.dtype != _E4M3:
        raise ValueError(f"coda.torch: a row-wise FP8 layer reads h in float8_e4m3fn (the previous FP8 op's), got "
                         f"{h.dtype}")
    if tuple(h_scale.shape) != (m,) or h_scale.dtype != torch.float32:
        raise ValueError(f"coda.torch: a row-wise FP8 layer reads h's scales as float32 [M] = [{m}] (one per row), got "
                         f"{h_scale.dtype} {tuple(h_scale.shape)}")


@torch.library.custom_op("coda::decoder_layer_fp8_rowwise", mutates_args=())
def decoder_layer_fp8_rowwise(x: Tensor, h: Tensor, h_scale: Tensor, rstd: Tensor, attn_norm: Tensor, w_qkv: Tensor,
                              w_o: Tensor, mlp_norm: Tensor, w_gate_up: Tensor, w_down: Tensor, next_gamma: Tensor,
                              pos: Tensor, theta: Tensor, eps: float, n_heads: int, seq_len: int, attention: str,
                              fp8_out: bool, fp8_wgrad: bool = False, w_qkv_grad: Optional[Tensor] = None,
                              w_o_grad: Optional[Tensor] = None,
                              w_gate_up_grad: Optional[Tensor] = None,
                              w_down_grad: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor,
                                                                             Tensor, Tensor, Tensor, Tensor, Tensor,
                                                                             Tensor, Tensor, Tensor, Tensor, Tensor,
                                                                             Tensor, Tensor, Tensor, Tensor, Tensor]:
    m, d = x.shape
    _check_h(h, h_scale, m)
    check_fp8_wgrad(fp8_wgrad, m)
    widths = _ops._Widths(w_qkv, w_o, n_heads)
    (q_qkv, s_qkv, t_qkv, ts_qkv), (q_o, s_o, t_o, ts_o), (q_gu, s_gu, t_gu, ts_gu), (q_d, s_d, t_d, ts_d) = [
        quantize_weight_rowwise(w) for w in (w_qkv, w_o, w_gate_up, w_down)]

    n = w_qkv.shape[0]
    qkv = x.new_empty(m, n)
    run("qkv_rope_fp8_rowwise", {"A": h, "B": q_qkv.t(), "a_scale": h_scale, "b_scale": s_qkv, "rstd": rstd,
                                 "pos": pos, "theta": theta}, {"qkv": qkv}, m, n, d)
    out, lse, seed, offset = _ops._attention_forward(qkv, widths, seq_len, attention)
    a_fp8, a_scale = _quantize(_ops._attention_input(qkv, out, widths, attention))
    x1 = x.new_empty(m, d)
    parts = run("out_proj_fp8_rowwise", {"A": a_fp8, "B": q_o.t(), "a_scale": a_scale, "b_scale": s_o,
                                         "residual": x.contiguous(), "gamma": mlp_norm},
                {"x1": x1}, m, d, widths.q, partials=("x1_sumsq", "h_amax"))
    rstd1 = _steps.rstd(parts["x1_sumsq"], m, d, eps, x)
    h1, h1_scale = _quantize(x1, parts["h_amax"], mlp_norm)

    f2 = w_gate_up.shape[0]
    z = x.new_empty(m, f2)
    y = x.new_empty(m, f2 // 2)
    parts = run("gate_up_swiglu_fp8_rowwise", {"A": h1, "B": q_gu.t(), "a_scale": h1_scale, "b_scale": s_gu,
                                               "rstd": rstd1}, {"z": z, "y": y}, m, f2, d, partials=("y_amax",))
    y_fp8, y_scale = _quantize(y, parts["y_amax"])
    x2 = x.new_empty(m, d)
    down = {"A": y_fp8, "B": q_d.t(), "a_scale": y_scale, "b_scale": s_d, "residual": x1, "gamma": next_gamma}
    if fp8_out:
        parts = run("out_proj_fp8_rowwise", down, {"x1": x2}, m, d, f2 // 2, partials=("x1_sumsq", "h_amax"))
        h2, h2_scale = _quantize(x2, parts["h_amax"], next_gamma)
    else:
        h2 = x.new_empty(m, d)
        parts = run("out_proj_fp8_rowwise_bf16_h", down, {"x1": x2, "h": h2}, m, d, f2 // 2, partials=("x1_sumsq",))
        h2_scale = x.new_empty(0, dtype=torch.float32)
    rstd2 = _steps.rstd(parts["x1_sumsq"], m, d, eps, x)
    return (x2, h2, rstd2, h2_scale, qkv, out, lse, seed, offset, x1, rstd1, z,
            t_qkv, ts_qkv, t_o, ts_o, t_gu, ts_gu, t_d, ts_d)


@fake(decoder_layer_fp8_rowwise)
def _(x, h, h_scale, rstd, attn_norm, w_qkv, w_o, mlp_norm, w_gate_up, w_down, next_gamma, pos, theta, eps, n_heads,
      seq_len, attention, fp8_out, fp8_wgrad=False, w_qkv_grad=None, w_o_grad=None, w_gate_up_grad=None,
      w_down_grad=None):
    m, d = x.shape
    check_fp8_wgrad(fp8_wgrad, m)
    qkv = x.new_empty(m, w_qkv.shape[0])
    out, lse, seed, offset = _ops._attention_forward(qkv, _ops._Widths(w_qkv, w_o, n_heads), seq_len, attention)
    h2 = x.new_empty(m, d, dtype=_E4M3) if fp8_out else x.new_empty(m, d)
    h2_scale = x.new_empty(m if fp8_out else 0, dtype=torch.float32)
    transposed = []
    for w in (w_qkv, w_o, w_gate_up, w_down):
        n, k = w.shape
        transposed += [x.new_empty(k, n, dtype=_E4M3), x.new_empty(k, dtype=torch.float32)]
    return (x.new_empty(m, d), h2, x.new_empty(m, dtype=_ops.acc_dtype(x)), h2_scale, qkv, out, lse, seed, offset,
            x.new_empty(m, d), x.new_empty(m, dtype=_ops.acc_dtype(x)), x.new_empty(m, w_gate_up.shape[0]),
            *transposed)


def _norm_backward(name: str, dz_fp8: Tensor, dz_scale: Tensor, w_t: Tensor, w_t_scale: Tensor, x: Tensor,
                   rstd: Tensor, s: Tensor, gamma: Tensor, dx_in: Tensor, fp8_dx: bool):
    """_steps.norm_backward with the residual, on row-wise FP8 operands (dz_fp8 with its row scales, the transposed
    weight with its column scales): (dx, o, dgamma, dx's amax partials or None)."""
    m, d = x.shape
    dx, o = torch.empty_like(x), torch.empty_like(x)
    ins = {"A": dz_fp8, "B": w_t.t(), "a_scale": dz_scale, "b_scale": w_t_scale, "x": x, "rstd": rstd, "s": s,
           "gamma": gamma, "dx_in": dx_in}
    partials = ("dgamma_partials", "dx_amax") if fp8_dx else ("dgamma_partials",)
    parts = run(name, ins, {"dx": dx, "o": o}, m, d, dz_fp8.shape[1], partials=partials)
    return dx, o, _steps.dgamma(parts["dgamma_partials"], gamma), parts.get("dx_amax")


def _column_quantized(t: Tensor) -> tuple[Tensor, Tensor]:
    """t [M x N] transposed, in e4m3 with each column's scale: (t_fp8_t [N x M], the scales f32 [N])."""
    m, n = t.shape
    scale, inv = row_scales(torch.linalg.vector_norm(t, float("inf"), dim=0)[None, :])
    out = torch.empty(n, m, dtype=_E4M3, device=t.device)
    run("quantize_e4m3_colwise_t", {"x": t.contiguous(), "x_fp8_inv_scale": inv}, {"x_fp8_t": out}, m, n)
    return out, scale


def _wgrad(dy: Tensor, x: Tensor, buffer: Optional[Tensor], fp8_wgrad: bool) -> Tensor:
    """dW = dy^T x [N x K] (dy [M x N], x [M x K]): _steps.wgrad in bf16, or with fp8_wgrad on both operands'
    column-scaled transposed e4m3 copies; added into the f32 `buffer` when given (then an empty tensor)."""
    if not fp8_wgrad:
        return _steps.wgrad(dy, x, buffer)
    (dy_t, dy_scale), (x_t, x_scale) = _column_quantized(dy), _column_quantized(x)
    n, k, m = dy.shape[1], x.shape[1], dy.shape[0]
    ins = {"A": dy_t, "B": x_t.t(), "a_scale": dy_scale, "b_scale": x_scale}
    return fp8_weight_gradient(ins, n, k, m, buffer, dy, ("wgrad_fp8_rowwise_accumulate", "dgrad_fp8_rowwise"))


def _rope_backward(blocks, qkv: Tensor, pos: Tensor, theta: Tensor):
    """_steps.rope_backward with dz's row amax partials too: (dz, zdz partials, amax partials of each computed
    block; a block with no gradient is zero)."""
    m, n = qkv.shape
    dz = qkv.new_empty(m, n)
    name = "rope_backward_from_output_fp8_rowwise"
    rows = [partials_rows(name, "zdz_partials", m, width, qkv.device) for _, width in blocks]
    parts = torch.empty(sum(rows), m, dtype=_ops.acc_dtype(qkv), device=qkv.device)
    amaxes = []
    col, row = 0, 0
    for (grad, width), t in zip(blocks, rows):
        cols, prow = slice(col, col + width), parts[row:row + t]
        if grad is None:
            run("zero_grad", {"values": qkv[:, cols]}, {"dz": dz[:, cols], "zdz_partials": prow}, m, width)
        else:
            got = run(name, {"dqkv": grad, "qkv": qkv[:, cols], "pos": pos, "theta": theta[col // 2:(col + width) // 2]},
                      {"dz": dz[:, cols], "zdz_partials": prow}, m, width, partials=("dz_amax",))
            amaxes.append(got["dz_amax"])
        col, row = col + width, row + t
    return dz, parts, amaxes


@torch.library.custom_op("coda::decoder_layer_fp8_rowwise_backward",
                         mutates_args=("w_qkv_grad", "w_o_grad", "w_gate_up_grad", "w_down_grad"))
def decoder_layer_fp8_rowwise_backward(
        dx2: Tensor, x: Tensor, rstd: Tensor, attn_norm: Tensor, mlp_norm: Tensor, pos: Tensor, theta: Tensor,
        qkv: Tensor, out: Tensor, lse: Tensor, seed: Tensor, offset: Tensor, x1: Tensor, rstd1: Tensor, z: Tensor,
        t_qkv: Tensor, ts_qkv: Tensor, t_o: Tensor, ts_o: Tensor, t_gu: Tensor, ts_gu: Tensor, t_d: Tensor,
        ts_d: Tensor, n_heads: int, seq_len: int, attention: str, fp8_wgrad: bool, w_qkv_grad: Optional[Tensor],
        w_o_grad: Optional[Tensor], w_gate_up_grad: Optional[Tensor],
        w_down_grad: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    m, d = x.shape
    f2 = z.shape[1]
    dx2 = dx2.contiguous()
    # MLP: dy = dx2 W_d with SwiGLU's backward in the epilogue, then the norm backward with dx2 joined.
    dx2_fp8, dx2_scale = _quantize(dx2)
    dz = torch.empty_like(z)
    y = z.new_empty(m, f2 // 2)
    parts = run("swiglu_backward_fp8_rowwise", {"A": dx2_fp8, "B": t_d.t(), "a_scale": dx2_scale, "b_scale": ts_d,
                                                "z": z},
                {"dz": dz, "y": y}, m, f2 // 2, d, partials=("zdz_partials", "dz_amax"))
    dz_fp8, dz_scale = _quantize(dz, parts["dz_amax"])
    s = _steps.s_factor(parts["zdz_partials"], m, d, x1)
    dx1, o, d_mlp_norm, dx1_amax = _norm_backward("rmsnorm_backward_residual_fp8_rowwise", dz_fp8, dz_scale, t_gu,
                                                  ts_gu, x1, rstd1, s, mlp_norm, dx2, True)
    dx1_fp8, dx1_scale = _quantize(dx1, dx1_amax)
    dw_down = _wgrad(dx2, y, w_down_grad, fp8_wgrad)
    dw_gate_up = _wgrad(dz, o, w_gate_up_grad, fp8_wgrad)

    # Attention: the out-projection's dgrad, attention's backward, RoPE's backward, the norm backward with dx1 joined.
    widths = _ops._Widths(t_qkv.t(), t_o.t(), n_heads)
    da = x.new_empty(m, widths.q)
    run("dgrad_fp8_rowwise", {"A": dx1_fp8, "B": t_o.t(), "a_scale": dx1_scale, "b_scale": ts_o}, {"D": da},
        m, widths.q, d)
    dw_o = _wgrad(dx1, _ops._attention_input(qkv, out, widths, attention), w_o_grad, fp8_wgrad)
    blocks = _ops._attention_gradient_blocks(da, qkv, out, lse, seed, offset, widths, seq_len, n_heads, attention)
    dzq, zdz, amaxes = _rope_backward(blocks, qkv, pos, theta)
    dzq_fp8, dzq_scale = _quantize(dzq, amaxes)
    s = _steps.s_factor(zdz, m, d, x)
    dx, o, d_attn_norm, _ = _norm_backward("rmsnorm_backward_residual_fp8_rowwise_bf16_dx", dzq_fp8, dzq_scale, t_qkv,
                                           ts_qkv, x, rstd, s, attn_norm, dx1, False)
    dw_qkv = _wgrad(dzq, o, w_qkv_grad, fp8_wgrad)
    return dx, d_attn_norm, d_mlp_norm, dw_qkv, dw_o, dw_gate_up, dw_down


register_stateless(decoder_layer_fp8_rowwise, decoder_layer_fp8_rowwise_backward)


@torch.library.custom_op("coda::rms_stats_fp8_rowwise", mutates_args=())
def rms_stats_fp8_rowwise(x: Tensor, gamma: Tensor, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """The embedding entry in row-wise FP8: h_fp8 = x * gamma under each row's scale (e4m3), rstd, and the row scales
    f32 [M]."""
    m, d = x.shape
    x = x.contiguous()
    parts = run("rms_entry_fp8_rowwise", {"x": x, "gamma": gamma}, {}, m, d, partials=("x1_sumsq", "h_amax"))
    h, h_scale = _quantize(x, parts["h_amax"], gamma)
    return h, _steps.rstd(parts["x1_sumsq"], m, d, eps, x), h_scale


@fake(rms_stats_fp8_rowwise)
def _(x, gamma, eps):
    m, d = x.shape
    return (x.new_empty(x.shape, dtype=_E4M3), x.new_empty(m, dtype=_ops.acc_dtype(x)),
            x.new_empty(m, dtype=torch.float32))


def _rms_stats_setup(ctx, inputs, output):
    no_gradient(ctx, *output)


rms_stats_fp8_rowwise.register_autograd(lambda ctx, dh, drstd, dscale: (None,) * 3, setup_context=_rms_stats_setup)
