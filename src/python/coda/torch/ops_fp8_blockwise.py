"""A decoder layer in block-wise FP8 (issue 28, the "blockwise" recipe of coda.torch.fp8: DeepSeek-V3's scales) as one
torch custom op with its backward: torch.ops.coda.decoder_layer_fp8_blockwise and decoder_layer_fp8_blockwise_backward.

Every FP8 GEMM is block-scaled (coda.blocks' *_fp8_blockwise graphs): its A comes with one scale per row and 128 k,
its weight with one per 128 x 128 block, and the mainloop applies them. All FP8 tensors are e4m3, gradients too (a
scale per 128 values carries their range). The scales come from each block's own amax, so there is no state, no
history and no first steps on priors:
  - forward: QKV reads h_fp8 (the previous layer's down projection or the embedding entry wrote it with its scales),
    the out-projection attention's output (quantize_e4m3_blockwise: SDPA writes bf16), gate/up h1_fp8 (from the
    out-projection's epilogue), down y (quantize_e4m3_blockwise: half width, too narrow to stage in FP8);
  - backward: the down projection's dgrad with SwiGLU's backward reads dx2 (quantized by a tile program: it comes from
    the next layer's op), gate/up's dgrad with the norm backward dz_fp8 (from SwiGLU's backward epilogue; dz is double
    width, so its groups are 256 of its columns and each scale stands for two k-blocks), the out-projection's dgrad
    dx1_fp8 (from that epilogue), QKV's dgrad RoPE's backward dz (quantized by a tile program: made in its epilogue the
    rotation would be computed twice, which spills);
  - the four weight-gradient GEMMs in bf16, from the bf16 tensors stored beside the FP8 ones, as in "tensorwise";
    or with fp8_wgrad in FP8, both operands quantized along the tokens (each bf16 operand read transposed and
    quantized in one pass, quantize_e4m3_blockwise_t: one scale per feature and 128 tokens) on
    coda.blocks.wgrad_fp8_blockwise_accumulate (B's scales per row).
Weights are quantized at each forward, or once inside fp8.reuse_weights (fp8.quantize_weight_blockwise), their
transposes and scales kept for the backward."""
from typing import Optional

import torch
from torch import Tensor

from coda.torch import _steps
from coda.torch import ops as _ops
from coda.torch._kernels import run, scaled_mm_name
from coda.torch._fp8_layers import check_fp8_wgrad, fp8_weight_gradient, register_stateless
from coda.torch._register import fake, no_gradient
from coda.torch.fp8 import BLOCK, FORMATS, quantize_blockwise, quantize_blockwise_t, quantize_weight_blockwise

_E4M3 = FORMATS["e4m3"]


def _blocks(n: int) -> int:
    return -(-n // BLOCK)


def _scales(partials: Tensor) -> Tensor:
    # A GEMM's A_scale from an epilogue's scale partials (f32 on the GPU, float64 from the CPU reference).
    return partials.to(torch.float32)


def _check_h(h: Tensor, h_scale: Tensor, m: int, d: int) -> None:
    if h.dtype != _E4M3:
        raise ValueError(f"coda.torch: a block-wise FP8 layer reads h in float8_e4m3fn (the previous FP8 epilogue's), "
                         f"got {h.dtype}")
    if tuple(h_scale.shape) != (_blocks(d), m) or h_scale.dtype != torch.float32:
        raise ValueError(f"coda.torch: a block-wise FP8 layer reads h's scales as float32 [ceil(d / 128) x M] = "
                         f"[{_blocks(d)} x {m}] (one per row and 128 columns), got {h_scale.dtype} "
                         f"{tuple(h_scale.shape)}")


def _wgrad(dy: Tensor, x: Tensor, buffer: Optional[Tensor], fp8_wgrad: bool) -> Tensor:
    """dW = dy^T x ([N x K] for dy [M x N], x [M x K]): in bf16 (_steps.wgrad), or with fp8_wgrad on both operands
    transposed and quantized along the tokens, [N x M] and [K x M] e4m3 with [ceil(M / 128) x N] and
    [ceil(M / 128) x K] scales: A_scale and B_scale of a GEMM with B's scales per row."""
    if not fp8_wgrad:
        return _steps.wgrad(dy, x, buffer)
    dy_t, dy_scale = quantize_blockwise_t(dy)
    x_t, x_scale = quantize_blockwise_t(x)
    ins = {"A": dy_t, "B": x_t.t(), "A_scale": dy_scale, "B_scale": x_scale}
    return fp8_weight_gradient(ins, dy.shape[1], x.shape[1], dy.shape[0], buffer, dy,
                               ("wgrad_fp8_blockwise_accumulate", scaled_mm_name("blockwise_1x128", "e4m3", "e4m3")))


@torch.library.custom_op("coda::decoder_layer_fp8_blockwise", mutates_args=())
def decoder_layer_fp8_blockwise(x: Tensor, h: Tensor, h_scale: Tensor, rstd: Tensor, attn_norm: Tensor,
                                w_qkv: Tensor, w_o: Tensor, mlp_norm: Tensor, w_gate_up: Tensor, w_down: Tensor,
                                next_gamma: Tensor, pos: Tensor, theta: Tensor, eps: float, n_heads: int,
                                seq_len: int, attention: str, fp8_out: bool, fp8_wgrad: bool = False,
                                w_qkv_grad: Optional[Tensor] = None, w_o_grad: Optional[Tensor] = None,
                                w_gate_up_grad: Optional[Tensor] = None,
                                w_down_grad: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor,
                                                                               Tensor, Tensor, Tensor, Tensor, Tensor,
                                                                               Tensor, Tensor, Tensor, Tensor, Tensor,
                                                                               Tensor, Tensor, Tensor, Tensor,
                                                                               Tensor]:
    m, d = x.shape
    _check_h(h, h_scale, m, d)
    check_fp8_wgrad(fp8_wgrad, m)
    widths = _ops._Widths(w_qkv, w_o, n_heads)
    (q_qkv, s_qkv, t_qkv, ts_qkv), (q_o, s_o, t_o, ts_o), (q_gu, s_gu, t_gu, ts_gu), (q_d, s_d, t_d, ts_d) = [
        quantize_weight_blockwise(w) for w in (w_qkv, w_o, w_gate_up, w_down)]

    n = w_qkv.shape[0]
    qkv = x.new_empty(m, n)
    run("qkv_rope_fp8_blockwise", {"A": h, "B": q_qkv.t(), "A_scale": h_scale, "B_scale": s_qkv, "rstd": rstd,
                                   "pos": pos, "theta": theta}, {"qkv": qkv}, m, n, d)
    out, lse, seed, offset = _ops._attention_forward(qkv, widths, seq_len, attention)
    a_fp8, a_scale = quantize_blockwise(_ops._attention_input(qkv, out, widths, attention))
    x1 = x.new_empty(m, d)
    h1 = torch.empty(m, d, dtype=_E4M3, device=x.device)
    parts = run("out_proj_fp8_blockwise", {"A": a_fp8, "B": q_o.t(), "A_scale": a_scale, "B_scale": s_o,
                                           "residual": x.contiguous(), "gamma": mlp_norm},
                {"x1": x1, "h_fp8": h1}, m, d, widths.q, partials=("x1_sumsq", "h_scale_partials"))
    rstd1 = _steps.rstd(parts["x1_sumsq"], m, d, eps, x)

    f2 = w_gate_up.shape[0]
    z = x.new_empty(m, f2)
    y = x.new_empty(m, f2 // 2)
    run("gate_up_swiglu_fp8_blockwise", {"A": h1, "B": q_gu.t(), "A_scale": _scales(parts["h_scale_partials"]),
                                         "B_scale": s_gu, "rstd": rstd1}, {"z": z, "y": y}, m, f2, d)
    y_fp8, y_scale = quantize_blockwise(y)
    x2 = x.new_empty(m, d)
    down = {"A": y_fp8, "B": q_d.t(), "A_scale": y_scale, "B_scale": s_d, "residual": x1, "gamma": next_gamma}
    if fp8_out:
        h2 = torch.empty(m, d, dtype=_E4M3, device=x.device)
        parts = run("out_proj_fp8_blockwise", down, {"x1": x2, "h_fp8": h2}, m, d, f2 // 2,
                    partials=("x1_sumsq", "h_scale_partials"))
        h2_scale = _scales(parts["h_scale_partials"])
    else:
        h2 = x.new_empty(m, d)
        parts = run("out_proj_fp8_blockwise_bf16_h", down, {"x1": x2, "h": h2}, m, d, f2 // 2, partials=("x1_sumsq",))
        h2_scale = x.new_empty(0, dtype=torch.float32)
    rstd2 = _steps.rstd(parts["x1_sumsq"], m, d, eps, x)
    return (x2, h2, rstd2, h2_scale, qkv, out, lse, seed, offset, x1, rstd1, z,
            t_qkv, ts_qkv, t_o, ts_o, t_gu, ts_gu, t_d, ts_d)


@fake(decoder_layer_fp8_blockwise)
def _(x, h, h_scale, rstd, attn_norm, w_qkv, w_o, mlp_norm, w_gate_up, w_down, next_gamma, pos, theta, eps, n_heads,
      seq_len, attention, fp8_out, fp8_wgrad=False, w_qkv_grad=None, w_o_grad=None, w_gate_up_grad=None,
      w_down_grad=None):
    m, d = x.shape
    qkv = x.new_empty(m, w_qkv.shape[0])
    out, lse, seed, offset = _ops._attention_forward(qkv, _ops._Widths(w_qkv, w_o, n_heads), seq_len, attention)
    h2 = x.new_empty(m, d, dtype=_E4M3) if fp8_out else x.new_empty(m, d)
    h2_scale = x.new_empty((_blocks(d), m) if fp8_out else (0,), dtype=torch.float32)
    transposed = []
    for w in (w_qkv, w_o, w_gate_up, w_down):
        n, k = w.shape
        transposed += [x.new_empty(k, n, dtype=_E4M3), x.new_empty(_blocks(k), _blocks(n), dtype=torch.float32)]
    return (x.new_empty(m, d), h2, x.new_empty(m, dtype=_ops.acc_dtype(x)), h2_scale, qkv, out, lse, seed, offset,
            x.new_empty(m, d), x.new_empty(m, dtype=_ops.acc_dtype(x)), x.new_empty(m, w_gate_up.shape[0]),
            *transposed)


def _norm_backward(name: str, dz_fp8: Tensor, dz_scale: Tensor, w_t: Tensor, w_t_scale: Tensor, x: Tensor,
                   rstd: Tensor, s: Tensor, gamma: Tensor, dx_in: Tensor, fp8_dx: bool):
    """_steps.norm_backward with the residual, on a block-scaled GEMM (dz_fp8 and its scales, the transposed weight
    and its): (dx, o, dgamma, dx_fp8 or None, dx's scales or None)."""
    m, d = x.shape
    dx, o = torch.empty_like(x), torch.empty_like(x)
    ins = {"A": dz_fp8, "B": w_t.t(), "A_scale": dz_scale, "B_scale": w_t_scale, "x": x, "rstd": rstd, "s": s,
           "gamma": gamma, "dx_in": dx_in}
    outs = {"dx": dx, "o": o}
    partials = ("dgamma_partials",)
    dx_fp8 = None
    if fp8_dx:
        dx_fp8 = torch.empty(m, d, dtype=_E4M3, device=x.device)
        outs["dx_fp8"] = dx_fp8
        partials += ("dx_scale_partials",)
    parts = run(name, ins, outs, m, d, dz_fp8.shape[1], partials=partials)
    dx_scale = _scales(parts["dx_scale_partials"]) if fp8_dx else None
    return dx, o, _steps.dgamma(parts["dgamma_partials"], gamma), dx_fp8, dx_scale


@torch.library.custom_op("coda::decoder_layer_fp8_blockwise_backward",
                         mutates_args=("w_qkv_grad", "w_o_grad", "w_gate_up_grad", "w_down_grad"))
def decoder_layer_fp8_blockwise_backward(
        dx2: Tensor, x: Tensor, rstd: Tensor, attn_norm: Tensor, mlp_norm: Tensor, pos: Tensor, theta: Tensor,
        qkv: Tensor, out: Tensor, lse: Tensor, seed: Tensor, offset: Tensor, x1: Tensor, rstd1: Tensor, z: Tensor,
        t_qkv: Tensor, ts_qkv: Tensor, t_o: Tensor, ts_o: Tensor, t_gu: Tensor, ts_gu: Tensor, t_d: Tensor,
        ts_d: Tensor, n_heads: int, seq_len: int, attention: str, fp8_wgrad: bool, w_qkv_grad: Optional[Tensor],
        w_o_grad: Optional[Tensor], w_gate_up_grad: Optional[Tensor],
        w_down_grad: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    m, d = x.shape
    check_fp8_wgrad(fp8_wgrad, m)
    f2 = z.shape[1]
    dx2 = dx2.contiguous()
    # MLP: dy = dx2 W_d with SwiGLU's backward in the epilogue, then the norm backward with dx2 joined.
    dx2_fp8, dx2_scale = quantize_blockwise(dx2)
    dz = torch.empty_like(z)
    dz_fp8 = torch.empty(m, f2, dtype=_E4M3, device=x.device)
    y = z.new_empty(m, f2 // 2)
    parts = run("swiglu_backward_fp8_blockwise", {"A": dx2_fp8, "B": t_d.t(), "A_scale": dx2_scale,
                                                  "B_scale": ts_d, "z": z},
                {"dz": dz, "y": y, "dz_fp8": dz_fp8}, m, f2 // 2, d, partials=("zdz_partials", "dz_scale_partials"))
    # dz's groups are 256 of its columns (128 of the GEMM's): each scale is that of two of gate/up's k-blocks.
    dz_scale = _scales(parts["dz_scale_partials"]).repeat_interleave(2, 0)[:_blocks(f2)].contiguous()
    s = _steps.s_factor(parts["zdz_partials"], m, d, x1)
    dx1, o, d_mlp_norm, dx1_fp8, dx1_scale = _norm_backward("rmsnorm_backward_residual_fp8_blockwise", dz_fp8,
                                                            dz_scale, t_gu, ts_gu, x1, rstd1, s, mlp_norm, dx2, True)
    dw_down = _wgrad(dx2, y, w_down_grad, fp8_wgrad)
    dw_gate_up = _wgrad(dz, o, w_gate_up_grad, fp8_wgrad)

    # Attention: the out-projection's dgrad, attention's backward, RoPE's backward, the norm backward with dx1 joined.
    widths = _ops._Widths(t_qkv.t(), t_o.t(), n_heads)
    da = x.new_empty(m, widths.q)
    run("dgrad_fp8_blockwise", {"A": dx1_fp8, "B": t_o.t(), "A_scale": dx1_scale, "B_scale": ts_o}, {"D": da},
        m, widths.q, d)
    dw_o = _wgrad(dx1, _ops._attention_input(qkv, out, widths, attention), w_o_grad, fp8_wgrad)
    blocks = _ops._attention_gradient_blocks(da, qkv, out, lse, seed, offset, widths, seq_len, n_heads, attention)
    dzq, zdz = _steps.rope_backward(blocks, qkv, pos, theta)
    dzq_fp8, dzq_scale = quantize_blockwise(dzq)
    s = _steps.s_factor(zdz, m, d, x)
    dx, o, d_attn_norm, _, _ = _norm_backward("rmsnorm_backward_residual_fp8_blockwise_bf16_dx", dzq_fp8, dzq_scale,
                                              t_qkv, ts_qkv, x, rstd, s, attn_norm, dx1, False)
    dw_qkv = _wgrad(dzq, o, w_qkv_grad, fp8_wgrad)
    return dx, d_attn_norm, d_mlp_norm, dw_qkv, dw_o, dw_gate_up, dw_down


register_stateless(decoder_layer_fp8_blockwise, decoder_layer_fp8_blockwise_backward)


@torch.library.custom_op("coda::rms_stats_fp8_blockwise", mutates_args=())
def rms_stats_fp8_blockwise(x: Tensor, gamma: Tensor, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """The embedding entry in block-wise FP8: h_fp8 = x * gamma / h_scale (e4m3) with h's scales f32
    [ceil(d / 128) x M], and rstd."""
    m, d = x.shape
    h = torch.empty(m, d, dtype=_E4M3, device=x.device)
    parts = run("rms_entry_fp8_blockwise", {"x": x.contiguous(), "gamma": gamma}, {"h_fp8": h}, m, d,
                partials=("x1_sumsq", "h_scale_partials"))
    return h, _steps.rstd(parts["x1_sumsq"], m, d, eps, x), _scales(parts["h_scale_partials"])


@fake(rms_stats_fp8_blockwise)
def _(x, gamma, eps):
    m, d = x.shape
    return (x.new_empty(x.shape, dtype=_E4M3), x.new_empty(m, dtype=_ops.acc_dtype(x)),
            x.new_empty(_blocks(d), m, dtype=torch.float32))


def _rms_stats_setup(ctx, inputs, output):
    no_gradient(ctx, *output)


rms_stats_fp8_blockwise.register_autograd(lambda ctx, dh, drstd, dscale: (None,) * 3,
                                          setup_context=_rms_stats_setup)
