"""The LM head and its mean cross-entropy as torch custom ops: with the logits stored (lm_head_ce) or recomputed in
the backward (lm_head_ce_stats). The loss gradient reaches the backward kernels as a scalar read on the GPU, so the
backward needs no host synchronization and captures into a CUDA graph.

ignore_index (Hugging Face's -100 for positions without a target): the mean is over the other rows only (NaN when
there are none, as F.cross_entropy gives) and an ignored row's logit gradient is exactly 0. The statistics kernels
are unchanged (the label of an ignored row matches no column, and its loss is masked out of the mean); the backward
kernels read the loss gradient per row, dloss * valid_i / n_valid, from a few small torch ops on M elements that
stay on the device. Labels other than ignore_index must lie in [0, V): checked on the CPU; on CUDA that check would
synchronize with the host, so an out-of-range label there is the caller's bug (its row's loss is its lse, as
without ignore_index)."""
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


def _row_scale(dloss: Tensor, labels: Tensor, ignore_index: int) -> Tensor:
    """d(mean over the rows not ignored)/d(row loss) per row [M], bound as the *_row_scale graphs' `row_scale`:
    dloss / n_valid where the label is not ignore_index, else 0 (also when no row is valid, where F.cross_entropy's
    gradient is 0 too)."""
    valid = labels != ignore_index
    return torch.where(valid, dloss.to(acc_dtype(dloss)) / valid.sum(), 0.0)


def _backward_scale(graph: str, dloss: Tensor, labels: Tensor,
                    ignore_index: Optional[int]) -> tuple[str, str, Tensor]:
    """The backward graph to run and its loss-gradient binding (name, value): coda.blocks' `graph` with the scalar
    `scale`, or with ignore_index its local *_row_scale variant with the row vector `row_scale`."""
    if ignore_index is None:
        return graph, "scale", _loss_scale(dloss, labels.shape[0])
    return graph + "_row_scale", "row_scale", _row_scale(dloss, labels, ignore_index)


def _check_labels(labels: Tensor, v: int, ignore_index: Optional[int]) -> None:
    # Only with ignore_index and only on the CPU: on CUDA the check would synchronize (see the module's docstring).
    if ignore_index is None or labels.device.type != "cpu":
        return
    bad = (labels != ignore_index) & ((labels < 0) | (labels >= v))
    if bad.any():
        raise ValueError(f"coda.torch lm_head_ce: labels must be ignore_index ({ignore_index}) or in [0, {v}) "
                         f"(the vocabulary size); got {labels[bad].unique().tolist()[:8]} "
                         f"at rows {bad.nonzero().flatten().tolist()[:8]}")


def _ce_stats(x: Tensor, parts: dict, m: int, labels: Tensor, ignore_index: Optional[int]) -> tuple[Tensor, Tensor]:
    lse = x.new_empty(m, dtype=acc_dtype(x))
    loss = x.new_empty(m, dtype=acc_dtype(x))
    run("ce_finalize", parts, {"lse": lse, "loss": loss}, m, 0, device=x.device)
    if ignore_index is None:
        return loss.mean(), lse
    valid = labels != ignore_index
    return torch.where(valid, loss, 0.0).sum() / valid.sum(), lse  # 0 / 0 = NaN when no row is valid


# ---------------------------------------------------------------------------------------------------------
# lm_head_ce: logits = rstd * (h W^T); loss = mean over rows (those not ignored) of lse - logit[label].
# Returns (loss, logits, lse).

@torch.library.custom_op("coda::lm_head_ce", mutates_args=())
def lm_head_ce(x: Tensor, h: Tensor, rstd: Tensor, gamma: Tensor, w: Tensor, labels: Tensor,
               w_grad: Optional[Tensor] = None, ignore_index: Optional[int] = None) -> tuple[Tensor, Tensor, Tensor]:
    m, d = h.shape
    v = w.shape[0]
    _check_labels(labels, v, ignore_index)
    logits = h.new_empty(m, v)
    parts = run("lm_head_ce", {"A": h, "B": w.t(), "rstd": rstd, "labels": labels}, {"logits": logits},
                m, v, d, partials=("lse_partials", "target_partials"))
    loss, lse = _ce_stats(x, parts, m, labels, ignore_index)
    return loss, logits, lse


@fake(lm_head_ce)
def _(x, h, rstd, gamma, w, labels, w_grad=None, ignore_index=None):
    m = h.shape[0]
    acc = acc_dtype(x)
    return h.new_empty((), dtype=acc), h.new_empty(m, w.shape[0]), h.new_empty(m, dtype=acc)


@torch.library.custom_op("coda::lm_head_ce_backward", mutates_args=("w_grad",))
def lm_head_ce_backward(dloss: Tensor, x: Tensor, rstd: Tensor, gamma: Tensor, w: Tensor, labels: Tensor,
                        logits: Tensor, lse: Tensor, w_grad: Optional[Tensor],
                        ignore_index: Optional[int] = None) -> tuple[Tensor, Tensor, Tensor]:
    m, d = x.shape
    v = w.shape[0]
    graph, scale_name, scale = _backward_scale("cross_entropy_backward", dloss, labels, ignore_index)
    dlogits = torch.empty_like(logits)
    parts = run(graph, {"logits": logits, "lse": lse, "labels": labels, scale_name: scale},
                {"dlogits": dlogits}, m, v, partials=("zdz_partials",))
    s = _steps.s_factor(parts["zdz_partials"], m, d, x)
    dx, o, dgamma = _steps.norm_backward(dlogits, w, x, rstd, s, gamma)
    return dx, dgamma, _steps.wgrad(dlogits, o, w_grad)


@fake(lm_head_ce_backward)
def _(dloss, x, rstd, gamma, w, labels, logits, lse, w_grad, ignore_index=None):
    return torch.empty_like(x), torch.empty_like(gamma), (w.new_empty(0) if w_grad is not None else torch.empty_like(w))


def _lm_head_ce_setup(ctx, inputs, output):
    x, h, rstd, gamma, w, labels, w_grad, ignore_index = inputs
    ctx.ignore_index = ignore_index
    ctx.save_for_backward(x, rstd, gamma, w, labels, output[1], output[2], w_grad)
    no_gradient(ctx, *output[1:])


def _lm_head_ce_grad(ctx, dloss, dlogits, dlse):
    if dloss is None:
        return (None,) * 8
    x, rstd, gamma, w, labels, logits, lse, w_grad = ctx.saved_tensors
    dx, dgamma, dw = torch.ops.coda.lm_head_ce_backward(dloss, x, rstd, gamma, w, labels, logits, lse, w_grad,
                                                        ctx.ignore_index)
    return dx, None, None, dgamma, (None if w_grad is not None else dw), None, None, None


lm_head_ce.register_autograd(_lm_head_ce_grad, setup_context=_lm_head_ce_setup)


# ---------------------------------------------------------------------------------------------------------
# lm_head_ce_stats: the same loss with no logits stored. The backward recomputes them in the LM head GEMM
# (lm_head_ce_backward), `chunk` rows at a time, so only a chunk x V dlogits tensor ever exists.

@torch.library.custom_op("coda::lm_head_ce_stats", mutates_args=())
def lm_head_ce_stats(x: Tensor, h: Tensor, rstd: Tensor, gamma: Tensor, w: Tensor, labels: Tensor,
                     w_grad: Optional[Tensor] = None, chunk: int = 4096,
                     ignore_index: Optional[int] = None) -> tuple[Tensor, Tensor]:
    m, d = h.shape
    v = w.shape[0]
    _check_labels(labels, v, ignore_index)
    parts = run("lm_head_ce_stats", {"A": h, "B": w.t(), "rstd": rstd, "labels": labels}, {}, m, v, d,
                partials=("lse_partials", "target_partials"))
    return _ce_stats(x, parts, m, labels, ignore_index)


@fake(lm_head_ce_stats)
def _(x, h, rstd, gamma, w, labels, w_grad=None, chunk=4096, ignore_index=None):
    acc = acc_dtype(x)
    return h.new_empty((), dtype=acc), h.new_empty(h.shape[0], dtype=acc)


@torch.library.custom_op("coda::lm_head_ce_stats_backward", mutates_args=("w_grad",))
def lm_head_ce_stats_backward(dloss: Tensor, x: Tensor, h: Tensor, rstd: Tensor, gamma: Tensor, w: Tensor,
                              labels: Tensor, lse: Tensor, w_grad: Optional[Tensor], chunk: int,
                              ignore_index: Optional[int] = None) -> tuple[Tensor, Tensor, Tensor]:
    m, d = x.shape
    v = w.shape[0]
    graph, scale_name, scale = _backward_scale("lm_head_ce_backward", dloss, labels, ignore_index)
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
        # A per-row scale is cut into the chunk's rows like the other row inputs; the scalar is bound whole.
        chunk_scale = scale[r] if scale.dim() else scale
        parts = run(graph, {"A": h[r], "B": w.t(), "rstd": rstd[r], "lse": lse[r], "labels": labels[r],
                            scale_name: chunk_scale}, {"dlogits": dlogits}, c, v, d, partials=("zdz_partials",))
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
def _(dloss, x, h, rstd, gamma, w, labels, lse, w_grad, chunk, ignore_index=None):
    return torch.empty_like(x), torch.empty_like(gamma), (w.new_empty(0) if w_grad is not None else torch.empty_like(w))


def _lm_head_ce_stats_setup(ctx, inputs, output):
    x, h, rstd, gamma, w, labels, w_grad, chunk, ignore_index = inputs
    ctx.chunk, ctx.ignore_index = chunk, ignore_index
    ctx.save_for_backward(x, h, rstd, gamma, w, labels, output[1], w_grad)
    no_gradient(ctx, output[1])


def _lm_head_ce_stats_grad(ctx, dloss, dlse):
    if dloss is None:
        return (None,) * 9
    x, h, rstd, gamma, w, labels, lse, w_grad = ctx.saved_tensors
    dx, dgamma, dw = torch.ops.coda.lm_head_ce_stats_backward(dloss, x, h, rstd, gamma, w, labels, lse, w_grad,
                                                              ctx.chunk, ctx.ignore_index)
    return dx, None, None, dgamma, (None if w_grad is not None else dw), None, None, None, None


lm_head_ce_stats.register_autograd(_lm_head_ce_stats_grad, setup_context=_lm_head_ce_stats_setup)
