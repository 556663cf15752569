"""FP8 GEMMs as a torch custom op: torch.ops.coda.scaled_mm, torch._scaled_mm's contract (A [M x K] row-major, B
[K x N] column-major, i.e. w.t() of an [N x K] weight, each float8_e4m3fn or float8_e5m2: the pairs torch._scaled_mm
takes, e4m3 x e4m3, e4m3 x e5m2 and e5m2 x e4m3, and e5m2 x e5m2 too) on coda's FP8 Hopper mainloop, the scales
applied in the epilogue: per tensor (two one-element f32 tensors, read on the GPU, so no host sync) or row-wise
(scale_a [M x 1], scale_b [1 x N]); or, with blockwise=True, in the mainloop: scale_a [M x ceil(K/128)] (a row of A's
128-k blocks) and scale_b [ceil(N/128) x ceil(K/128)] (the N x K weight's 128 x 128 blocks) or [N x ceil(K/128)] (one
per row of the N x K B and 128 k, as A's: a weight gradient's operands, GemmSpec b_scales_1x128), each block's sum
promoted to f32 with its two scales (GemmSpec block_scales). The output is bf16. CPU tensors run the fp64 reference.

No autograd: FP8 training (which operand is quantized how, and the transposed copies the backward GEMMs need) is
coda.torch's layers' (fp8=...). coda.torch.scaled_mm is the same op without PyTorch's dispatcher where nothing needs
it (eager mode, plain tensors, no dispatch or function mode, no gradient wanted): about 19 of the op's 47 us a call at
a small shape on an H100 host (tools/profile_op_host.py), the whole GPU time of a small GEMM. Anything else goes
through torch.ops.coda.scaled_mm."""
import torch
from torch import Tensor

from coda.torch._kernels import block_scale_names, run, scaled_mm_name
from coda.torch._register import custom_op

_FP8 = {torch.float8_e4m3fn: "e4m3", torch.float8_e5m2: "e5m2"}


def _recipe(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, blockwise: bool = False) -> str:
    """'tensorwise', 'rowwise', 'blockwise' or 'blockwise_1x128' (B's scales per row of B), after checking what
    coda's FP8 GEMM takes; a ValueError names what does not fit."""
    if a.dtype not in _FP8 or b.dtype not in _FP8:
        raise ValueError(f"coda.torch.scaled_mm: A and B must each be float8_e4m3fn or float8_e5m2, got "
                         f"{a.dtype} and {b.dtype}")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"coda.torch.scaled_mm: need A [M x K] and B [K x N], got {tuple(a.shape)} and "
                         f"{tuple(b.shape)}")
    m, k = a.shape
    n = b.shape[1]
    # FP8 wgmma reads both operands K-major: A row-major, B column-major (w.t() of a row-major [N x K] w).
    if a.stride(1) != 1 or b.stride(0) != 1:
        raise ValueError(f"coda.torch.scaled_mm: A must be row-major and B column-major (B = w.t()), got strides "
                         f"{a.stride()} and {b.stride()}")
    if n % 2 != 0:
        raise ValueError(f"coda.torch.scaled_mm: N = {n} is odd; coda's epilogues work on column pairs")
    if scale_a.dtype != torch.float32 or scale_b.dtype != torch.float32:
        raise ValueError(f"coda.torch.scaled_mm: scales must be float32, got {scale_a.dtype} and {scale_b.dtype}")
    if blockwise:
        kb, nb = -(-k // 128), -(-n // 128)
        if tuple(scale_a.shape) == (m, kb) and tuple(scale_b.shape) in ((nb, kb), (n, kb)):
            return "blockwise" if tuple(scale_b.shape) == (nb, kb) else "blockwise_1x128"
        raise ValueError(f"coda.torch.scaled_mm: block-wise scales must be [M x ceil(K/128)] = [{m} x {kb}] and "
                         f"[ceil(N/128) x ceil(K/128)] = [{nb} x {kb}] (B's 128 x 128 blocks) or [N x ceil(K/128)] = "
                         f"[{n} x {kb}] (B's rows, 128 k each), got {tuple(scale_a.shape)} and "
                         f"{tuple(scale_b.shape)}")
    if scale_a.numel() == 1 and scale_b.numel() == 1:
        return "tensorwise"
    if tuple(scale_a.shape) == (m, 1) and tuple(scale_b.shape) == (1, n):
        return "rowwise"
    raise ValueError(f"coda.torch.scaled_mm: scales must be one element each (per tensor) or [M x 1] and [1 x N] "
                     f"(row-wise), with M = {m}, N = {n} (block-wise ones need blockwise=True); got "
                     f"{tuple(scale_a.shape)} and {tuple(scale_b.shape)}")


def _scaled_mm(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, blockwise: bool) -> Tensor:
    recipe = _recipe(a, b, scale_a, scale_b, blockwise)
    m, k = a.shape
    n = b.shape[1]
    out = a.new_empty((m, n), dtype=torch.bfloat16)
    if recipe == "tensorwise":
        scales = {"scale_a": scale_a.reshape(()), "scale_b": scale_b.reshape(())}
    elif recipe == "rowwise":
        scales = {"scale_a": scale_a.reshape(m), "scale_b": scale_b.reshape(n)}
    else:  # the mainloop reads A's scales k-block by k-block, [ceil(K/128) x M] row-major, and B's rows' likewise
        b_scale = scale_b.t() if recipe == "blockwise_1x128" else scale_b
        scales = dict(zip(block_scale_names(), (scale_a.t().contiguous(), b_scale.contiguous())))
    run(scaled_mm_name(recipe, _FP8[a.dtype], _FP8[b.dtype]), {"A": a, "B": b, **scales}, {"D": out}, m, n, k)
    return out


@custom_op("coda::scaled_mm")
def scaled_mm_op(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, blockwise: bool = False) -> Tensor:
    return _scaled_mm(a, b, scale_a, scale_b, blockwise)


def _without_dispatcher(*tensors: Tensor) -> bool:
    """Whether a call may skip PyTorch's dispatcher and still do what the op would: eager (no torch.compile tracing),
    plain tensors (no FakeTensor, DTensor or other subclass), no torch dispatch or function mode on the stack, and
    nothing that wants a gradient (the op has no autograd, and would refuse it)."""
    return (not torch.compiler.is_compiling() and all(type(t) is Tensor and not t.requires_grad for t in tensors)
            and torch._C._len_torch_dispatch_stack() == 0 and not torch._C._is_torch_function_mode_enabled())


def scaled_mm(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, blockwise: bool = False) -> Tensor:
    """torch.ops.coda.scaled_mm (this module's docstring), called directly where the dispatcher adds nothing."""
    if _without_dispatcher(a, b, scale_a, scale_b):
        return _scaled_mm(a, b, scale_a, scale_b, blockwise)
    return torch.ops.coda.scaled_mm(a, b, scale_a, scale_b, blockwise)
