"""The FP8 recipes of coda.torch's decoder layer, as policies of its one schedule (ops_fp8_layer). A recipe says what
differs between them: how a weight and a tensor are quantized, which scale tensors bind under which names, which graph
variant each GEMM and epilogue uses, and how an epilogue makes the FP8 copy that a later GEMM reads.
  tensorwise  delayed scales (Fp8Scaling's state, one per tensor slot of SLOTS); e4m3 forward, e5m2 gradients. The
              epilogues write FP8 copies under the scales the step began with, and with fp8_wgrad the transposed
              copies the weight gradients read (the *_t graphs). Weights: one scale each, from their amax.
  rowwise     torchao's: a scale per row of each activation and gradient and per channel of each weight, all e4m3. A
              row's scale needs the whole row, so an epilogue writes bf16 and the rows' amax partials, and a tile
              program quantizes after it (the second pass this recipe costs).
  blockwise   DeepSeek-V3's: one scale per row and 128 columns (128 x 128 for weights), applied in the mainloop, all
              e4m3; the epilogues write FP8 copies with their scales.
  tensorwise_current
              torchao's tensorwise recipe (Transformer Engine's current scaling): one scale per tensor from its own
              amax as it is made, all e4m3; the row-wise graphs run it, every row under the tensor's scale.
Only tensorwise keeps state. With fp8_wgrad its weight gradients read transposed FP8 copies of e5m2 gradients and
e4m3 activations; the others' quantize the bf16 operands along the tokens when the gradient runs (row-wise: a scale
per channel; block-wise: per channel and 128 tokens, each operand read transposed and quantized in one pass)."""
from typing import NamedTuple, Optional

import torch
from torch import Tensor

from coda.torch import _steps
from coda.torch._kernels import PROMOTED, block_scale_names, run, scaled_mm_name
from coda.torch.fp8 import (AMAX, BLOCK, FORMATS, INV_SCALE, SCALE, quantize, quantize_blockwise,
                            quantize_blockwise_t, quantize_rowwise, quantize_weight, quantize_weight_blockwise,
                            quantize_weight_rowwise, record_amax, row_scales)

# The tensors of a layer under delayed scales (tensorwise), in the order of Fp8Scaling's state, with their formats.
SLOTS = {"attn_out": "e4m3", "h_mlp": "e4m3", "y": "e4m3", "h_next": "e4m3",
         "dx2": "e5m2", "dz_mlp": "e5m2", "dx1": "e5m2", "dz_qkv": "e5m2",
         "o_mlp": "e4m3", "o_qkv": "e4m3"}  # the last two: the norm backwards' outputs, for FP8 weight gradients
_SLOT = {name: i for i, name in enumerate(SLOTS)}
_E4M3 = FORMATS["e4m3"]


class Operand(NamedTuple):
    """An FP8 GEMM operand, K-major ([rows x K] row-major: A as it is, B as data.t()), and its scales."""
    data: Tensor
    scale: Tensor


class Made(NamedTuple):
    """A tensor an epilogue or a quantize pass made: its FP8 copy that a later GEMM reads (fp8), what a weight gradient
    reads (wgrad: the tensor in bf16, or the transposed FP8 copy an epilogue wrote), and the bf16 tensor, where one
    was written."""
    fp8: Optional[Operand]
    wgrad: object
    bf16: Optional[Tensor]


class Out(NamedTuple):
    """A tensor an epilogue makes, as the schedule declares it. name: the stem of its bindings (dz binds dz, dz_fp8,
    dz_fp8_t, dz_amax ...); slot: its delayed scale; width: its columns; source: the bf16 tensor it is made from where
    the schedule binds that itself (h from x1), else the recipe binds `name` in bf16 where it is wanted; gamma: the
    FP8 copy is source * gamma; a: a later GEMM reads it in FP8; w: a weight gradient reads it; keep: the bf16 tensor
    is wanted besides the weight gradient; recomputed: the forward made it first (its scale is the forward's)."""
    name: str
    slot: str
    width: int
    source: Optional[Tensor] = None
    gamma: Optional[Tensor] = None
    a: bool = True
    w: bool = False
    keep: bool = False
    recomputed: bool = False


class Recipe:
    """What a recipe's layer does differently; an instance serves one forward or one backward. scales: the scales
    its quantizations read; amax: where they record the amax they see (tensorwise only); forward_scales: the scales
    the forward quantized with (a backward's copies of the forward's tensors use them); promoted: its GEMMs promote
    their accumulator every 128 k (_kernels.PROMOTED; block-scaled GEMMs always do)."""
    name, suffix = "tensorwise", ""  # these defaults are tensorwise's
    scale_names = ("a_scale", "b_scale")
    scales_layout = ""  # scales_shape in words
    unstaged = ()  # slots whose FP8 copy no epilogue writes: a tile program quantizes them after it
    rope_graphs = ("rope_backward_from_output_fp8", "zero_grad_fp8")  # RoPE's backward, and for a zero block
    zero_grad_fp8 = True  # whether the zero block's graph makes FP8 copies too
    wgrad_graphs = ("wgrad_fp8_accumulate", "dgrad_fp8")  # accumulated into an f32 buffer, stored
    block_scaled = False  # whether its GEMMs apply block scales in the mainloop (and so promote)

    def __init__(self, fp8_wgrad: bool, scales: Optional[Tensor] = None, amax: Optional[Tensor] = None,
                 forward_scales: Optional[Tensor] = None, promoted: bool = False):
        self.fp8_wgrad, self.scales, self.amax = fp8_wgrad, scales, amax
        self.forward_scales = scales if forward_scales is None else forward_scales
        self.accumulation = PROMOTED if promoted and not self.block_scaled else ""

    def scales_shape(self, m: int, n: int) -> Optional[tuple]:
        """The shape of the scales of an activation or gradient [m x n] that the epilogues hand on (None: read from
        the delayed scales' state)."""
        return None

    def graph(self, role: str, variant: str = "", transposed: bool = False) -> str:
        return f"{role}_fp8{self.suffix}{variant}{'_t' if transposed else ''}{self.accumulation}"

    def gemm(self, a: Operand, b: Operand) -> dict:
        """The bindings of A and B (B = b.data.t()) and their scales."""
        return {"A": a.data, "B": b.data.t(), self.scale_names[0]: a.scale, self.scale_names[1]: b.scale}

    def weight(self, w: Tensor) -> tuple[Operand, Operand]:
        """A weight [N x K] quantized: (the forward's B [N x K], the dgrad's B, its transpose [K x N])."""
        raise NotImplementedError

    def quantize(self, t: Tensor, slot: str, w: bool = False, amax=None, gamma=None) -> Made:
        """t [M x N] (times gamma) in FP8 by a pass of its own, with a transposed copy for the weight gradient where
        w and the recipe makes one; amax: the epilogues' row partials of t, where they made them."""
        raise NotImplementedError

    def transposed_copy(self, out: Out) -> bool:
        """Whether an epilogue writes `out` transposed in FP8 for the weight gradient."""
        return False

    def _bind(self, out: Out, ins: dict, outputs: dict, partials: list, m: int, device):
        return None

    def bind(self, outs: list[Out], ins: dict, outputs: dict, partials: list, like: Tensor) -> list:
        """Adds the bindings by which an epilogue makes `outs` (bf16 and FP8 copies, inverse scales, partials)."""
        m = like.shape[0]
        for out in outs:
            if out.source is None and (out.keep or not self.transposed_copy(out)):
                outputs[out.name] = like.new_empty(m, out.width)
        return [self._bind(out, ins, outputs, partials, m, like.device) for out in outs]

    def _finish(self, out: Out, bound, parts: list[dict], source: Optional[Tensor]) -> Made:
        if not out.a:
            return Made(None, source, source)
        amax = [p[f"{out.name}_amax"] for p in parts if f"{out.name}_amax" in p]
        return self.quantize(source, out.slot, out.w, amax or None, out.gamma)

    def finish(self, outs: list[Out], bound: list, parts: list[dict], outputs: dict) -> dict:
        """{name: Made} of `outs` once their epilogue ran (parts: the partials of each of its launches)."""
        return {out.name: self._finish(out, b, parts, out.source if out.source is not None else outputs.get(out.name))
                for out, b in zip(outs, bound)}

    def launch(self, role: str, ins: dict, outputs: dict, shape: tuple, partials: tuple, outs: list[Out],
               like: Tensor, variant: str = ""):
        """Runs the epilogue of `role` writing `outputs` and making `outs` ([M x width] each, in `like`'s dtype
        where in bf16): (its partials, {name: Made})."""
        partials = list(partials)
        bound = self.bind(outs, ins, outputs, partials, like)
        transposed = any(self.transposed_copy(out) for out in outs)
        parts = run(self.graph(role, variant, transposed), ins, outputs, *shape, partials=tuple(partials))
        return parts, self.finish(outs, bound, [parts], outputs)

    def wgrad_operand(self, t) -> Operand:
        """A weight gradient's operand [rows x tokens] in FP8, from Made.wgrad."""
        raise NotImplementedError

    def wgrad(self, dy, x, buffer: Optional[Tensor], like: Tensor) -> Tensor:
        """dW = dY^T X [N x K]: in bf16, or with fp8_wgrad an FP8 GEMM over the tokens; added into the f32 `buffer`
        where given (then an empty tensor is returned), else in `like`'s dtype."""
        if not self.fp8_wgrad:
            return _steps.wgrad(dy, x, buffer)
        a, b = self.wgrad_operand(dy), self.wgrad_operand(x)
        (n, m), k = a.data.shape, b.data.shape[0]
        ins = self.gemm(a, b)
        if buffer is not None:
            run(self.wgrad_graphs[0] + self.accumulation, ins, {"D": buffer}, n, k, m)
            return like.new_empty(0)
        dw = like.new_empty(n, k)
        run(self.wgrad_graphs[1] + self.accumulation, ins, {"D": dw}, n, k, m)
        return dw


class Tensorwise(Recipe):
    unstaged = ("y",)  # a half-width FP8 tile is too narrow for the epilogue to stage

    def _scales(self, out_or_slot) -> Tensor:
        # The scales a tensor is quantized under: the forward's for a copy of a tensor the forward made.
        return self.forward_scales if isinstance(out_or_slot, Out) and out_or_slot.recomputed else self.scales

    def _operand(self, data: Optional[Tensor], slot: str, scales: Tensor) -> Optional[Operand]:
        return None if data is None else Operand(data, scales[SCALE, _SLOT[slot]])

    def weight(self, w):
        q, t, s = quantize_weight(w)
        return Operand(q, s), Operand(t, s)

    def quantize(self, t, slot, w=False, amax=None, gamma=None):
        transposed = w and self.fp8_wgrad
        got = quantize(t, SLOTS[slot], self.scales[INV_SCALE, _SLOT[slot]], self.amax, _SLOT[slot], transposed)
        fp8, fp8_t = got if transposed else (got, None)
        return Made(self._operand(fp8, slot, self.scales), self._operand(fp8_t, slot, self.scales) or t, t)

    def transposed_copy(self, out):
        return out.w and self.fp8_wgrad

    def _bind(self, out, ins, outputs, partials, m, device):
        staged, transposed = out.a and out.slot not in self.unstaged, self.transposed_copy(out)
        if not (staged or transposed):
            return None
        ins[f"{out.name}_fp8_inv_scale"] = self._scales(out)[INV_SCALE, _SLOT[out.slot]]
        fmt = FORMATS[SLOTS[out.slot]]
        fp8 = torch.empty(m, out.width, dtype=fmt, device=device) if staged else None
        fp8_t = torch.empty(out.width, m, dtype=fmt, device=device) if transposed else None
        outputs.update({k: v for k, v in ((f"{out.name}_fp8", fp8), (f"{out.name}_fp8_t", fp8_t)) if v is not None})
        if not out.recomputed:
            partials.append(f"{out.name}_amax")
        return fp8, fp8_t

    def _finish(self, out, bound, parts, source):
        if bound is None:
            return super()._finish(out, bound, parts, source)
        if not out.recomputed:
            record_amax([p[f"{out.name}_amax"] for p in parts], self.amax, _SLOT[out.slot])
        scales = self._scales(out)
        return Made(self._operand(bound[0], out.slot, scales), self._operand(bound[1], out.slot, scales) or source,
                    source)

    def wgrad_operand(self, t):
        return t  # the transposed copy an epilogue or a quantize program wrote

    def forward_operand(self, data, slot):
        return Operand(data, self.forward_scales[SCALE, _SLOT[slot]])


class Rowwise(Recipe):
    name, suffix, scales_layout = "rowwise", "_rowwise", "one per row"
    rope_graphs = ("rope_backward_from_output_fp8_rowwise", "zero_grad")
    zero_grad_fp8 = False
    wgrad_graphs = ("wgrad_fp8_rowwise_accumulate", "dgrad_fp8_rowwise")

    def scales_shape(self, m, n):
        return (m,)

    def weight(self, w):
        q, s, t, ts = quantize_weight_rowwise(w)
        return Operand(q, s), Operand(t, ts)

    def _scales(self, amax) -> tuple[Tensor, Tensor]:
        """The scales (and their reciprocals) of the rows whose amax row partials are `amax`: each row's own."""
        return row_scales(amax)

    def quantize(self, t, slot, w=False, amax=None, gamma=None):
        # The scales from the epilogue's amax row partials, or from the rows themselves (a PyTorch read).
        scale, inv = self._scales(t.abs().amax(1)[None, :] if amax is None else amax)
        return Made(Operand(quantize_rowwise(t, inv, gamma), scale), t, t)

    def _bind(self, out, ins, outputs, partials, m, device):
        if out.a:
            partials.append(f"{out.name}_amax")

    def wgrad_operand(self, t):
        """t [M x N] transposed, in e4m3 with each column's scale (over all tokens): [N x M] and the scales f32 [N]."""
        m, n = t.shape
        scale, inv = self._scales(torch.linalg.vector_norm(t, float("inf"), dim=0)[None, :])
        out = torch.empty(n, m, dtype=_E4M3, device=t.device)
        run("quantize_e4m3_colwise_t", {"x": t.contiguous(), "x_fp8_inv_scale": inv}, {"x_fp8_t": out}, m, n)
        return Operand(out, scale)


class Blockwise(Recipe):
    name, suffix, block_scaled = "blockwise", "_blockwise", True
    scales_layout = "one per row and 128 columns: [ceil(d / 128) x M]"
    scale_names = block_scale_names()
    unstaged = ("y", "dz_qkv")  # y: too narrow to stage in FP8; RoPE's backward would compute the rotation twice
    rope_graphs = ("rope_backward_from_output", "zero_grad")
    zero_grad_fp8 = False
    wgrad_graphs = ("wgrad_fp8_blockwise_accumulate", scaled_mm_name("blockwise_1x128", "e4m3", "e4m3"))

    def scales_shape(self, m, n):
        return (-(-n // BLOCK), m)

    def weight(self, w):
        q, s, t, ts = quantize_weight_blockwise(w)
        return Operand(q, s), Operand(t, ts)

    def quantize(self, t, slot, w=False, amax=None, gamma=None):
        return Made(Operand(*quantize_blockwise(t)), t, t)

    def _bind(self, out, ins, outputs, partials, m, device):
        if not out.a or out.slot in self.unstaged:
            return None
        fp8 = outputs[f"{out.name}_fp8"] = torch.empty(m, out.width, dtype=_E4M3, device=device)
        partials.append(f"{out.name}_scale_partials")
        return fp8

    def _finish(self, out, bound, parts, source):
        if bound is None:
            return super()._finish(out, bound, parts, source)
        scale = parts[0][f"{out.name}_scale_partials"].to(torch.float32)
        blocks = -(-out.width // BLOCK)
        if scale.shape[0] < blocks:  # dz of SwiGLU's backward: a group is 256 of its columns, two of the next k-blocks
            scale = scale.repeat_interleave(2, 0)[:blocks].contiguous()
        return Made(Operand(bound, scale), source, source)

    def wgrad_operand(self, t):
        return Operand(*quantize_blockwise_t(t))


class TensorwiseCurrent(Rowwise):
    name, scales_layout = "tensorwise_current", "the tensor's scale in every row"

    def weight(self, w):
        q, t, scale = quantize_weight(w)
        return Operand(q, scale.expand(w.shape[0]).contiguous()), Operand(t, scale.expand(w.shape[1]).contiguous())

    def _scales(self, amax):
        scale = row_scales(amax)[0]
        scale = scale.amax().expand(scale.shape[0]).contiguous()
        return scale, 1.0 / scale


RECIPES = {"tensorwise": Tensorwise, "rowwise": Rowwise, "blockwise": Blockwise,
           "tensorwise_current": TensorwiseCurrent}
