"""A decoder layer in FP8 as one torch custom op with its backward: torch.ops.coda.decoder_layer_fp8 and
decoder_layer_fp8_backward, one schedule of GEMMs and their epilogues for every recipe; what differs between recipes
(how an operand is quantized, which scales bind, which graph each GEMM uses) is a policy of fp8_recipes. Each op's fake
kernel is the op itself run with no launch (_register.custom_op).

Forward: QKV reads h in FP8 (the previous layer's or the entry's), the out-projection attention's output (quantized by
a pass of its own: SDPA writes bf16), gate/up h1 in FP8 from the out-projection's epilogue, down y (quantized after
gate/up). Backward: each dgrad reads the FP8 gradient the previous epilogue wrote (dx2, which comes from the next
layer, by a pass of its own); the weight gradients run in bf16 from the bf16 tensors kept beside the FP8 ones, or with
fp8_wgrad in FP8 over the tokens (a multiple of 16: the K-major rows TMA loads). One op a layer, not two as in bf16, so
that the out-projection's dgrad reads the FP8 dx1 the MLP backward wrote.

Under delayed scales (tensorwise) the forward quantizes with `scales`, the copy the module took when its step began,
and saves it: the backward dequantizes the forward's tensors with it whatever updates ran in between. The forward
returns the amax it saw (an op with autograd may not write its inputs; the module records them); the backward
quantizes the gradients under the state's scales when it runs and writes their amax into the state."""
from typing import NamedTuple, Optional

import torch
from torch import Tensor

from coda.torch import _steps
from coda.torch import ops as _ops
from coda.torch._kernels import partials_rows, run
from coda.torch._register import config_text, custom_op, no_gradient, parse_config
from coda.torch.fp8 import AMAX, FORMATS
from coda.torch.fp8_recipes import RECIPES, SLOTS, Made, Operand, Out  # noqa: F401  (SLOTS: Fp8Scaling's slots)

_E4M3 = FORMATS["e4m3"]


class Config(NamedTuple):
    """The layer's settings, passed to its ops as one text (torch.library takes no structures of scalars)."""
    recipe: str
    eps: float
    n_heads: int
    seq_len: int
    attention: str
    fp8_out: bool
    fp8_wgrad: bool
    promoted_backward: bool = False  # the backward's FP8 GEMMs promote their accumulator (fp8_recipes.Recipe)
    text = config_text
    parse = classmethod(parse_config)


_WEIGHTS_T = ("w_qkv_t", "w_o_t", "w_gate_up_t", "w_down_t")
# What the backward reads: the forward's inputs and activations, the attention output's transposed FP8 copy (tensorwise
# with fp8_wgrad, else empty), each weight's transposed FP8 copy and its scales (the dgrads' B), the forward's scales.
Saved = NamedTuple("Saved", [(name, Tensor) for name in (
    "x rstd attn_norm mlp_norm pos theta qkv out lse seed offset x1 rstd1 z a_t".split()
    + [f"{w}{scale}" for w in _WEIGHTS_T for scale in ("", "_scale")] + ["scales"])])
_OUTPUTS = 5  # decoder_layer_fp8's outputs before the saved ones: x2, h2, rstd2, h2_scale, amax
_SAVED = len(Saved._fields)
_FROM_INPUTS = 7  # Saved's fields that come from the forward's inputs: x, rstd, the two norms, pos, theta, scales


def _check(r, h: Tensor, h_scale: Tensor, m: int, d: int) -> None:
    if h.dtype != _E4M3:
        raise ValueError(f"coda.torch: an FP8 layer reads h in float8_e4m3fn (the previous FP8 op's), got {h.dtype}")
    want = r.scales_shape(m, d)
    if want is not None and (tuple(h_scale.shape) != want or h_scale.dtype != torch.float32):
        raise ValueError(f"coda.torch: a {r.name} FP8 layer reads h's scales as float32 [{' x '.join(map(str, want))}] "
                         f"({r.scales_layout}), got {h_scale.dtype} {tuple(h_scale.shape)}")
    if r.fp8_wgrad and m % 16:
        raise ValueError(f"coda.torch: FP8 weight gradients (fp8_wgrad) read the tokens as K-major FP8 rows, which "
                         f"must be a multiple of 16 bytes: M = {m} tokens is not a multiple of 16 (use bf16 weight "
                         f"gradients, or pad the batch)")


@custom_op("coda::decoder_layer_fp8")
def decoder_layer_fp8(x: Tensor, entry: list[Tensor], weights: list[Tensor], norms: list[Tensor], rope: list[Tensor],
                      delayed: list[Tensor], buffers: list[Optional[Tensor]],
                      config: str) -> tuple[(Tensor,) * (_OUTPUTS + _SAVED - _FROM_INPUTS)]:
    """entry: the previous op's (h, h_scale, rstd); weights: (w_qkv, w_o, w_gate_up, w_down); norms: (attn_norm,
    mlp_norm, the next layer's gamma); rope: (pos, theta); delayed: tensorwise's copy of its delayed scales and its
    Fp8Scaling state (which the backward updates), or none; buffers: the weights' f32 gradient buffers (None each
    where the gradient is returned). Returns x2, h2, rstd2, h2's scales (none for tensorwise), the amax seen
    (tensorwise), then what Saved takes from the forward."""
    cfg = Config.parse(config)
    (h, h_scale, rstd), (attn_norm, mlp_norm, next_gamma), (pos, theta) = entry, norms, rope
    m, d = x.shape
    fwd = delayed[0] if delayed else None
    r = RECIPES[cfg.recipe](cfg.fp8_wgrad, fwd, fwd.new_zeros(fwd.shape[1]) if fwd is not None else None)
    _check(r, h, h_scale, m, d)
    w_qkv, w_o, w_gate_up, w_down = [r.weight(w) for w in weights]
    widths = _ops._Widths(weights[0], weights[1], cfg.n_heads)
    qkv = x.new_empty(m, weights[0].shape[0])
    run(r.graph("qkv_rope"), {**r.gemm(Operand(h, h_scale), w_qkv[0]), "rstd": rstd, "pos": pos, "theta": theta},
        {"qkv": qkv}, m, qkv.shape[1], d)
    out, lse, seed, offset = _ops._attention_forward(qkv, widths, cfg.seq_len, cfg.attention)
    a = r.quantize(_ops._attention_input(qkv, out, widths, cfg.attention), "attn_out", w=True)
    x1 = x.new_empty(m, d)
    parts, made = r.launch("out_proj", {**r.gemm(a.fp8, w_o[0]), "residual": x.contiguous(), "gamma": mlp_norm},
                           {"x1": x1}, (m, d, widths.q), ("x1_sumsq",), [Out("h", "h_mlp", d, x1, mlp_norm)], x)
    rstd1 = _steps.rstd(parts["x1_sumsq"], m, d, cfg.eps, x)
    f2 = weights[2].shape[0]
    z = x.new_empty(m, f2)
    _, made = r.launch("gate_up_swiglu", {**r.gemm(made["h"].fp8, w_gate_up[0]), "rstd": rstd1}, {"z": z},
                       (m, f2, d), (), [Out("y", "y", f2 // 2)], x)
    x2 = x.new_empty(m, d)
    down = ({**r.gemm(made["y"].fp8, w_down[0]), "residual": x1, "gamma": next_gamma}, (m, d, f2 // 2), ("x1_sumsq",))
    h2_scale = x.new_empty(0, dtype=torch.float32)
    if cfg.fp8_out:
        parts, made = r.launch("out_proj", down[0], {"x1": x2}, *down[1:], [Out("h", "h_next", d, x2, next_gamma)], x)
        h2 = made["h"].fp8.data
        if fwd is None:
            h2_scale = made["h"].fp8.scale
    else:
        h2 = x.new_empty(m, d)
        parts, _ = r.launch("out_proj", down[0], {"x1": x2, "h": h2}, *down[1:], [], x, "_bf16_h")
    rstd2 = _steps.rstd(parts["x1_sumsq"], m, d, cfg.eps, x)
    a_t = a.wgrad.data if isinstance(a.wgrad, Operand) else x.new_empty(0, dtype=_E4M3)
    return (x2, h2, rstd2, h2_scale, r.amax if fwd is not None else x.new_empty(0), qkv, out, lse, seed, offset, x1,
            rstd1, z, a_t, *[t for w in (w_qkv, w_o, w_gate_up, w_down) for t in w[1]])


def _rope_backward(r, blocks, qkv: Tensor, pos: Tensor, theta: Tensor) -> tuple[Made, Tensor]:
    """_steps.rope_backward as the recipe makes dz (its FP8 copy for QKV's dgrad, and what dW_qkv reads), block by
    block of Q, K and V into views of one set of outputs: (dz, the zdz row partials)."""
    m, n = qkv.shape
    compute, zero = r.rope_graphs
    outs, ins, outputs, partials = [Out("dz", "dz_qkv", n, w=True)], {}, {}, []
    bound = r.bind(outs, ins, outputs, partials, qkv)
    if r.transposed_copy(outs[0]):
        compute, zero = compute + "_t", zero + "_t"
    rows = [partials_rows(compute, "zdz_partials", m, width, qkv.device) for _, width in blocks]
    zdz = torch.empty(sum(rows), m, dtype=_ops.acc_dtype(qkv), device=qkv.device)
    got, col, row = [], 0, 0
    for (grad, width), t in zip(blocks, rows):
        cols = slice(col, col + width)
        views = {k: v[cols] if k.endswith("_t") else v[:, cols] for k, v in outputs.items()}
        views["zdz_partials"] = zdz[row:row + t]
        if grad is None:  # dz = 0 * qkv, with the FP8 bindings where the recipe's zero_grad graph has them
            fp8 = r.zero_grad_fp8
            got.append(run(zero, {"values": qkv[:, cols], **(ins if fp8 else {})}, views, m, width,
                           partials=tuple(partials) if fp8 else ()))
        else:
            got.append(run(compute, {"dqkv": grad, "qkv": qkv[:, cols], "pos": pos,
                                     "theta": theta[col // 2:(col + width) // 2], **ins}, views, m, width,
                           partials=tuple(partials)))
        col, row = col + width, row + t
    return r.finish(outs, bound, got, outputs)["dz"], zdz


def _norm_backward(r, dz: Made, w: Operand, x: Tensor, rstd: Tensor, s: Tensor, gamma: Tensor, dx_in: Tensor,
                   o_slot: str, dx_slot: Optional[str]):
    """_steps.norm_backward with the residual, on FP8 operands: ({dx, o: Made}, dgamma). dx comes in FP8 too under
    dx_slot, or without one only in bf16 (the layer's own input gradient)."""
    m, d = x.shape
    ins = {**r.gemm(dz.fp8, w), "x": x, "rstd": rstd, "s": s, "gamma": gamma, "dx_in": dx_in}
    outs = [Out("o", o_slot, d, a=False, w=True)] + ([Out("dx", dx_slot, d, w=True, keep=True)] if dx_slot else [])
    outputs = {} if dx_slot else {"dx": torch.empty_like(x)}
    parts, made = r.launch("rmsnorm_backward_residual", ins, outputs, (m, d, dz.fp8.data.shape[1]),
                           ("dgamma_partials",), outs, x, "" if dx_slot else "_bf16_dx")
    made.setdefault("dx", Made(None, None, outputs.get("dx")))
    return made, _steps.dgamma(parts["dgamma_partials"], gamma)


@custom_op("coda::decoder_layer_fp8_backward",
           mutates_args=("state", "w_qkv_grad", "w_o_grad", "w_gate_up_grad", "w_down_grad"))
def decoder_layer_fp8_backward(dx2: Tensor, saved: list[Tensor], state: list[Tensor], w_qkv_grad: Optional[Tensor],
                               w_o_grad: Optional[Tensor], w_gate_up_grad: Optional[Tensor],
                               w_down_grad: Optional[Tensor], config: str) -> tuple[(Tensor,) * 7]:
    """saved: Saved's fields; state: tensorwise's Fp8Scaling state (its gradients' scales, and where their amax
    goes), or none. Returns dx, d_attn_norm, d_mlp_norm and the four dW (empty where added into a buffer)."""
    cfg, sv = Config.parse(config), Saved(*saved)
    st = state[0] if state else None
    r = RECIPES[cfg.recipe](cfg.fp8_wgrad, st, st[AMAX] if st is not None else None, sv.scales,
                            cfg.promoted_backward)
    w_qkv, w_o, w_gate_up, w_down = [Operand(getattr(sv, w), getattr(sv, f"{w}_scale")) for w in _WEIGHTS_T]
    x, m, d, f2 = sv.x, *sv.x.shape, sv.z.shape[1]
    # MLP: dy = dx2 W_d with SwiGLU's backward in the epilogue, then the norm backward with dx2 joined.
    dx2 = r.quantize(dx2.contiguous(), "dx2", w=True)
    parts, made = r.launch("swiglu_backward", {**r.gemm(dx2.fp8, w_down), "z": sv.z}, {}, (m, f2 // 2, d),
                           ("zdz_partials",), [Out("dz", "dz_mlp", f2, w=True),
                                               Out("y", "y", f2 // 2, a=False, w=True, recomputed=True)], x)
    dz, s = made["dz"], _steps.s_factor(parts["zdz_partials"], m, d, sv.x1)
    norm, d_mlp_norm = _norm_backward(r, dz, w_gate_up, sv.x1, sv.rstd1, s, sv.mlp_norm, dx2.bf16, "o_mlp", "dx1")
    dx1 = norm["dx"]
    dw_down = r.wgrad(dx2.wgrad, made["y"].wgrad, w_down_grad, x)
    dw_gate_up = r.wgrad(dz.wgrad, norm["o"].wgrad, w_gate_up_grad, x)
    # Attention: the out-projection's dgrad, attention's backward, RoPE's backward, the norm backward with dx1 joined.
    widths = _ops._Widths(w_qkv.data.t(), w_o.data.t(), cfg.n_heads)
    da = x.new_empty(m, widths.q)
    r.launch("dgrad", r.gemm(dx1.fp8, w_o), {"D": da}, (m, widths.q, d), (), [], x)
    # Attention's output as the forward quantized it (its transposed copy) or, in bf16, read again.
    a = r.forward_operand(sv.a_t, "attn_out") if sv.a_t.numel() else _ops._attention_input(sv.qkv, sv.out, widths,
                                                                                         cfg.attention)
    dw_o = r.wgrad(dx1.wgrad, a, w_o_grad, x)
    blocks = _ops._attention_gradient_blocks(da, sv.qkv, sv.out, sv.lse, sv.seed, sv.offset, widths, cfg.seq_len,
                                             cfg.n_heads, cfg.attention)
    dzq, zdz = _rope_backward(r, blocks, sv.qkv, sv.pos, sv.theta)
    s = _steps.s_factor(zdz, m, d, x)
    norm, d_attn_norm = _norm_backward(r, dzq, w_qkv, x, sv.rstd, s, sv.attn_norm, dx1.bf16, "o_qkv", None)
    dw_qkv = r.wgrad(dzq.wgrad, norm["o"].wgrad, w_qkv_grad, x)
    return norm["dx"].bf16, d_attn_norm, d_mlp_norm, dw_qkv, dw_o, dw_gate_up, dw_down


def _setup(ctx, inputs, output):
    x, (h, h_scale, rstd), weights, (attn_norm, mlp_norm, _), (pos, theta), delayed, buffers, config = inputs
    ctx.config = config
    # The state is not saved as a tensor: the backward writes this step's gradient amaxes into it.
    ctx.state, ctx.lists = delayed[1:], [len(v) for v in inputs[1:6]]
    ctx.no_buffers = all(b is None for b in buffers)
    ctx.save_for_backward(x, rstd, attn_norm, mlp_norm, pos, theta, *output[_OUTPUTS:],
                          delayed[0] if delayed else x.new_empty(0), *buffers)
    ctx.weight_dtypes = [w.dtype for w in weights]
    no_gradient(ctx, *output[1:])


def _grad(ctx, dx2, *no_grads):
    # A list of gradients for each list of tensors; torch.library takes a list of Nones alone as one.
    nothing = [[None] * n for n in ctx.lists] + [None if ctx.no_buffers else [None] * 4]
    if dx2 is None:  # x2 reached no loss
        return None, *nothing, None
    saved = ctx.saved_tensors
    buffers = saved[_SAVED:]
    dx, d_attn, d_mlp, *dws = torch.ops.coda.decoder_layer_fp8_backward(dx2, list(saved[:_SAVED]), ctx.state,
                                                                        *buffers, ctx.config)
    dws = [None if b is not None else dw.to(dtype) for dw, b, dtype in zip(dws, buffers, ctx.weight_dtypes)]
    return dx, nothing[0], dws, [d_attn, d_mlp, None], *nothing[3:], None


decoder_layer_fp8.register_autograd(_grad, setup_context=_setup)


@custom_op("coda::rms_stats_fp8")
def rms_stats_fp8(x: Tensor, gamma: Tensor, eps: float, inv_scale: Optional[Tensor],
                  recipe: str = "tensorwise") -> tuple[Tensor, Tensor, Tensor]:
    """The embedding entry: h_fp8 = x * gamma in e4m3, rstd, and for tensorwise h's amax (f32 [1], for
    Fp8Scaling.record; h under the delayed scale's inverse inv_scale), else h's scales (the recipe's, as a layer
    reads them; inv_scale None)."""
    m, d = x.shape
    x = x.contiguous()
    if recipe == "tensorwise":
        h = torch.empty(m, d, dtype=_E4M3, device=x.device)
        parts = run("rms_entry_fp8", {"x": x, "gamma": gamma, "h_fp8_inv_scale": inv_scale}, {"h_fp8": h}, m, d,
                    partials=("x1_sumsq", "h_amax"))
        return h, _steps.rstd(parts["x1_sumsq"], m, d, eps, x), parts["h_amax"].amax().to(torch.float32).reshape(1)
    parts, made = RECIPES[recipe](False).launch("rms_entry", {"x": x, "gamma": gamma}, {}, (m, d), ("x1_sumsq",),
                                                [Out("h", "h_mlp", d, x, gamma)], x)
    return made["h"].fp8.data, _steps.rstd(parts["x1_sumsq"], m, d, eps, x), made["h"].fp8.scale


rms_stats_fp8.register_autograd(lambda ctx, *grads: (None,) * 5,
                                setup_context=lambda ctx, inputs, output: no_gradient(ctx, *output))
