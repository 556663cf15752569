"""A decoder layer in FP8 (issue 28, the "tensorwise" recipe of coda.torch.fp8) as one torch custom op with its
backward: torch.ops.coda.decoder_layer_fp8 and decoder_layer_fp8_backward.

Which GEMM reads what:
  - forward, e4m3 x e4m3: QKV (h_fp8, which the previous layer's down projection or the embedding entry wrote),
    out-projection (attention's output, quantized by a tile program: SDPA's kernels write bf16), gate/up (h1_fp8 from
    the out-projection's epilogue), down (y, quantized by a tile program: a half-width FP8 tile is too narrow for the
    epilogue to stage);
  - backward, e5m2 gradients x e4m3 transposed weights: the down projection's dgrad with SwiGLU's backward (dx2,
    quantized by a tile program: it comes from the next layer's op), gate/up's dgrad with the norm backward (dz_fp8
    from SwiGLU's backward epilogue), the out-projection's dgrad (dx1_fp8 from that epilogue), QKV's dgrad with the
    norm backward (dz_fp8 from the RoPE backward program);
  - the four weight-gradient GEMMs in bf16, from the bf16 tensors stored beside the FP8 ones (as torchao's
    recipes with a high-precision weight gradient keep them); or, with fp8_wgrad, in FP8 as torchao's tensorwise
    recipe has them: dW = dY^T X on e5m2 x e4m3 operands that are transposed copies (store_transposed) written where
    the tensors are made (the *_t graphs: attention's output in the forward, dx2 by its quantize program, dz and the
    recomputed y by SwiGLU's backward, dx1 and the norms' outputs o by the norm backwards, dz by RoPE's backward),
    under each tensor's own delayed scale (the o's have slots of their own). Tokens (M) must then be a multiple of 16:
    the K-major rows of those operands, which TMA loads.
One op a layer, not two as in bf16, so that the out-projection's dgrad reads the FP8 dx1 the MLP backward wrote.

The layer's own Fp8Scaling state (fp8.py) holds the delayed scales of SLOTS. The forward quantizes with `scales`, the
copy of them the module took when its step began (Fp8Scaling.scales), and keeps it for the backward: a tensor the
forward quantized is dequantized there with the scale it was made with, whatever updates ran in between (a loss over
two forwards, micro-batches in flight). It returns the amax it saw of each of its tensors (an op with autograd may not
write its inputs; the module adds them with Fp8Scaling.record). The backward quantizes the gradients under the scales
the state holds when it runs and writes their amax into the state (a mutated argument). The weights' scales come from
their quantization in the forward (dynamic), which also keeps their transposes for the backward."""
from typing import Optional

import torch
from torch import Tensor

from coda.torch import _steps
from coda.torch import ops as _ops
from coda.torch._kernels import partials_rows, run
from coda.torch._fp8_layers import check_fp8_wgrad, fp8_weight_gradient, weight_grad_like
from coda.torch._register import fake, no_gradient
from coda.torch.fp8 import AMAX, FORMATS, INV_SCALE, SCALE, quantize, quantize_weight, record_amax

# The tensors of a layer quantized under delayed scales, in the order of Fp8Scaling's state.
SLOTS = {"attn_out": "e4m3", "h_mlp": "e4m3", "y": "e4m3", "h_next": "e4m3",
         "dx2": "e5m2", "dz_mlp": "e5m2", "dx1": "e5m2", "dz_qkv": "e5m2",
         "o_mlp": "e4m3", "o_qkv": "e4m3"}  # the last two: the norm backwards' outputs, for FP8 weight gradients
_SLOT = {name: i for i, name in enumerate(SLOTS)}
_E4M3, _E5M2 = FORMATS["e4m3"], FORMATS["e5m2"]
_W_QKV, _W_O, _W_GU, _W_D = range(4)  # rows of the weights' scales


def _scale(state: Tensor, slot: str) -> Tensor:
    return state[SCALE, _SLOT[slot]]


def _inv(state: Tensor, slot: str) -> Tensor:
    return state[INV_SCALE, _SLOT[slot]]


@torch.library.custom_op("coda::decoder_layer_fp8", mutates_args=())
def decoder_layer_fp8(x: Tensor, h: Tensor, h_scale: Tensor, rstd: Tensor, attn_norm: Tensor, w_qkv: Tensor,
                      w_o: Tensor, mlp_norm: Tensor, w_gate_up: Tensor, w_down: Tensor, next_gamma: Tensor,
                      pos: Tensor, theta: Tensor, scales: Tensor, state: Tensor, eps: float, n_heads: int,
                      seq_len: int,
                      attention: str, fp8_out: bool, fp8_wgrad: bool = False,
                      w_qkv_grad: Optional[Tensor] = None, w_o_grad: Optional[Tensor] = None,
                      w_gate_up_grad: Optional[Tensor] = None,
                      w_down_grad: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor,
                                                                     Tensor, Tensor, Tensor, Tensor, Tensor, Tensor,
                                                                     Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    if h.dtype != _E4M3:
        raise ValueError(f"coda.torch: an FP8 layer reads h in float8_e4m3fn (the previous FP8 epilogue's), got "
                         f"{h.dtype}")
    m, d = x.shape
    check_fp8_wgrad(fp8_wgrad, m)
    widths = _ops._Widths(w_qkv, w_o, n_heads)
    quantized = [quantize_weight(w) for w in (w_qkv, w_o, w_gate_up, w_down)]
    (q_qkv, t_qkv, s_qkv), (q_o, t_o, s_o), (q_gu, t_gu, s_gu), (q_d, t_d, s_d) = quantized
    w_scales = torch.stack([s_qkv, s_o, s_gu, s_d])
    amax = scales.new_zeros(scales.shape[1])  # this forward's, for Fp8Scaling.record (an op with autograd writes no input)

    n = w_qkv.shape[0]
    qkv = x.new_empty(m, n)
    run("qkv_rope_fp8", {"A": h, "B": q_qkv.t(), "a_scale": h_scale, "b_scale": w_scales[_W_QKV], "rstd": rstd,
                         "pos": pos, "theta": theta}, {"qkv": qkv}, m, n, d)
    out, lse, seed, offset = _ops._attention_forward(qkv, widths, seq_len, attention)
    a = _ops._attention_input(qkv, out, widths, attention)
    if fp8_wgrad:  # a's transposed copy too, for dW_o
        a_fp8, a_t = quantize(a, "e4m3", _inv(scales, "attn_out"), amax, _SLOT["attn_out"], transposed=True)
    else:
        a_fp8, a_t = quantize(a, "e4m3", _inv(scales, "attn_out"), amax, _SLOT["attn_out"]), x.new_empty(0, dtype=_E4M3)
    x1 = x.new_empty(m, d)
    h1 = torch.empty(m, d, dtype=_E4M3, device=x.device)
    parts = run("out_proj_fp8", {"A": a_fp8, "B": q_o.t(), "a_scale": _scale(scales, "attn_out"),
                                 "b_scale": w_scales[_W_O], "residual": x.contiguous(), "gamma": mlp_norm,
                                 "h_fp8_inv_scale": _inv(scales, "h_mlp")},
                {"x1": x1, "h_fp8": h1}, m, d, widths.q, partials=("x1_sumsq", "h_amax"))
    record_amax([parts["h_amax"]], amax, _SLOT["h_mlp"])
    rstd1 = _steps.rstd(parts["x1_sumsq"], m, d, eps, x)

    f2 = w_gate_up.shape[0]
    z = x.new_empty(m, f2)
    y = x.new_empty(m, f2 // 2)
    run("gate_up_swiglu_fp8", {"A": h1, "B": q_gu.t(), "a_scale": _scale(scales, "h_mlp"),
                               "b_scale": w_scales[_W_GU], "rstd": rstd1}, {"z": z, "y": y}, m, f2, d)
    y_fp8 = quantize(y, "e4m3", _inv(scales, "y"), amax, _SLOT["y"])
    x2 = x.new_empty(m, d)
    down = {"A": y_fp8, "B": q_d.t(), "a_scale": _scale(scales, "y"), "b_scale": w_scales[_W_D], "residual": x1,
            "gamma": next_gamma}
    if fp8_out:
        h2 = torch.empty(m, d, dtype=_E4M3, device=x.device)
        parts = run("out_proj_fp8", {**down, "h_fp8_inv_scale": _inv(scales, "h_next")}, {"x1": x2, "h_fp8": h2},
                    m, d, f2 // 2, partials=("x1_sumsq", "h_amax"))
        record_amax([parts["h_amax"]], amax, _SLOT["h_next"])
    else:
        h2 = x.new_empty(m, d)
        parts = run("out_proj_fp8_bf16_h", down, {"x1": x2, "h": h2}, m, d, f2 // 2, partials=("x1_sumsq",))
    rstd2 = _steps.rstd(parts["x1_sumsq"], m, d, eps, x)
    return x2, h2, rstd2, amax, qkv, out, lse, seed, offset, x1, rstd1, z, t_qkv, t_o, t_gu, t_d, w_scales, a_t


@fake(decoder_layer_fp8)
def _(x, h, h_scale, rstd, attn_norm, w_qkv, w_o, mlp_norm, w_gate_up, w_down, next_gamma, pos, theta, scales, state,
      eps, n_heads, seq_len, attention, fp8_out, fp8_wgrad=False, w_qkv_grad=None, w_o_grad=None,
      w_gate_up_grad=None, w_down_grad=None):
    m, d = x.shape
    check_fp8_wgrad(fp8_wgrad, m)
    qkv = x.new_empty(m, w_qkv.shape[0])
    out, lse, seed, offset = _ops._attention_forward(qkv, _ops._Widths(w_qkv, w_o, n_heads), seq_len, attention)
    h2 = x.new_empty(m, d, dtype=_E4M3) if fp8_out else x.new_empty(m, d)
    transposed = [x.new_empty(w.shape[1], w.shape[0], dtype=_E4M3) for w in (w_qkv, w_o, w_gate_up, w_down)]
    return (x.new_empty(m, d), h2, x.new_empty(m, dtype=_ops.acc_dtype(x)), scales.new_empty(scales.shape[1]), qkv, out,
            lse, seed, offset,
            x.new_empty(m, d), x.new_empty(m, dtype=_ops.acc_dtype(x)), x.new_empty(m, w_gate_up.shape[0]),
            *transposed, x.new_empty(4, dtype=torch.float32),
            x.new_empty((w_o.shape[1], m) if fp8_wgrad else (0,), dtype=_E4M3))


def _rope_backward_fp8(blocks, qkv: Tensor, pos: Tensor, theta: Tensor, state: Tensor, fp8_wgrad: bool):
    """_steps.rope_backward, also writing dz in e5m2 under the dz_qkv slot's scale: (dz, dz_fp8, zdz partials). With
    fp8_wgrad, dz only in e5m2, both ways: (dz_fp8_t [N x M], dz_fp8, zdz partials)."""
    m, n = qkv.shape
    dz = qkv.new_empty(n, m, dtype=_E5M2) if fp8_wgrad else qkv.new_empty(m, n)
    dz_fp8 = torch.empty(m, n, dtype=_E5M2, device=qkv.device)
    name = "rope_backward_from_output_fp8_t" if fp8_wgrad else "rope_backward_from_output_fp8"
    rows = [partials_rows(name, "zdz_partials", m, width, qkv.device) for _, width in blocks]
    parts = torch.empty(sum(rows), m, dtype=_ops.acc_dtype(qkv), device=qkv.device)
    amaxes = []
    col, row = 0, 0
    for (grad, width), t in zip(blocks, rows):
        cols, prow = slice(col, col + width), parts[row:row + t]
        # A column block of dz is a row block of its transpose.
        outs = {"dz_fp8_t" if fp8_wgrad else "dz": dz[cols] if fp8_wgrad else dz[:, cols], "dz_fp8": dz_fp8[:, cols],
                "zdz_partials": prow}
        inv = {"dz_fp8_inv_scale": _inv(state, "dz_qkv")}
        if grad is None:
            got = run("zero_grad_fp8_t" if fp8_wgrad else "zero_grad_fp8", {"values": qkv[:, cols], **inv}, outs, m,
                      width, partials=("dz_amax",))
        else:
            got = run(name, {"dqkv": grad, "qkv": qkv[:, cols], "pos": pos, "theta": theta[col // 2:(col + width) // 2],
                             **inv}, outs, m, width, partials=("dz_amax",))
        amaxes.append(got["dz_amax"])
        col, row = col + width, row + t
    record_amax(amaxes, state[AMAX], _SLOT["dz_qkv"])
    return dz, dz_fp8, parts


def _norm_backward_fp8(name: str, dz_fp8: Tensor, slot: str, w_t: Tensor, w_scale: Tensor, x: Tensor, rstd: Tensor,
                       s: Tensor, gamma: Tensor, dx_in: Tensor, state: Tensor, dx_slot: Optional[str],
                       o_slot: Optional[str] = None):
    """_steps.norm_backward with the residual, on FP8 operands (dz_fp8 under `slot`'s scale, and the transposed
    weight): (dx, o, dgamma, dx_fp8 or None, dx_fp8_t or None). With dx_slot, dx is also written in e5m2 under that
    slot's scale. With o_slot (FP8 weight gradients, the *_t graphs), o comes only transposed in e4m3 under that
    slot's scale, and so does dx's FP8 copy."""
    m, d = x.shape
    transposed = o_slot is not None
    dx = torch.empty_like(x)
    ins = {"A": dz_fp8, "B": w_t.t(), "a_scale": _scale(state, slot), "b_scale": w_scale, "x": x, "rstd": rstd,
           "s": s, "gamma": gamma, "dx_in": dx_in}
    if transposed:
        o = torch.empty(d, m, dtype=_E4M3, device=x.device)
        ins["o_fp8_inv_scale"] = _inv(state, o_slot)
        outs = {"dx": dx, "o_fp8_t": o}
        partials = ("dgamma_partials", "o_amax")
    else:
        o = torch.empty_like(x)
        outs = {"dx": dx, "o": o}
        partials = ("dgamma_partials",)
    dx_fp8 = dx_fp8_t = None
    if dx_slot is not None:
        dx_fp8 = torch.empty(m, d, dtype=_E5M2, device=x.device)
        ins["dx_fp8_inv_scale"] = _inv(state, dx_slot)
        outs["dx_fp8"] = dx_fp8
        if transposed:
            dx_fp8_t = torch.empty(d, m, dtype=_E5M2, device=x.device)
            outs["dx_fp8_t"] = dx_fp8_t
        partials += ("dx_amax",)
    parts = run(name + ("_t" if transposed else ""), ins, outs, m, d, dz_fp8.shape[1], partials=partials)
    if dx_slot is not None:
        record_amax([parts["dx_amax"]], state[AMAX], _SLOT[dx_slot])
    if transposed:
        record_amax([parts["o_amax"]], state[AMAX], _SLOT[o_slot])
    return dx, o, _steps.dgamma(parts["dgamma_partials"], gamma), dx_fp8, dx_fp8_t


def _wgrad_fp8(dy_t: Tensor, x_t: Tensor, dy_slot: str, x_slot: str, state: Tensor, x_scales: Tensor,
               buffer: Optional[Tensor], like: Tensor) -> Tensor:
    """dW = dY^T X [N x K] from the transposed FP8 copies dy_t (e5m2, [N x M]) and x_t (e4m3, [K x M]) under their
    slots' scales (dy's in `state`, x's in `x_scales`: the forward's scales where the forward made x_t): in `like`'s
    dtype, or added into the f32 `buffer` (then an empty tensor)."""
    n, m = dy_t.shape
    k = x_t.shape[0]
    ins = {"A": dy_t, "B": x_t.t(), "a_scale": _scale(state, dy_slot), "b_scale": _scale(x_scales, x_slot)}
    return fp8_weight_gradient(ins, n, k, m, buffer, like, ("wgrad_fp8_accumulate", "dgrad_fp8"))


@torch.library.custom_op("coda::decoder_layer_fp8_backward",
                         mutates_args=("state", "w_qkv_grad", "w_o_grad", "w_gate_up_grad", "w_down_grad"))
def decoder_layer_fp8_backward(dx2: Tensor, x: Tensor, rstd: Tensor, attn_norm: Tensor, mlp_norm: Tensor,
                               pos: Tensor, theta: Tensor, qkv: Tensor, out: Tensor, lse: Tensor, seed: Tensor,
                               offset: Tensor, x1: Tensor, rstd1: Tensor, z: Tensor, t_qkv: Tensor, t_o: Tensor,
                               t_gu: Tensor, t_d: Tensor, w_scales: Tensor, a_t: Tensor, scales: Tensor,
                               state: Tensor, n_heads: int,
                               seq_len: int, attention: str, fp8_wgrad: bool, w_qkv_grad: Optional[Tensor],
                               w_o_grad: Optional[Tensor], w_gate_up_grad: Optional[Tensor],
                               w_down_grad: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor,
                                                                       Tensor]:
    m, d = x.shape
    f2 = z.shape[1]
    dx2 = dx2.contiguous()
    # MLP: dy = dx2 W_d with SwiGLU's backward in the epilogue, then the norm backward with dx2 joined.
    backward = {"A": None, "B": t_d.t(), "a_scale": _scale(state, "dx2"), "b_scale": w_scales[_W_D], "z": z,
                "dz_fp8_inv_scale": _inv(state, "dz_mlp")}
    dz_fp8 = torch.empty(m, f2, dtype=_E5M2, device=x.device)
    if fp8_wgrad:
        backward["A"], dx2_t = quantize(dx2, "e5m2", _inv(state, "dx2"), state[AMAX], _SLOT["dx2"], transposed=True)
        dz_t = torch.empty(f2, m, dtype=_E5M2, device=x.device)
        y_t = torch.empty(f2 // 2, m, dtype=_E4M3, device=x.device)
        # y recomputed from z, quantized under the scale the forward's y had.
        parts = run("swiglu_backward_fp8_t", {**backward, "y_fp8_inv_scale": _inv(scales, "y")},
                    {"dz_fp8": dz_fp8, "dz_fp8_t": dz_t, "y_fp8_t": y_t}, m, f2 // 2, d,
                    partials=("zdz_partials", "dz_amax"))
    else:
        backward["A"] = quantize(dx2, "e5m2", _inv(state, "dx2"), state[AMAX], _SLOT["dx2"])
        dz = torch.empty_like(z)
        y = z.new_empty(m, f2 // 2)
        parts = run("swiglu_backward_fp8", backward, {"dz": dz, "y": y, "dz_fp8": dz_fp8}, m, f2 // 2, d,
                    partials=("zdz_partials", "dz_amax"))
    record_amax([parts["dz_amax"]], state[AMAX], _SLOT["dz_mlp"])
    s = _steps.s_factor(parts["zdz_partials"], m, d, x1)
    o_slot = "o_mlp" if fp8_wgrad else None
    dx1, o, d_mlp_norm, dx1_fp8, dx1_t = _norm_backward_fp8("rmsnorm_backward_residual_fp8", dz_fp8, "dz_mlp", t_gu,
                                                            w_scales[_W_GU], x1, rstd1, s, mlp_norm, dx2, state, "dx1",
                                                            o_slot)
    if fp8_wgrad:
        dw_down = _wgrad_fp8(dx2_t, y_t, "dx2", "y", state, scales, w_down_grad, x)
        dw_gate_up = _wgrad_fp8(dz_t, o, "dz_mlp", "o_mlp", state, state, w_gate_up_grad, x)
    else:
        dw_down = _steps.wgrad(dx2, y, w_down_grad)
        dw_gate_up = _steps.wgrad(dz, o, w_gate_up_grad)

    # Attention: the out-projection's dgrad, attention's backward, RoPE's backward, the norm backward with dx1 joined.
    widths = _ops._Widths(t_qkv.t(), t_o.t(), n_heads)
    da = x.new_empty(m, widths.q)
    run("dgrad_fp8", {"A": dx1_fp8, "B": t_o.t(), "a_scale": _scale(state, "dx1"), "b_scale": w_scales[_W_O]},
        {"D": da}, m, widths.q, d)
    if fp8_wgrad:
        dw_o = _wgrad_fp8(dx1_t, a_t, "dx1", "attn_out", state, scales, w_o_grad, x)
    else:
        dw_o = _steps.wgrad(dx1, _ops._attention_input(qkv, out, widths, attention), w_o_grad)
    blocks = _ops._attention_gradient_blocks(da, qkv, out, lse, seed, offset, widths, seq_len, n_heads, attention)
    dzq, dzq_fp8, zdz = _rope_backward_fp8(blocks, qkv, pos, theta, state, fp8_wgrad)
    s = _steps.s_factor(zdz, m, d, x)
    dx, o, d_attn_norm, _, _ = _norm_backward_fp8("rmsnorm_backward_residual_fp8_bf16_dx", dzq_fp8, "dz_qkv", t_qkv,
                                                  w_scales[_W_QKV], x, rstd, s, attn_norm, dx1, state, None,
                                                  "o_qkv" if fp8_wgrad else None)
    if fp8_wgrad:  # dzq is dz's transposed e5m2 copy
        dw_qkv = _wgrad_fp8(dzq, o, "dz_qkv", "o_qkv", state, state, w_qkv_grad, x)
    else:
        dw_qkv = _steps.wgrad(dzq, o, w_qkv_grad)
    return dx, d_attn_norm, d_mlp_norm, dw_qkv, dw_o, dw_gate_up, dw_down


@fake(decoder_layer_fp8_backward)
def _(dx2, x, rstd, attn_norm, mlp_norm, pos, theta, qkv, out, lse, seed, offset, x1, rstd1, z, t_qkv, t_o, t_gu, t_d,
      w_scales, a_t, scales, state, n_heads, seq_len, attention, fp8_wgrad, w_qkv_grad, w_o_grad, w_gate_up_grad,
      w_down_grad):
    grads = [weight_grad_like(x, t, b)
             for t, b in ((t_qkv, w_qkv_grad), (t_o, w_o_grad), (t_gu, w_gate_up_grad), (t_d, w_down_grad))]
    return (torch.empty_like(x), torch.empty_like(attn_norm), torch.empty_like(mlp_norm), *grads)


_INPUTS = 25  # decoder_layer_fp8's arguments


def _setup(ctx, inputs, output):
    (x, h, h_scale, rstd, attn_norm, w_qkv, w_o, mlp_norm, w_gate_up, w_down, next_gamma, pos, theta, scales, state,
     eps, n_heads, seq_len, attention, fp8_out, fp8_wgrad, *buffers) = inputs
    ctx.n_heads, ctx.seq_len, ctx.attention, ctx.fp8_wgrad = n_heads, seq_len, attention, fp8_wgrad
    ctx.save_for_backward(x, rstd, attn_norm, mlp_norm, pos, theta, *output[4:], scales, *buffers)
    # Not saved as a tensor: the backward writes this step's gradient amaxes into it (as embedding's w_grad).
    ctx.state = state
    ctx.weight_dtypes = tuple(w.dtype for w in (w_qkv, w_o, w_gate_up, w_down))
    no_gradient(ctx, *output[1:])


def _grad(ctx, dx2, *no_grads):
    if dx2 is None:  # x2 reached no loss
        return (None,) * _INPUTS
    saved = ctx.saved_tensors
    x, rstd, attn_norm, mlp_norm, pos, theta = saved[:6]
    qkv, out, lse, seed, offset, x1, rstd1, z, t_qkv, t_o, t_gu, t_d, w_scales, a_t, scales = saved[6:21]
    buffers = saved[21:]
    dx, d_attn, d_mlp, *dws = torch.ops.coda.decoder_layer_fp8_backward(
        dx2, x, rstd, attn_norm, mlp_norm, pos, theta, qkv, out, lse, seed, offset, x1, rstd1, z, t_qkv, t_o, t_gu,
        t_d, w_scales, a_t, scales, ctx.state, ctx.n_heads, ctx.seq_len, ctx.attention, ctx.fp8_wgrad, *buffers)
    dws = [None if b is not None else dw.to(dtype) for dw, b, dtype in zip(dws, buffers, ctx.weight_dtypes)]
    return (dx, None, None, None, d_attn, dws[0], dws[1], d_mlp, dws[2], dws[3]) + (None,) * (_INPUTS - 10)


decoder_layer_fp8.register_autograd(_grad, setup_context=_setup)


@torch.library.custom_op("coda::rms_stats_fp8", mutates_args=())
def rms_stats_fp8(x: Tensor, gamma: Tensor, eps: float, inv_scale: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The embedding entry in FP8: h_fp8 = x * gamma * inv_scale (e4m3), rstd, and h's amax (0-dim, for
    Fp8Scaling.record)."""
    m, d = x.shape
    h = torch.empty(m, d, dtype=_E4M3, device=x.device)
    parts = run("rms_entry_fp8", {"x": x.contiguous(), "gamma": gamma, "h_fp8_inv_scale": inv_scale},
                {"h_fp8": h}, m, d, partials=("x1_sumsq", "h_amax"))
    return h, _steps.rstd(parts["x1_sumsq"], m, d, eps, x), parts["h_amax"].amax().to(torch.float32).reshape(1)


@fake(rms_stats_fp8)
def _(x, gamma, eps, inv_scale):
    return (x.new_empty(x.shape, dtype=_E4M3), x.new_empty(x.shape[0], dtype=_ops.acc_dtype(x)),
            x.new_empty(1, dtype=torch.float32))


def _rms_stats_fp8_setup(ctx, inputs, output):
    no_gradient(ctx, *output)


rms_stats_fp8.register_autograd(lambda ctx, dh, drstd, damax: (None,) * 4, setup_context=_rms_stats_fp8_setup)
