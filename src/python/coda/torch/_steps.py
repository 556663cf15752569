"""The steps coda.torch's ops are made of: finalizers, the weight-gradient GEMM, the RMSNorm backward GEMM and RoPE's
backward. Each is one or a few coda launches and no PyTorch kernel: sums happen in epilogues or finalizers, and
outputs that belong together are written into views of one buffer."""
from typing import Optional, Sequence

import torch
from torch import Tensor

from coda.torch._kernels import partials_rows, run


def acc_dtype(x: Tensor) -> torch.dtype:
    # f32 statistics on the GPU; float64 throughout on the CPU reference path when the inputs are float64.
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def rstd(partials: Tensor, m: int, d: int, eps: float, like: Tensor) -> Tensor:
    out = like.new_empty(m, dtype=acc_dtype(like))
    run("rms_finalize", {"x1_sumsq": partials, "inv_d": 1.0 / d, "eps": eps}, {"rstd": out}, m, 0,
        device=like.device)
    return out


def s_factor(partials: Tensor, m: int, d: int, like: Tensor) -> Tensor:
    """s = (1/d) sum_j z_j dz_j per row, from row partials [T x m]."""
    out = like.new_empty(m, dtype=acc_dtype(like))
    run("rms_backward_finalize", {"zdz_partials": partials, "inv_d": 1.0 / d}, {"s": out}, m, 0, device=like.device)
    return out


def wgrad(dy: Tensor, x: Tensor, buffer: Optional[Tensor]) -> Tensor:
    """dW = dy^T x ([N x K] for dy [M x N], x [M x K]); accumulated into `buffer` when given."""
    n, k, m = dy.shape[1], x.shape[1], dy.shape[0]
    if buffer is not None:
        run("wgrad_accumulate", {"A": dy.t(), "B": x}, {"D": buffer}, n, k, m)
        return dy.new_empty(0)
    dw = dy.new_empty(n, k)
    run("wgrad_store", {"A": dy.t(), "B": x}, {"D": dw}, n, k, m)
    return dw


def dgrad(dy: Tensor, w: Tensor) -> Tensor:
    """dX = dy W for dy [M x N], W [N x K]."""
    m, n = dy.shape
    dx = dy.new_empty(m, w.shape[1])
    run("dgrad", {"A": dy, "B": w}, {"D": dx}, m, w.shape[1], n)
    return dx


def norm_backward(dz: Tensor, w: Tensor, x: Tensor, rstd_: Tensor, s: Tensor, gamma: Tensor,
                  dx_in: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Tensor]:
    """do = dz w; dx = [dx_in +] rstd * (do * gamma - n * s). Returns dx, o = n * gamma (for dW) and dgamma.

    dx is stored in the activations' dtype by a variant of coda.blocks.rmsnorm_backward (which accumulates into an
    f32 buffer): no buffer to zero and convert around the GEMM, and the residual gradient dx_in, where the residual
    stream's other use met this one, is added in the epilogue. dgamma is summed from the column partials by a
    finalizer."""
    dx, o = torch.empty_like(x), torch.empty_like(x)
    parts = norm_backward_into(dz, w, x, rstd_, s, gamma, dx, o, dx_in)
    return dx, o, dgamma(parts, gamma)


def norm_backward_into(dz: Tensor, w: Tensor, x: Tensor, rstd_: Tensor, s: Tensor, gamma: Tensor, dx: Tensor,
                       o: Tensor, dx_in: Optional[Tensor] = None, dgamma_partials: Optional[Tensor] = None) -> Tensor:
    """norm_backward into given dx and o (views of larger tensors, e.g. a chunk's rows), returning dgamma's column
    partials (written into `dgamma_partials` when given, so that several GEMMs' partials share one finalize)."""
    m, d = x.shape
    ins = {"A": dz, "B": w, "x": x, "rstd": rstd_, "s": s, "gamma": gamma}
    if dx_in is not None:
        ins["dx_in"] = dx_in
    name = "rmsnorm_backward_residual" if dx_in is not None else "rmsnorm_backward_bf16"
    outs = {"dx": dx, "o": o}
    if dgamma_partials is not None:
        run(name, ins, {**outs, "dgamma_partials": dgamma_partials}, m, d, dz.shape[1])
        return dgamma_partials
    return run(name, ins, outs, m, d, dz.shape[1], partials=("dgamma_partials",))["dgamma_partials"]


def dgamma(partials: Tensor, gamma: Tensor) -> Tensor:
    """dgamma [d] in gamma's dtype from column partials [T x d] (one row per M-tile, or several GEMMs' rows)."""
    out = torch.empty_like(gamma)
    run("dgamma_finalize", {"dgamma_partials": partials}, {"dgamma": out}, gamma.shape[0], 0, device=gamma.device)
    return out


def rope_backward(blocks: Sequence[tuple[Optional[Tensor], int]], qkv: Tensor, pos: Tensor,
                  theta: Tensor) -> tuple[Tensor, Tensor]:
    """dz [M x N] = RoPE^-1 of the gradients of the column blocks of qkv (each [M x width], e.g. SDPA's dq, dk and
    dv, read where attention's backward left them), written into views of one buffer, and the row partials of
    sum_j qkv_j dz_j over all N columns. A block whose gradient is None is zero (0 * its neighbour's gradient, as
    the attention-free stand-in has it). Returns (dz, partials [T x M])."""
    m, n = qkv.shape
    dz = qkv.new_empty(m, n)
    rows = [partials_rows("rope_backward_from_output", "zdz_partials", m, width, qkv.device) for _, width in blocks]
    parts = torch.empty(sum(rows), m, dtype=acc_dtype(qkv), device=qkv.device)
    col, row = 0, 0
    for (grad, width), t in zip(blocks, rows):
        cols, prow = slice(col, col + width), parts[row:row + t]
        if grad is None:
            run("zero_grad", {"values": qkv[:, cols]}, {"dz": dz[:, cols], "zdz_partials": prow}, m, width)
        else:
            run("rope_backward_from_output",
                {"dqkv": grad, "qkv": qkv[:, cols], "pos": pos, "theta": theta[col // 2:(col + width) // 2]},
                {"dz": dz[:, cols], "zdz_partials": prow}, m, width)
        col, row = col + width, row + t
    return dz, parts
