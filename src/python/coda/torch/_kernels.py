"""Graphs, compiled kernels and the one call that runs a graph: on CUDA tensors through a cached coda.Kernel,
on CPU tensors through coda.reference (float64), so the autograd wiring is testable without a GPU."""
from __future__ import annotations

import atexit
import contextlib
import functools
import math
from typing import Optional

import numpy as np
import torch

import coda

# Every epilogue comes from coda.blocks; built here are only the plain GEMMs of dgrad and wgrad (an accumulator stored
# or accumulated, in the layouts these calls take) and the attention-free stand-in's zero gradient. (The specs are
# made where used: no coda object lives in this module's globals but the two caches, which _release empties.)
def _dgrad():
    g = coda.Graph.gemm("dgrad", coda.GemmSpec(input=coda.bf16, a=coda.Major.K, b=coda.Major.MN))
    g.store(g.accumulator(), "D", coda.bf16)
    return g


def _wgrad_spec():
    return coda.GemmSpec(input=coda.bf16, a=coda.Major.MN, b=coda.Major.MN)


def _wgrad_store():
    g = coda.Graph.gemm("wgrad_store", _wgrad_spec())
    g.store(g.accumulator(), "D", coda.bf16)
    return g


def _wgrad_accumulate():
    # Gradient accumulation fused into the GEMM: D (f32) += dY^T X.
    g = coda.Graph.gemm("wgrad_accumulate", _wgrad_spec())
    g.accumulate(g.accumulator(), "D", coda.f32)
    return g


def _zero_grad(fp8: bool = False, transposed: bool = False):
    """The attention-free stand-in's Q and K gradient, 0 * values (as eager's v + 0 * (q + k) gives), with its zero
    row partials, so that RoPE backward's other blocks share one dz buffer and one partials buffer. For the FP8
    layer's RoPE backward also dz in e5m2 (zeros) and its amax partials (zeros); `transposed` (FP8 weight
    gradients): dz in e5m2 both ways and no bf16 dz."""
    name = "zero_grad" + ("_fp8" if fp8 else "") + ("_t" if transposed else "")

    def build():
        g = coda.Graph.tile(name)
        zero = g.mul(g.tile_input("values", coda.bf16), g.constant(0.0), name="zero")
        if not transposed:
            g.store(zero, "dz", coda.bf16)
        g.reduce_row(zero, coda.ReduceOp.Sum, "zdz_partials")
        if fp8:
            quantized = g.mul(zero, g.scalar("dz_fp8_inv_scale"), name="zero_quantized")
            g.store(quantized, "dz_fp8", coda.e5m2)
            if transposed:
                g.store_transposed(quantized, "dz_fp8_t", coda.e5m2)
            g.reduce_row(g.abs(zero, name="zero_magnitude"), coda.ReduceOp.Max, "dz_amax")
        return g
    return name, build


def scaled_mm_name(recipe: str, fp8_a: str, fp8_b: str) -> str:
    """The graph of ops_fp8.scaled_mm for `recipe` and A's and B's FP8 types: B's type is in the name only where
    it is not A's."""
    return f"scaled_mm_{recipe}_{fp8_a}" if fp8_a == fp8_b else f"scaled_mm_{recipe}_{fp8_a}_{fp8_b}"


def _scaled_mm(recipe: str, fp8_a: str, fp8_b: str):
    # ops_fp8.scaled_mm's epilogue: D = acc * scale_a * scale_b in bf16, the scales per tensor (two scalars) or
    # row-wise (A's rows, B's columns). FP8 operands are K-major, both, of one type or two.
    # Block-wise: the mainloop applies the scales (GemmSpec block_scales, bound as block_scale_names(); B's per row
    # with blockwise_1x128); the epilogue stores the accumulator.
    def build():
        input_b = None if fp8_b == fp8_a else getattr(coda, fp8_b)
        g = coda.Graph.gemm(scaled_mm_name(recipe, fp8_a, fp8_b),
                            coda.GemmSpec(input=getattr(coda, fp8_a), a=coda.Major.K, b=coda.Major.K, input_b=input_b,
                                          block_scales=recipe.startswith("blockwise"),
                                          b_scales_1x128=recipe == "blockwise_1x128"))
        if recipe.startswith("blockwise"):
            g.store(g.accumulator(), "D", coda.bf16)
            return g
        if recipe == "tensorwise":
            scale = g.mul(g.scalar("scale_a"), g.scalar("scale_b"), name="scale")
        else:
            scale = g.mul(g.row_input("scale_a", coda.f32), g.col_input("scale_b", coda.f32), name="scale")
        g.store(g.mul(g.accumulator(), scale, name="scaled"), "D", coda.bf16)
        return g
    return build


# A graph name's suffix (graph(), run(), kernel()): the FP8 GEMM with its accumulator promoted to f32 every 128 k
# (GemmSpec.accumulation = Promoted), as cuBLAS's use_fast_accum=False; without it, Hopper's FP8 accumulator.
PROMOTED = ":promoted"

@functools.lru_cache(maxsize=None)
def block_scale_names() -> tuple[str, str]:
    """The names a block-scaled GEMM binds its A's and B's scales under, as the mainloop declares them."""
    spec = coda.GemmSpec(input=coda.e4m3, a=coda.Major.K, b=coda.Major.K, scales=coda.ScaleMode.Block128x128)
    return tuple(coda.block_scale_names(spec))


_LOCAL = {
    "dgrad": _dgrad,
    "wgrad_store": _wgrad_store,
    "wgrad_accumulate": _wgrad_accumulate,
    **dict(_zero_grad(*flags) for flags in ((False, False), (True, False), (True, True))),
    **{scaled_mm_name(recipe, fp8_a, fp8_b): _scaled_mm(recipe, fp8_a, fp8_b)
       for recipe in ("tensorwise", "rowwise", "blockwise", "blockwise_1x128") for fp8_a in ("e4m3", "e5m2")
       for fp8_b in ("e4m3", "e5m2")},
}

_FP8_LARGEST = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}

# Tests set this: every output a launch writes (not accumulate sinks) is filled with NaN first.
POISON = False

_graphs: dict[str, "coda.Graph"] = {}
_kernels: dict[tuple, "coda.Kernel"] = {}
_recording: Optional[set] = None  # during a dry run (record_launches): (graph, m, n, k) of every launch, none made
_shapes_only = False  # while a fake kernel runs its op's own schedule (shapes_only): no launch is made


@atexit.register
def _release() -> None:
    """Drops the cached kernels and graphs at interpreter exit, while the driver and the extension are still up.
    Left to teardown, their release would hang on the order in which Python wipes modules, and torch's C++ op
    registry keeps coda's op functions (so this module) alive through it; nanobind reports every coda object alive
    at its own exit check as leaked (tests/python/test_exit.py)."""
    _kernels.clear()
    _graphs.clear()


def graph(name: str):
    """The graph `name`: one of coda.blocks, or one of the graphs above; with the suffix PROMOTED, a coda.blocks FP8
    GEMM (not block-scaled: those promote already) with its accumulator promoted. Built once."""
    g = _graphs.get(name)
    if g is None:
        base = name.removesuffix(PROMOTED)
        build = _LOCAL.get(base) or getattr(coda.blocks, base)
        g = build()
        if base != name:
            spec = g.spec
            if base in _LOCAL or spec.input not in (coda.e4m3, coda.e5m2) or spec.block_scales:
                raise ValueError(f"coda.torch: {base} is not a coda.blocks FP8 GEMM with fast accumulation; "
                                 f"it takes no {PROMOTED}")
            spec.accumulation = coda.Accumulation.Promoted
            g = build(spec)
        _graphs[name] = g
    return g


def _shape_class(m: int, n: int, k: int) -> tuple[int, int, int]:
    # Kernels run on any shape; the class only steers the default config (as coda tune records it).
    return tuple(1 << max(0, int(v) - 1).bit_length() if v > 0 else 0 for v in (m, n, k))


def kernel(name: str, m: int, n: int, k: int = 0):
    """The compiled kernel of graph `name` for the current device and shape class (compiled once)."""
    cls = _shape_class(m, n, k)
    key = (name, torch.cuda.current_device(), cls)
    kern = _kernels.get(key)
    if kern is None:
        kern = coda.compile(graph(name), shape=(m, n, k) if k else None)
        _kernels[key] = kern
    return kern


def _host(value):
    if isinstance(value, torch.Tensor) and value.dim() == 0:  # a scalar bound from a tensor (on the GPU: read there)
        return float(value)
    if isinstance(value, torch.Tensor):
        # Copies: Tensor.numpy() would mark a parameter's own storage non-resizable, and FSDP2 resizes it.
        t = value.detach()
        if t.dtype == torch.int32:
            return t.clone(memory_format=torch.contiguous_format).numpy()
        return t.to(torch.float64, copy=True, memory_format=torch.contiguous_format).numpy()
    return float(value)


def run(name: str, inputs: dict, outputs: dict, m: int, n: int, k: int = 0, partials=(), device=None):
    """Runs graph `name` on an m x n problem (k: the GEMM depth). `inputs` binds tensors and floats; `outputs`
    are preallocated tensors (accumulate sinks are read and updated in place); `partials` names reduction
    outputs this call allocates. Returns the partials by name (f32 on CUDA, float64 on the CPU)."""
    device = device or next(v.device for v in inputs.values() if isinstance(v, torch.Tensor))
    if _recording is not None or _shapes_only:
        if _recording is not None:
            _recording.add((name, m, n, k))
        return {p: _placeholder_partials(name, p, m, n, device) for p in partials}
    if device.type == "cuda":
        kern = kernel(name, m, n, k)
        made = {}
        for p in partials:
            made[p] = torch.empty(kern.partials_shape(p, m, n), dtype=torch.float32, device=device)
        if POISON:
            accumulated = _accumulate_sinks(name)
            for key, out in {**outputs, **made}.items():
                if key not in accumulated:
                    out.fill_(float("nan"))
        kern.launch({**inputs, **outputs, **made})
        return made
    # The CPU path: the fp64 reference. Logical A and B as given (strides are a device matter).
    g = graph(name)
    host = {key: _host(v) for key, v in inputs.items()}
    accumulated = _accumulate_sinks(name)
    for key in accumulated:
        host[key] = _host(outputs[key])
    if g.domain == coda.Domain.Finalize:
        result = coda.reference(g, host, m, 0)
    else:
        result = coda.reference(g, host, m, n, k)
    for key, out in outputs.items():
        value = torch.from_numpy(np.asarray(result[key])).reshape(out.shape)
        largest = _FP8_LARGEST.get(out.dtype)
        if largest is not None:  # stores in FP8 saturate (cvt.rn.satfinite); torch's cast would make NaN (e4m3) or inf
            value = value.clamp(-largest, largest)
        out.copy_(value)
    return {p: torch.from_numpy(np.asarray(result[p])) for p in partials}


def dry_run() -> bool:
    """Whether launches are being recorded instead of made (record_launches)."""
    return _recording is not None


def launching() -> bool:
    """Whether run() launches kernels (not in a dry run, nor while a fake kernel runs an op's schedule)."""
    return _recording is None and not _shapes_only


@contextlib.contextmanager
def shapes_only():
    """run() makes no launch while this is open and returns partials of the reference's shape: an op's own
    schedule, run on fake tensors, gives its outputs' shapes (_register.fake_from_schedule)."""
    global _shapes_only
    outer, _shapes_only = _shapes_only, True
    try:
        yield
    finally:
        _shapes_only = outer


def record_launches(step) -> set:
    """Runs `step` with every coda launch recorded and none made (outputs are left as allocated; PyTorch's own
    kernels run as usual, attention excepted, which returns unwritten tensors too): the (graph, m, n, k) of each
    kernel the step needs, for compiling them all before the first real step."""
    global _recording
    if _recording is not None:
        raise RuntimeError("coda.torch: record_launches is already recording")
    _recording = set()
    try:
        step()
        return _recording
    finally:
        _recording = None


def _partials_role(name: str, partials: str) -> str:
    return next(b.role for b in coda.bindings(graph(name)) if b.name == partials)


def _placeholder_partials(name: str, partials: str, m: int, n: int, device) -> torch.Tensor:
    # The reference's partials shape: a dry run's finalizers read nothing, so only the shape has to be plausible.
    rows = _partials_role(name, partials) == "column partials"
    return torch.empty(row_tiles(m if rows else n), n if rows else m, dtype=torch.float32, device=device)


def _accumulate_sinks(name: str) -> tuple[str, ...]:
    # Which outputs of a graph are read before they are written (accumulate sinks).
    return {"wgrad_accumulate": ("D",), "wgrad_fp8_accumulate": ("D",), "wgrad_fp8_rowwise_accumulate": ("D",),
            "wgrad_fp8_blockwise_accumulate": ("D",), "rmsnorm_backward": ("dx_residual",)}.get(
        name.removesuffix(PROMOTED), ())


def row_tiles(n: int, bn: int = 128) -> int:
    return math.ceil(n / bn)


def partials_rows(name: str, partials: str, m: int, n: int, device, k: int = 0) -> int:
    """Rows of the partials `partials` of graph `name` on an m x n (x k) problem (its N-tiles for row partials, its
    M-tiles for column partials): the kernel's tile on the GPU, the reference's (128 x 128) on the CPU and in a dry
    run (which compiles nothing)."""
    if device.type == "cuda" and launching():
        return kernel(name, m, n, k).partials_shape(partials, m, n)[0]
    return row_tiles(m if _partials_role(name, partials) == "column partials" else n)
