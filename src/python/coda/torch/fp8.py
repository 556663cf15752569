"""FP8 training's scales (issue 28): the "tensorwise" recipe with delayed scaling, as coda.blocks' FP8 graphs run it;
the "blockwise" recipe's (DeepSeek-V3's fine-grained scales, from each block's own amax: quantize_blockwise,
quantize_weight_blockwise; no state); and the "rowwise" recipe's (a scale per row of each activation and gradient and
per output or input channel of each weight, from their own amax: row_scales, quantize_rowwise,
quantize_weight_rowwise; no state).

Every tensor an FP8 GEMM reads has one f32 scale: A ~ scale * A_fp8. Weights are quantized at each forward from
their current amax (dynamic scaling: they change only at the optimizer step), or once per step inside
reuse_weights(). Activations and gradients are quantized inside the epilogue that makes them, so their scale must be
known before they exist: it comes from the amax of the same tensor in the last `history` steps (delayed scaling),
and each step records its own amax for the next ones.
Values past scale * the format's largest saturate to it (cvt.rn.satfinite), as in Transformer Engine's recipe.

Formats: e4m3 for the forward's tensors (weights, activations), e5m2 for gradients (its range, 2^-16 to 57344,
carries them through the first steps, whose scales are only priors).

Fp8Scaling keeps the scales of a set of named tensors as one f32 buffer `state` [5 x slots]: row 0 the scales, row 1
their reciprocals (what an epilogue multiplies by before it rounds), row 2 the amax this step recorded, rows 3 and 4 the
steps whose amax passed scale * the format's largest (values saturated) or was not finite. coda.torch's FP8 ops read
rows 0 and 1 on the GPU (bound as device scalars: no host sync) and write row 2; update() counts rows 3 and 4, and
stats() reports them."""
import contextlib
import functools
import warnings
from typing import Optional, Sequence

import torch
import torch.nn as nn
from torch import Tensor

from coda.torch._kernels import dry_run, launching, run

FORMATS = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
LARGEST = {"e4m3": 448.0, "e5m2": 57344.0}
BLOCK = 128  # the block-wise recipe's group: 1 x 128 for activations and gradients, 128 x 128 for weights
# The floor of a block-wise scale (the smallest normal f32): an all-zero block divides 0 by it, not by 0.
SMALLEST_SCALE = 2.0 ** -126

SCALE, INV_SCALE, AMAX, SATURATED, NONFINITE = range(5)
_ROWS = 5


def check_recipe(recipe, fp8_wgrad: bool = False, backward_accumulation: str = "fast") -> None:
    """None (bf16) or one of fp8_recipes.RECIPES, FP8 weight gradients only with one of them, and the backward's
    accumulation "fast" or "promoted"; else a ValueError."""
    from coda.torch.fp8_recipes import RECIPES  # which imports this module
    if recipe is not None and recipe not in RECIPES:
        raise ValueError(f"coda.torch: fp8 must be None or one of {tuple(RECIPES)}, got {recipe!r}")
    if fp8_wgrad and recipe is None:
        raise ValueError(f"coda.torch: fp8_wgrad (FP8 weight gradients) needs an FP8 recipe (one of "
                         f"{tuple(RECIPES)}), got fp8=None")
    if backward_accumulation not in ("fast", "promoted"):
        raise ValueError(f"coda.torch: fp8_backward_accumulation must be 'fast' or 'promoted', got "
                         f"{backward_accumulation!r}")


class Fp8Scaling(nn.Module):
    """Delayed scales for the tensors `slots` ({name: "e4m3" | "e5m2"}), in that order.

    update() closes a step and starts the next. It counts each slot whose recorded amax passed its scale times the
    format's largest (some of its values saturated) or was not finite, pushes the finite amaxes into the history and
    sets every scale to max(history) / largest. A slot whose history holds no amax yet keeps its scale: 1 for e4m3
    tensors (activations are of order 1), and for e5m2 ones (gradients of a mean loss over `tokens` rows, of order
    1 / tokens) 1 / tokens, set at the first update. A non-finite amax (an inf or NaN upstream) enters the history as
    no amax at all, so the scale keeps its value; Transformer Engine also keeps the previous scale for a non-finite
    amax, but rolls that amax into its history, where it holds the scale back for the history's length.

    label: the name warnings and stats() give this state (LlamaModel sets each to its module path). In eager mode
    update() looks at the counts without waiting for the GPU (a copy it reads a step later) and warns the first time a
    slot saturates or sees a non-finite amax; compiled or captured steps count as well, and stats() reports them."""

    def __init__(self, slots: dict, history: int = 16, device=None, label: str = "fp8"):
        super().__init__()
        if history < 1:
            raise ValueError(f"coda.torch: an amax history needs at least one step, got {history}")
        self.names = tuple(slots)
        self.formats = tuple(slots[n] for n in self.names)
        for name, fmt in slots.items():
            if fmt not in FORMATS:
                raise ValueError(f"coda.torch: slot {name!r} has format {fmt!r}; FP8 formats are {tuple(FORMATS)}")
        count = len(self.names)
        state = torch.zeros(_ROWS, count, dtype=torch.float32, device=device)
        state[SCALE] = 1.0
        state[INV_SCALE] = 1.0
        self.register_buffer("state", state)
        self.register_buffer("amax_history", torch.zeros(history, count, dtype=torch.float32, device=device))
        self.register_buffer("largest", torch.tensor([LARGEST[f] for f in self.formats], dtype=torch.float32,
                                                     device=device), persistent=False)
        self.register_buffer("gradient", torch.tensor([f == "e5m2" for f in self.formats], device=device),
                             persistent=False)
        # Whether update() has set the gradients' priors: a tensor, so that a compiled step changes no Python state.
        self.register_buffer("started", torch.zeros((), dtype=torch.bool, device=device), persistent=False)
        self.label = label
        self._warned = torch.zeros(2, count, dtype=torch.float32)  # the counts warned about, per row
        self._copy = None  # (host copy of the count rows, the event after it): a CUDA state's last look

    def _apply(self, fn, recurse=True):
        # Scales stay f32 through model.bfloat16() and the like, which cast every floating buffer.
        kept = {name: getattr(self, name) for name in ("state", "amax_history", "largest")}
        super()._apply(fn, recurse)
        for name, old in kept.items():
            new = getattr(self, name)
            if new.dtype != torch.float32:
                setattr(self, name, old.to(new.device))
        self._copy = None
        return self

    def __getstate__(self):
        # The host copy and its CUDA event (_look) are this object's own look at its GPU counts: a copy (deepcopy,
        # pickle) starts without one.
        return {**self.__dict__, "_copy": None}

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # A state saved before the counts existed has rows 0-2 only: it loads with its counts at zero.
        key = prefix + "state"
        saved = state_dict.get(key)
        if saved is not None and saved.dim() == 2 and saved.shape[0] == AMAX + 1:
            state_dict[key] = torch.cat([saved, saved.new_zeros(_ROWS - saved.shape[0], saved.shape[1])])
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def slot(self, name: str) -> int:
        return self.names.index(name)

    def scale(self, name: str) -> Tensor:
        """The scale of `name` (a 0-dim view of the buffer: kernels read it when they run)."""
        return self.state[SCALE, self.slot(name)]

    def inv_scale(self, name: str) -> Tensor:
        return self.state[INV_SCALE, self.slot(name)]

    def scales(self) -> Tensor:
        """The scales and their reciprocals now, [2 x slots]: a copy, which an FP8 op quantizes with and keeps for its
        backward, so that later updates (another forward before this one's backward) do not reach it."""
        return self.state[SCALE:INV_SCALE + 1].clone()

    @torch.no_grad()
    def record(self, amax: Tensor) -> None:
        """Adds a forward op's amax vector (one entry a slot, 0 where it recorded none) to this step's."""
        if dry_run():  # a dry run's tensors hold no values (record_launches)
            return
        torch.maximum(self.state[AMAX], amax, out=self.state[AMAX])

    @torch.no_grad()
    def update(self, tokens: int) -> None:
        if dry_run():  # a dry run (record_launches, warm) is no step
            return
        amax = self.state[AMAX]
        finite = torch.isfinite(amax)
        self.state[SATURATED] += finite & (amax > self.state[SCALE] * self.largest)
        self.state[NONFINITE] += ~finite
        self.amax_history.copy_(torch.roll(self.amax_history, 1, 0))
        self.amax_history[0].copy_(torch.where(finite, amax, torch.zeros_like(amax)))
        self.state[AMAX].zero_()
        prior = torch.where(self.gradient & ~self.started, torch.tensor(1.0 / max(tokens, 1), device=amax.device),
                            self.state[SCALE])
        self.started.fill_(True)
        largest = self.amax_history.amax(0)
        scale = torch.where(largest > 0, largest / self.largest, prior)
        self.state[SCALE].copy_(scale)
        self.state[INV_SCALE].copy_(1.0 / scale)
        self._look()

    def _look(self) -> None:
        """Warns about counts that grew, in eager mode, without waiting for the GPU: a CUDA state's counts are copied
        to the host here and read at a later update, once the copy is done."""
        if torch.compiler.is_compiling() or (self.state.is_cuda and torch.cuda.is_current_stream_capturing()):
            return
        counts = self.state[SATURATED:]
        if not self.state.is_cuda:
            self.warn(counts)
            return
        if self._copy is not None:
            host, done = self._copy
            if not done.query():
                return
            self.warn(host)
        else:
            host = torch.empty(counts.shape, dtype=torch.float32, pin_memory=True)
        host.copy_(counts, non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        self._copy = (host, done)

    def warn(self, counts: Tensor) -> None:
        """One warning for each count row (SATURATED, NONFINITE of `counts`) naming the slots whose count grew from
        zero since the last warning."""
        counts = counts.cpu()
        for row, what in enumerate(_COUNTED):
            new = [f"{name} ({self.formats[i]}, {int(counts[row, i])} step(s))" for i, name in enumerate(self.names)
                   if counts[row, i] > 0 and self._warned[row, i] == 0]
            if new:
                warnings.warn(f"coda.torch: FP8 tensors of {self.label} {what}: {', '.join(new)}; "
                              f"coda.torch.fp8.stats(model) reports every count", stacklevel=3)
        self._warned.copy_(counts)


# What each count row means, for warnings (SATURATED, NONFINITE).
_COUNTED = ("had values past their delayed scale times the format's largest, which saturated",
            "recorded a non-finite amax, kept out of the history (the scale stayed)")


def stats(module: nn.Module) -> dict:
    """Every delayed scale in `module` (its Fp8Scaling states: coda.torch's tensorwise layers), read back in one host
    sync: {module path: {tensor: {"format", "scale", "saturated_steps", "nonfinite_steps"}}}. The steps count the
    updates since the model was built (or loaded) at which the tensor's amax passed scale * the format's largest
    (values saturated to it) or was not finite. Warns, as update() does, about counts not warned about before."""
    states = [(path or m.label, m) for path, m in module.named_modules() if isinstance(m, Fp8Scaling)]
    host = [m.state.cpu() for _, m in states]
    out = {}
    for (path, m), state in zip(states, host):
        m.warn(state[SATURATED:])
        out[path] = {name: {"format": m.formats[i], "scale": float(state[SCALE, i]),
                            "saturated_steps": int(state[SATURATED, i]), "nonfinite_steps": int(state[NONFINITE, i])}
                     for i, name in enumerate(m.names)}
    return out


def record_amax(partials: Sequence[Tensor], amax: Tensor, slot: int) -> None:
    """amax[slot] = the largest |value| of a tensor, from its row partials (several launches' partials together), or
    what amax[slot] held if larger. `amax` is an Fp8Scaling state's AMAX row, or a forward op's own vector (an op with
    autograd may not write its inputs) that the module then adds with Fp8Scaling.record. A dry run's partials hold
    no values, and a backward writes the state itself: nothing is recorded then."""
    if dry_run():
        return
    found = torch.stack([p.amax() for p in partials]).amax() if len(partials) > 1 else partials[0].amax()
    amax[slot].copy_(torch.maximum(amax[slot], found.to(amax.dtype)))


# reuse_weights' entries while it is open: {(function, storage, offset, shape, stride, dtype): (version, data_ptr,
# the weight, its quantization)}; None outside it.
_reused: Optional[dict] = None


@contextlib.contextmanager
def reuse_weights():
    """Quantize each weight once while the context is open, not at each forward: for the micro-batches of one
    optimizer step (gradient accumulation) and the forwards that activation checkpointing recomputes.

        with coda.torch.fp8.reuse_weights():
            for tokens, labels in micro_batches:
                model(tokens, labels).backward()
        optimizer.step()

    A weight's FP8 copy, its transpose and scales are kept until the context closes. It is made again when the weight
    changes in place (its version counter: optimizer.step inside the context, or copy_) or moves (a new storage or
    address: FSDP2 gathering it anew). A write that bypasses the version counter (through `.data`) is not seen, so
    step the optimizer outside the context. Contexts nest: the outermost one owns the entries."""
    global _reused
    outer = _reused
    if outer is None:
        _reused = {}
    try:
        yield
    finally:
        _reused = outer


def _once_per_step(quantize_fn):
    """quantize_fn(w), or inside reuse_weights() its result for the same weight at the same version."""
    @functools.wraps(quantize_fn)
    def quantized(w: Tensor):
        if _reused is None or not launching():  # a fake tensor has no address to key on
            return quantize_fn(w)
        key = (quantize_fn.__name__, w.untyped_storage()._cdata, w.storage_offset(), tuple(w.shape), w.stride(),
               w.dtype)
        entry = _reused.get(key)
        if entry is not None and entry[0] == w._version and entry[1] == w.data_ptr():
            return entry[3]
        result = quantize_fn(w)
        # The weight stays referenced: while the entry lives, no other storage can take its address (the key).
        _reused[key] = (w._version, w.data_ptr(), w.detach(), result)
        return result
    return quantized


def quantize(x: Tensor, fmt: str, inv_scale: Tensor, amax: Tensor, slot: int, transposed: bool = False):
    """x in FP8, multiplied by inv_scale (coda.blocks.quantize_e4m3 or quantize_e5m2), recording x's amax in amax[slot].
    With `transposed`, (x_fp8, its transpose [N x M]: a weight gradient's operand; quantize_e4m3_t / _e5m2_t)."""
    m, n = x.shape
    out = torch.empty(m, n, dtype=FORMATS[fmt], device=x.device)
    outs = {"x_fp8": out}
    if transposed:
        outs["x_fp8_t"] = torch.empty(n, m, dtype=FORMATS[fmt], device=x.device)
    parts = run(f"quantize_{fmt}_t" if transposed else f"quantize_{fmt}", {"x": x, "x_fp8_inv_scale": inv_scale}, outs,
                m, n, partials=("x_amax",))
    record_amax([parts["x_amax"]], amax, slot)
    return (out, outs["x_fp8_t"]) if transposed else out


@_once_per_step
def quantize_weight(w: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """A weight [N x K] in e4m3 under its current amax (scale = amax / 448): (w_fp8 [N x K], its transpose [K x N]
    row-major, for the backward's dgrad GEMMs, and the scale, 0-dim f32)."""
    w = w.detach()
    amax = torch.linalg.vector_norm(w, float("inf")).to(torch.float32).clamp_min(1e-30)
    inv_scale = LARGEST["e4m3"] / amax
    scale = amax / LARGEST["e4m3"]
    n, k = w.shape
    # Both copies in one pass (quantize_e4m3_t); torch's transpose of an FP8 tensor ran at a quarter of copy speed.
    w_fp8 = torch.empty(n, k, dtype=FORMATS["e4m3"], device=w.device)
    w_t = torch.empty(k, n, dtype=FORMATS["e4m3"], device=w.device)
    run("quantize_e4m3_t", {"x": w, "x_fp8_inv_scale": inv_scale}, {"x_fp8": w_fp8, "x_fp8_t": w_t}, n, k,
        partials=("x_amax",))
    return w_fp8, w_t, scale



def _quantize_groups(graph: str, x: Tensor, m: int, n: int) -> tuple[Tensor, Tensor]:
    # The tile program `graph` over an m x n index space: x_fp8 [m x n] e4m3, the scales f32 [ceil(n / 128) x m].
    out = torch.empty(m, n, dtype=FORMATS["e4m3"], device=x.device)
    parts = run(graph, {"x": x.contiguous()}, {"x_fp8": out}, m, n, partials=("x_scale_partials",))
    return out, parts["x_scale_partials"].to(torch.float32)


def quantize_blockwise(x: Tensor) -> tuple[Tensor, Tensor]:
    """x [M x N] in e4m3 with each row's 128-column group's own scale (coda.blocks.quantize_e4m3_blockwise): (x_fp8,
    the scales f32 [ceil(N / 128) x M], a block-scaled GEMM's scales of A)."""
    return _quantize_groups("quantize_e4m3_blockwise", x, *x.shape)


def quantize_blockwise_t(x: Tensor) -> tuple[Tensor, Tensor]:
    """quantize_blockwise(x.t()) in one pass (coda.blocks.quantize_e4m3_blockwise_t reads x transposed): x [T x F] to
    (x_fp8 [F x T] in e4m3 with one scale per row and 128 columns, the scales f32 [ceil(T / 128) x F]); the K-major
    operand and scales of a weight gradient over the T tokens (scaled_mm(..., blockwise=True) with scale_b per row)."""
    t, f = x.shape
    return _quantize_groups("quantize_e4m3_blockwise_t", x, f, t)


def _group_rows(w: Tensor) -> tuple[Tensor, int, int]:
    # w [N x K] as rows of one 128-column group each, [nb * 128 * kb, 128] with nb = ceil(N / 128) and kb =
    # ceil(K / 128): row r is group r % kb of w's row r // kb. Zero-padded to whole 128 x 128 blocks; a view when they
    # are. Returns (rows, nb, kb).
    n, k = w.shape
    nb, kb = -(-n // BLOCK), -(-k // BLOCK)
    if n % BLOCK or k % BLOCK:
        w = torch.nn.functional.pad(w, (0, kb * BLOCK - k, 0, nb * BLOCK - n))
    return w.reshape(nb * BLOCK * kb, BLOCK), nb, kb


def _block_scales(rows: Tensor, nb: int, kb: int) -> Tensor:
    # The blocks' scales from their group rows (_group_rows): each group's max norm (128 contiguous elements), then
    # the max over the block's 128 rows. The max norm runs at about a fifth of copy speed (H200 profile,
    # docs/PERFORMANCE.md, twenty-sixth session): the largest part of the weights' quantization now.
    amax = torch.linalg.vector_norm(rows, float("inf"), dim=1).view(nb, BLOCK, kb).amax(1).to(torch.float32)
    return (amax * torch.tensor(1.0 / LARGEST["e4m3"], dtype=torch.float32)).clamp_min(SMALLEST_SCALE)


def weight_block_scales(w: Tensor) -> Tensor:
    """The block-wise scales of a weight [N x K]: f32 [ceil(N / 128) x ceil(K / 128)], each max(the block's amax / 448,
    SMALLEST_SCALE) as the epilogues make theirs (the amax times 1 / 448 in f32)."""
    return _block_scales(*_group_rows(w.detach()))


@_once_per_step
def quantize_weight_blockwise(w: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """A weight [N x K] in e4m3 with one scale per 128 x 128 block (weight_block_scales): (w_fp8 [N x K], its scales
    [ceil(N / 128) x ceil(K / 128)], the transpose [K x N] row-major and its scales [ceil(K / 128) x ceil(N / 128)], for
    the backward's dgrad GEMMs: a square block is the same block transposed). The values are w * (1 / scale) in f32
    rounded to e4m3, as the epilogues quantize theirs (store_fp8_grouped); every |w| / scale is at most 448 (the scale
    is the block's amax / 448), so the cast needs no clamp."""
    w = w.detach()
    n, k = w.shape
    rows, nb, kb = _group_rows(w)
    scale = _block_scales(rows, nb, kb)
    # Quantized by row group (coda.blocks.quantize_e4m3_rowwise on the group rows), each group under its block's
    # 1 / scale: one f32 a group, 1/64 of the weight's bytes. torch's broadcast multiply with the cast in its store
    # took 6x its copy time.
    inv_rows = torch.reciprocal(scale)[:, None, :].expand(nb, BLOCK, kb).reshape(-1)
    whole = torch.empty(nb * BLOCK, kb * BLOCK, dtype=FORMATS["e4m3"], device=w.device)
    run("quantize_e4m3_rowwise", {"x": rows, "x_fp8_inv_scale": inv_rows}, {"x_fp8": whole.view(-1, BLOCK)},
        rows.shape[0], BLOCK)
    w_fp8 = whole if (n, k) == tuple(whole.shape) else whole[:n, :k].contiguous()
    # The transposed copy by a tile program (coda.blocks.transpose_e4m3): torch's transpose of FP8 bytes ran at a
    # quarter of copy speed.
    w_t = torch.empty(k, n, dtype=FORMATS["e4m3"], device=w.device)
    run("transpose_e4m3", {"x": w_fp8}, {"x_t": w_t}, n, k)
    return w_fp8, scale, w_t, scale.t().contiguous()


def row_scales(partials) -> tuple[Tensor, Tensor]:
    """Each row's scale and its reciprocal (f32 [M]) from the row partials of its amax (one tensor [T x M], or several
    launches' of the same rows): max(amax / 448, SMALLEST_SCALE), as quantize_weight_rowwise makes the weights'."""
    if isinstance(partials, Tensor):
        partials = [partials]
    amax = torch.cat([p.to(torch.float32) for p in partials]).amax(0)
    scale = (amax * torch.tensor(1.0 / LARGEST["e4m3"], dtype=torch.float32)).clamp_min(SMALLEST_SCALE)
    return scale, 1.0 / scale


def quantize_rowwise(x: Tensor, inv_scale: Tensor, gamma: Optional[Tensor] = None) -> Tensor:
    """x [M x N] (times gamma [N], when given: h from the residual stream) in e4m3 under each row's inv_scale [M]
    (coda.blocks.quantize_e4m3_rowwise or _gamma)."""
    m, n = x.shape
    out = torch.empty(m, n, dtype=FORMATS["e4m3"], device=x.device)
    ins = {"x": x.contiguous(), "x_fp8_inv_scale": inv_scale}
    name = "quantize_e4m3_rowwise"
    if gamma is not None:
        ins["gamma"] = gamma
        name += "_gamma"
    run(name, ins, {"x_fp8": out}, m, n)
    return out


@_once_per_step
def quantize_weight_rowwise(w: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """A weight [N x K] in e4m3 twice: with a scale per row (output channel), the forward's B, and with a scale per
    column (input channel), the dgrad's B, stored transposed [K x N] row-major. Returns (w_fp8, its row scales [N],
    the transposed copy, its scales [K]); scales are max(amax / 448, SMALLEST_SCALE) in f32."""
    w = w.detach().contiguous()
    n, k = w.shape
    row, row_inv = row_scales(torch.linalg.vector_norm(w, float("inf"), dim=1)[None, :])
    col, col_inv = row_scales(torch.linalg.vector_norm(w, float("inf"), dim=0)[None, :])
    # Each copy by one tile program (the transposed one staged in shared memory), not torch's cast and transpose.
    w_fp8 = torch.empty(n, k, dtype=FORMATS["e4m3"], device=w.device)
    run("quantize_e4m3_rowwise", {"x": w, "x_fp8_inv_scale": row_inv}, {"x_fp8": w_fp8}, n, k)
    w_t_fp8 = torch.empty(k, n, dtype=FORMATS["e4m3"], device=w.device)
    run("quantize_e4m3_colwise_t", {"x": w, "x_fp8_inv_scale": col_inv}, {"x_fp8_t": w_t_fp8}, n, k)
    return w_fp8, row, w_t_fp8, col
