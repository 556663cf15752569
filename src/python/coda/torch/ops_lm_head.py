"""The LM head and its mean cross-entropy as torch custom ops: with the logits stored (lm_head_ce) or recomputed in
the backward (lm_head_ce_stats). The loss gradient reaches the backward kernels as a scalar read on the GPU, so the
backward needs no host synchronization and captures into a CUDA graph."""
from typing import Optional

import torch
from torch import Tensor

from coda.torch import _steps
from coda.torch._kernels import partials_rows, run
from coda.torch._register import fake, no_gradient

acc_dtype = _steps.acc_dtype


def _loss_scale(dloss: Tensor, m: int) -> Tensor:
    """d(mean loss)/d(row loss) as a 0-d f32 tensor, bound as the graphs' `scale` scalar (read on the GPU)."""
    return (dloss.to(acc_dtype(dloss)) / m).reshape(())


def _ce_stats(x: Tensor, parts: dict, m: int) -> tuple[Tensor, Tensor]:
    lse = x.new_empty(m, dtype=acc_dtype(x))
    loss = x.new_empty(m, dtype=acc_dtype(x))
    run("ce_finalize", parts, {"lse": lse, "loss": loss}, m, 0, device=x.device)
    return loss.mean(), lse


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
    loss, lse = _ce_stats(x, parts, m)
    return loss, logits, lse


@fake(lm_head_ce)
def _(x, h, rstd, gamma, w, labels, w_grad=None):
    m = h.shape[0]
    acc = acc_dtype(x)
    return h.new_empty((), dtype=acc), h.new_empty(m, w.shape[0]), h.new_empty(m, dtype=acc)


@torch.library.custom_op("coda::lm_head_ce_backward", mutates_args=("w_grad",))
def lm_head_ce_backward(dloss: Tensor, x: Tensor, rstd: Tensor, gamma: Tensor, w: Tensor, labels: Tensor,
                        logits: Tensor, lse: Tensor, w_grad: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    m, d = x.shape
    v = w.shape[0]
    scale = _loss_scale(dloss, m)
    dlogits = torch.empty_like(logits)
    parts = run("cross_entropy_backward", {"logits": logits, "lse": lse, "labels": labels, "scale": scale},
                {"dlogits": dlogits}, m, v, partials=("zdz_partials",))
    s = _steps.s_factor(parts["zdz_partials"], m, d, x)
    dx, o, dgamma = _steps.norm_backward(dlogits, w, x, rstd, s, gamma)
    return dx, dgamma, _steps.wgrad(dlogits, o, w_grad)


@fake(lm_head_ce_backward)
def _(dloss, x, rstd, gamma, w, labels, logits, lse, w_grad):
    return torch.empty_like(x), torch.empty_like(gamma), (w.new_empty(0) if w_grad is not None else torch.empty_like(w))


def _lm_head_ce_setup(ctx, inputs, output):
    x, h, rstd, gamma, w, labels, w_grad = inputs
    ctx.save_for_backward(x, rstd, gamma, w, labels, output[1], output[2], w_grad)
    no_gradient(ctx, *output[1:])


def _lm_head_ce_grad(ctx, dloss, dlogits, dlse):
    if dloss is None:
        return (None,) * 7
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
    return _ce_stats(x, parts, m)


@fake(lm_head_ce_stats)
def _(x, h, rstd, gamma, w, labels, w_grad=None, chunk=4096):
    acc = acc_dtype(x)
    return h.new_empty((), dtype=acc), h.new_empty(h.shape[0], dtype=acc)


@torch.library.custom_op("coda::lm_head_ce_stats_backward", mutates_args=("w_grad",))
def lm_head_ce_stats_backward(dloss: Tensor, x: Tensor, h: Tensor, rstd: Tensor, gamma: Tensor, w: Tensor,
                              labels: Tensor, lse: Tensor, w_grad: Optional[Tensor],
                              chunk: int) -> tuple[Tensor, Tensor, Tensor]:
    m, d = x.shape
    v = w.shape[0]
    scale = _loss_scale(dloss, m)
    dx, o = torch.empty_like(x), torch.empty_like(x)
    starts = range(0, m, chunk)
    # Every chunk's dgamma partials in one buffer, summed by one finalize.
    rows = [partials_rows("rmsnorm_backward_bf16", "dgamma_partials", min(chunk, m - r0), d, x.device, v)
            for r0 in starts]
    dgamma_parts = torch.empty(sum(rows), d, dtype=acc_dtype(x), device=x.device)
    # The weight gradient sums over chunks: into the caller's f32 buffer, else into one of our own.
    single = len(starts) == 1 and w_grad is None
    acc = w_grad if w_grad is not None or single else torch.zeros(w.shape, dtype=acc_dtype(x), device=w.device)
    dlogits_buf = h.new_empty(min(chunk, m), v)
    dw = None
    row = 0
    for r0, t in zip(starts, rows):
        r = slice(r0, min(m, r0 + chunk))
        c = r.stop - r.start
        dlogits = dlogits_buf[:c]
        parts = run("lm_head_ce_backward",
                    {"A": h[r], "B": w.t(), "rstd": rstd[r], "lse": lse[r], "labels": labels[r], "scale": scale},
                    {"dlogits": dlogits}, c, v, d, partials=("zdz_partials",))
        s = _steps.s_factor(parts["zdz_partials"], c, d, x)
        _steps.norm_backward_into(dlogits, w, x[r], rstd[r], s, gamma, dx[r], o[r],
                                  dgamma_partials=dgamma_parts[row:row + t])
        dw = _steps.wgrad(dlogits, o[r], acc)
        row += t
    if w_grad is not None:
        dw = w.new_empty(0)
    elif not single:
        dw = acc.to(w.dtype)
    return dx, _steps.dgamma(dgamma_parts, gamma), dw


@fake(lm_head_ce_stats_backward)
def _(dloss, x, h, rstd, gamma, w, labels, lse, w_grad, chunk):
    return torch.empty_like(x), torch.empty_like(gamma), (w.new_empty(0) if w_grad is not None else torch.empty_like(w))


def _lm_head_ce_stats_setup(ctx, inputs, output):
    x, h, rstd, gamma, w, labels, w_grad, chunk = inputs
    ctx.chunk = chunk
    ctx.save_for_backward(x, h, rstd, gamma, w, labels, output[1], w_grad)
    no_gradient(ctx, output[1])


def _lm_head_ce_stats_grad(ctx, dloss, dlse):
    if dloss is None:
        return (None,) * 8
    x, h, rstd, gamma, w, labels, lse, w_grad = ctx.saved_tensors
    dx, dgamma, dw = torch.ops.coda.lm_head_ce_stats_backward(dloss, x, h, rstd, gamma, w, labels, lse, w_grad,
                                                              ctx.chunk)
    return dx, None, None, dgamma, (None if w_grad is not None else dw), None, None, None


lm_head_ce_stats.register_autograd(_lm_head_ce_stats_grad, setup_context=_lm_head_ce_stats_setup)
