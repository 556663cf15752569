"""coda's block epilogues as torch custom ops (torch.ops.coda.*) with fake kernels and autograd.

Forward ops take the residual stream x and its RMSNorm inputs h = x * gamma and rstd, as the previous GEMM's
epilogue wrote them (DESIGN.md section 3). h and rstd carry no gradient: an op that reads them differentiates
through x instead, whose gradient it returns in full (the norm's backward runs in the epilogue of the dgrad
GEMM). Backward graphs run as ops of their own, so AOTAutograd traces the backward too.

Weights are [N x K] (nn.Linear) and enter GEMMs as B = w.t(). A weight-gradient buffer (f32, `*_grad`
arguments) makes the wgrad GEMM accumulate into it, and the op then returns no gradient for that weight.
"""
import functools
from typing import Optional

import torch
from torch import Tensor

from coda.torch._kernels import run

_OPS: list[str] = []  # every op of this module, by name (torch.ops.coda.<name>); _fake adds each
_inductor_fallbacks_registered = False


def _register_inductor_fallbacks() -> None:
    """Registers coda's ops with Inductor as the fallback kernels it would make of them anyway, with the layout
    constraint it would choose (torch/_inductor/graph.py, GraphLowering.call_function). Left to find an op
    itself, Inductor first formats the IR of every input into a log message; coda's ops feed each other (x, h, rstd
    go from one layer's op into the next), so that text triples with every op: compiling a 3-layer model took
    200 s on the CPU, 4 layers did not finish. Done once, when a fake kernel first runs (tracing for
    torch.compile), so that importing coda.torch does not import Inductor."""
    global _inductor_fallbacks_registered
    if _inductor_fallbacks_registered:
        return
    _inductor_fallbacks_registered = True
    try:
        from torch._inductor.lowering import lowerings, make_fallback, tag_to_layout_constraint
        from torch._library.utils import get_layout_constraint_tag
    except ImportError:  # another torch: Inductor then finds the ops itself (slowly, in deep models)
        return
    for name in _OPS:
        op = getattr(torch.ops.coda, name).default
        if op not in lowerings:
            make_fallback(op, layout_constraint=tag_to_layout_constraint(get_layout_constraint_tag(op, with_default=True)))


def _fake(op):
    """`@op.register_fake`, registering the Inductor fallbacks first."""
    _OPS.append(op._opoverload._opname)

    def register(fn):
        @functools.wraps(fn)
        def fake(*args, **kwargs):
            _register_inductor_fallbacks()
            return fn(*args, **kwargs)
        op.register_fake(fake)
        return fn
    return register


def _acc_dtype(x: Tensor) -> torch.dtype:
    # f32 statistics on the GPU; float64 throughout on the CPU reference path when the inputs are float64.
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _rstd(partials: Tensor, m: int, d: int, eps: float, like: Tensor) -> Tensor:
    rstd = like.new_empty(m, dtype=_acc_dtype(like))
    run("rms_finalize", {"x1_sumsq": partials, "inv_d": 1.0 / d, "eps": eps}, {"rstd": rstd}, m, 0,
        device=like.device)
    return rstd


def _s(partials: Tensor, m: int, d: int, like: Tensor) -> Tensor:
    s = like.new_empty(m, dtype=_acc_dtype(like))
    run("rms_backward_finalize", {"zdz_partials": partials, "inv_d": 1.0 / d}, {"s": s}, m, 0, device=like.device)
    return s


def _wgrad(dy: Tensor, x: Tensor, buffer: Optional[Tensor]) -> Tensor:
    """dW = dy^T x ([N x K] for dy [M x N], x [M x K]); accumulated into `buffer` when given."""
    n, k, m = dy.shape[1], x.shape[1], dy.shape[0]
    if buffer is not None:
        run("wgrad_accumulate", {"A": dy.t(), "B": x}, {"D": buffer}, n, k, m)
        return dy.new_empty(0)
    dw = dy.new_empty(n, k)
    run("wgrad_store", {"A": dy.t(), "B": x}, {"D": dw}, n, k, m)
    return dw


def _norm_backward(dz: Tensor, w: Tensor, x: Tensor, rstd: Tensor, s: Tensor, gamma: Tensor,
                   dx_in: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Tensor]:
    """do = dz w; dx = [dx_in +] rstd * (do * gamma - n * s). Returns dx, o = n * gamma (for dW) and dgamma.

    dx is stored in the activations' dtype by a variant of coda.blocks.rmsnorm_backward (which accumulates into an
    f32 buffer): no buffer to zero and convert around the GEMM, and the residual gradient is added in the epilogue."""
    m, d = x.shape
    o = torch.empty_like(x)
    dx = torch.empty_like(x)
    ins = {"A": dz, "B": w, "x": x, "rstd": rstd, "s": s, "gamma": gamma}
    if dx_in is not None:
        ins["dx_in"] = dx_in
    name = "rmsnorm_backward_residual" if dx_in is not None else "rmsnorm_backward_bf16"
    parts = run(name, ins, {"dx": dx, "o": o}, m, d, dz.shape[1], partials=("dgamma_partials",))
    return dx, o, parts["dgamma_partials"].sum(0).to(gamma.dtype)


# ---------------------------------------------------------------------------------------------------------
# rms_stats: the embedding entry (h = x * gamma and rstd for the first layer), a tile program + finalize.

@torch.library.custom_op("coda::rms_stats", mutates_args=())
def rms_stats(x: Tensor, gamma: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    m, d = x.shape
    h = torch.empty_like(x)
    parts = run("rms_entry", {"x": x.contiguous(), "gamma": gamma}, {"h": h}, m, d, partials=("x1_sumsq",))
    return h, _rstd(parts["x1_sumsq"], m, d, eps, x)


@_fake(rms_stats)
def _(x, gamma, eps):
    return torch.empty_like(x), x.new_empty(x.shape[0], dtype=_acc_dtype(x))


def _no_grad_setup(ctx, inputs, output):
    pass


def _rms_stats_backward(ctx, dh, drstd):
    return None, None, None


rms_stats.register_autograd(_rms_stats_backward, setup_context=_no_grad_setup)


# ---------------------------------------------------------------------------------------------------------
# qkv_rope: qkv = rope(rstd * (h W^T)).

@torch.library.custom_op("coda::qkv_rope", mutates_args=())
def qkv_rope(x: Tensor, h: Tensor, rstd: Tensor, gamma: Tensor, w: Tensor, pos: Tensor, theta: Tensor,
             w_grad: Optional[Tensor] = None) -> Tensor:
    m, d = h.shape
    n = w.shape[0]
    qkv = h.new_empty(m, n)
    run("qkv_rope", {"A": h, "B": w.t(), "rstd": rstd, "pos": pos, "theta": theta}, {"qkv": qkv}, m, n, d)
    return qkv


@_fake(qkv_rope)
def _(x, h, rstd, gamma, w, pos, theta, w_grad=None):
    return h.new_empty(h.shape[0], w.shape[0])


@torch.library.custom_op("coda::qkv_rope_backward", mutates_args=("w_grad",))
def qkv_rope_backward(dqkv: Tensor, qkv: Tensor, x: Tensor, rstd: Tensor, gamma: Tensor, w: Tensor,
                      pos: Tensor, theta: Tensor, w_grad: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    m, n = qkv.shape
    d = x.shape[1]
    dqkv = dqkv.contiguous()
    dz = torch.empty_like(dqkv)
    parts = run("rope_backward_from_output", {"dqkv": dqkv, "qkv": qkv, "pos": pos, "theta": theta},
                {"dz": dz}, m, n, partials=("zdz_partials",))
    s = _s(parts["zdz_partials"], m, d, x)
    dx, o, dgamma = _norm_backward(dz, w, x, rstd, s, gamma)
    return dx, dgamma, _wgrad(dz, o, w_grad)


@_fake(qkv_rope_backward)
def _(dqkv, qkv, x, rstd, gamma, w, pos, theta, w_grad):
    return torch.empty_like(x), torch.empty_like(gamma), (w.new_empty(0) if w_grad is not None else torch.empty_like(w))


def _qkv_rope_setup(ctx, inputs, output):
    x, h, rstd, gamma, w, pos, theta, w_grad = inputs
    ctx.save_for_backward(output, x, rstd, gamma, w, pos, theta, w_grad)


def _qkv_rope_grad(ctx, dqkv):
    qkv, x, rstd, gamma, w, pos, theta, w_grad = ctx.saved_tensors
    dx, dgamma, dw = torch.ops.coda.qkv_rope_backward(dqkv, qkv, x, rstd, gamma, w, pos, theta, w_grad)
    return dx, None, None, dgamma, (None if w_grad is not None else dw), None, None, None


qkv_rope.register_autograd(_qkv_rope_grad, setup_context=_qkv_rope_setup)


# ---------------------------------------------------------------------------------------------------------
# out_proj: x1 = a W^T + residual; h1 = x1 * gamma; rstd1 (gamma: the next RMSNorm's weight).

@torch.library.custom_op("coda::out_proj", mutates_args=())
def out_proj(a: Tensor, w: Tensor, residual: Tensor, gamma: Tensor, eps: float,
             w_grad: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Tensor]:
    m, k = a.shape
    d = w.shape[0]
    x1 = residual.new_empty(m, d)
    h1 = residual.new_empty(m, d)
    parts = run("out_proj", {"A": a, "B": w.t(), "residual": residual.contiguous(), "gamma": gamma},
                {"x1": x1, "h": h1}, m, d, k, partials=("x1_sumsq",))
    return x1, h1, _rstd(parts["x1_sumsq"], m, d, eps, residual)


@_fake(out_proj)
def _(a, w, residual, gamma, eps, w_grad=None):
    m, d = a.shape[0], w.shape[0]
    return residual.new_empty(m, d), residual.new_empty(m, d), residual.new_empty(m, dtype=_acc_dtype(residual))


@torch.library.custom_op("coda::out_proj_backward", mutates_args=("w_grad",))
def out_proj_backward(dx1: Tensor, a: Tensor, w: Tensor, w_grad: Optional[Tensor]) -> tuple[Tensor, Tensor]:
    m, d = dx1.shape
    k = w.shape[1]
    dx1 = dx1.contiguous()
    da = dx1.new_empty(m, k)
    run("dgrad", {"A": dx1, "B": w}, {"D": da}, m, k, d)
    return da, _wgrad(dx1, a, w_grad)


@_fake(out_proj_backward)
def _(dx1, a, w, w_grad):
    return torch.empty_like(a), (w.new_empty(0) if w_grad is not None else torch.empty_like(w))


def _out_proj_setup(ctx, inputs, output):
    a, w, residual, gamma, eps, w_grad = inputs
    ctx.save_for_backward(a, w, w_grad)


def _out_proj_grad(ctx, dx1, dh1, drstd1):
    a, w, w_grad = ctx.saved_tensors
    da, dw = torch.ops.coda.out_proj_backward(dx1, a, w, w_grad)
    return da, (None if w_grad is not None else dw), dx1, None, None, None


out_proj.register_autograd(_out_proj_grad, setup_context=_out_proj_setup)


# ---------------------------------------------------------------------------------------------------------
# mlp: z = rstd1 * (h1 W_gu^T) (interleaved gate/up), y = silu(gate) * up, x2 = y W_d^T + x1, h2 = x2 * gamma_next,
# rstd2. Returns z for the backward (SwiGLU backward lives in the epilogue of the down-projection's dgrad).

@torch.library.custom_op("coda::mlp", mutates_args=())
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
    return x2, h2, _rstd(parts["x1_sumsq"], m, d, eps, x1), z


@_fake(mlp)
def _(x1, h1, rstd1, gamma, w_gate_up, w_down, gamma_next, eps, w_gate_up_grad=None, w_down_grad=None):
    m, d = h1.shape
    return (x1.new_empty(m, d), x1.new_empty(m, d), x1.new_empty(m, dtype=_acc_dtype(x1)),
            h1.new_empty(m, w_gate_up.shape[0]))


@torch.library.custom_op("coda::mlp_backward", mutates_args=("w_gate_up_grad", "w_down_grad"))
def mlp_backward(dx2: Tensor, x1: Tensor, rstd1: Tensor, gamma: Tensor, w_gate_up: Tensor, w_down: Tensor,
                 z: Tensor, w_gate_up_grad: Optional[Tensor],
                 w_down_grad: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    m, d = x1.shape
    f2 = z.shape[1]
    dx2 = dx2.contiguous()
    dz = torch.empty_like(z)
    y = z.new_empty(m, f2 // 2)
    parts = run("swiglu_backward", {"A": dx2, "B": w_down, "z": z}, {"dz": dz, "y": y}, m, f2 // 2, d,
                partials=("zdz_partials",))
    s = _s(parts["zdz_partials"], m, d, x1)
    dx1, o, dgamma = _norm_backward(dz, w_gate_up, x1, rstd1, s, gamma, dx_in=dx2)  # dx2: the residual path
    dw_down = _wgrad(dx2, y, w_down_grad)
    dw_gate_up = _wgrad(dz, o, w_gate_up_grad)
    return dx1, dgamma, dw_gate_up, dw_down


@_fake(mlp_backward)
def _(dx2, x1, rstd1, gamma, w_gate_up, w_down, z, w_gate_up_grad, w_down_grad):
    return (torch.empty_like(x1), torch.empty_like(gamma),
            w_gate_up.new_empty(0) if w_gate_up_grad is not None else torch.empty_like(w_gate_up),
            w_down.new_empty(0) if w_down_grad is not None else torch.empty_like(w_down))


def _mlp_setup(ctx, inputs, output):
    x1, h1, rstd1, gamma, w_gate_up, w_down, gamma_next, eps, gu_grad, d_grad = inputs
    ctx.save_for_backward(x1, rstd1, gamma, w_gate_up, w_down, output[3], gu_grad, d_grad)


def _mlp_grad(ctx, dx2, dh2, drstd2, dz):
    x1, rstd1, gamma, w_gate_up, w_down, z, gu_grad, d_grad = ctx.saved_tensors
    dx1, dgamma, dw_gu, dw_d = torch.ops.coda.mlp_backward(dx2, x1, rstd1, gamma, w_gate_up, w_down, z,
                                                            gu_grad, d_grad)
    return (dx1, None, None, dgamma, None if gu_grad is not None else dw_gu,
            None if d_grad is not None else dw_d, None, None, None, None)


mlp.register_autograd(_mlp_grad, setup_context=_mlp_setup)


# ---------------------------------------------------------------------------------------------------------
# lm_head_ce: logits = rstd * (h W^T); loss = mean over rows of lse - logit[label]. Returns (loss, logits, lse).

@torch.library.custom_op("coda::lm_head_ce", mutates_args=())
def lm_head_ce(x: Tensor, h: Tensor, rstd: Tensor, gamma: Tensor, w: Tensor, labels: Tensor,
               w_grad: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Tensor]:
    m, d = h.shape
    v = w.shape[0]
    logits = h.new_empty(m, v)
    parts = run("lm_head_ce", {"A": h, "B": w.t(), "rstd": rstd, "labels": labels}, {"logits": logits},
                m, v, d, partials=("lse_partials", "target_partials"))
    lse = h.new_empty(m, dtype=_acc_dtype(x))
    loss = h.new_empty(m, dtype=_acc_dtype(x))
    run("ce_finalize", parts, {"lse": lse, "loss": loss}, m, 0, device=h.device)
    return loss.mean(), logits, lse


@_fake(lm_head_ce)
def _(x, h, rstd, gamma, w, labels, w_grad=None):
    m = h.shape[0]
    acc = _acc_dtype(x)
    return h.new_empty((), dtype=acc), h.new_empty(m, w.shape[0]), h.new_empty(m, dtype=acc)


@torch.library.custom_op("coda::lm_head_ce_backward", mutates_args=("w_grad",))
def lm_head_ce_backward(dloss: Tensor, x: Tensor, rstd: Tensor, gamma: Tensor, w: Tensor, labels: Tensor,
                        logits: Tensor, lse: Tensor, w_grad: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    m, d = x.shape
    v = w.shape[0]
    scale = float(dloss) / m  # the mean's 1/M; a scalar binding, read once per backward
    dlogits = torch.empty_like(logits)
    parts = run("cross_entropy_backward", {"logits": logits, "lse": lse, "labels": labels, "scale": scale},
                {"dlogits": dlogits}, m, v, partials=("zdz_partials",))
    s = _s(parts["zdz_partials"], m, d, x)
    dx, o, dgamma = _norm_backward(dlogits, w, x, rstd, s, gamma)
    return dx, dgamma, _wgrad(dlogits, o, w_grad)


@_fake(lm_head_ce_backward)
def _(dloss, x, rstd, gamma, w, labels, logits, lse, w_grad):
    return torch.empty_like(x), torch.empty_like(gamma), (w.new_empty(0) if w_grad is not None else torch.empty_like(w))


def _lm_head_ce_setup(ctx, inputs, output):
    x, h, rstd, gamma, w, labels, w_grad = inputs
    ctx.save_for_backward(x, rstd, gamma, w, labels, output[1], output[2], w_grad)


def _lm_head_ce_grad(ctx, dloss, dlogits, dlse):
    x, rstd, gamma, w, labels, logits, lse, w_grad = ctx.saved_tensors
    dx, dgamma, dw = torch.ops.coda.lm_head_ce_backward(dloss, x, rstd, gamma, w, labels, logits, lse, w_grad)
    return dx, None, None, dgamma, (None if w_grad is not None else dw), None, None


lm_head_ce.register_autograd(_lm_head_ce_grad, setup_context=_lm_head_ce_setup)


# ---------------------------------------------------------------------------------------------------------
# lm_head_ce_stats: the same loss with no logits stored. The backward recomputes them in the LM head GEMM
# (lm_head_ce_backward), `chunk` rows at a time, so only a chunk x V dlogits tensor ever exists.

@torch.library.custom_op("coda::lm_head_ce_stats", mutates_args=())
def lm_head_ce_stats(x: Tensor, h: Tensor, rstd: Tensor, gamma: Tensor, w: Tensor, labels: Tensor,
                     w_grad: Optional[Tensor] = None, chunk: int = 4096) -> tuple[Tensor, Tensor]:
    m, d = h.shape
    v = w.shape[0]
    parts = run("lm_head_ce_stats", {"A": h, "B": w.t(), "rstd": rstd, "labels": labels}, {}, m, v, d,
                partials=("lse_partials", "target_partials"))
    lse = h.new_empty(m, dtype=_acc_dtype(x))
    loss = h.new_empty(m, dtype=_acc_dtype(x))
    run("ce_finalize", parts, {"lse": lse, "loss": loss}, m, 0, device=h.device)
    return loss.mean(), lse


@_fake(lm_head_ce_stats)
def _(x, h, rstd, gamma, w, labels, w_grad=None, chunk=4096):
    acc = _acc_dtype(x)
    return h.new_empty((), dtype=acc), h.new_empty(h.shape[0], dtype=acc)


@torch.library.custom_op("coda::lm_head_ce_stats_backward", mutates_args=("w_grad",))
def lm_head_ce_stats_backward(dloss: Tensor, x: Tensor, h: Tensor, rstd: Tensor, gamma: Tensor, w: Tensor,
                              labels: Tensor, lse: Tensor, w_grad: Optional[Tensor],
                              chunk: int) -> tuple[Tensor, Tensor, Tensor]:
    m, d = x.shape
    v = w.shape[0]
    scale = float(dloss) / m
    dx = torch.empty_like(x)
    dgamma = torch.zeros(d, dtype=_acc_dtype(x), device=x.device)
    # The weight gradient sums over chunks: into the caller's f32 buffer, else into one of our own.
    acc = w_grad if w_grad is not None else torch.zeros(w.shape, dtype=_acc_dtype(x), device=w.device)
    dlogits_buf = h.new_empty(min(chunk, m), v)
    for r0 in range(0, m, chunk):
        rows = slice(r0, min(m, r0 + chunk))
        c = rows.stop - rows.start
        dlogits = dlogits_buf[:c]
        parts = run("lm_head_ce_backward",
                    {"A": h[rows], "B": w.t(), "rstd": rstd[rows], "lse": lse[rows], "labels": labels[rows],
                     "scale": scale}, {"dlogits": dlogits}, c, v, d, partials=("zdz_partials",))
        s = _s(parts["zdz_partials"], c, d, x)
        dx_c, o, dgamma_c = _norm_backward(dlogits, w, x[rows], rstd[rows], s, gamma)
        dx[rows] = dx_c
        dgamma += dgamma_c
        _wgrad(dlogits, o, acc)
    return dx, dgamma.to(gamma.dtype), (w.new_empty(0) if w_grad is not None else acc.to(w.dtype))


@_fake(lm_head_ce_stats_backward)
def _(dloss, x, h, rstd, gamma, w, labels, lse, w_grad, chunk):
    return torch.empty_like(x), torch.empty_like(gamma), (w.new_empty(0) if w_grad is not None else torch.empty_like(w))


def _lm_head_ce_stats_setup(ctx, inputs, output):
    x, h, rstd, gamma, w, labels, w_grad, chunk = inputs
    ctx.chunk = chunk
    ctx.save_for_backward(x, h, rstd, gamma, w, labels, output[1], w_grad)


def _lm_head_ce_stats_grad(ctx, dloss, dlse):
    x, h, rstd, gamma, w, labels, lse, w_grad = ctx.saved_tensors
    dx, dgamma, dw = torch.ops.coda.lm_head_ce_stats_backward(dloss, x, h, rstd, gamma, w, labels, lse, w_grad,
                                                              ctx.chunk)
    return dx, None, None, dgamma, (None if w_grad is not None else dw), None, None, None


lm_head_ce_stats.register_autograd(_lm_head_ce_stats_grad, setup_context=_lm_head_ce_stats_setup)
