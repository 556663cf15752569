"""coda: memory-bound Transformer operators fused into GEMM epilogues.

Build an epilogue graph with :class:`Graph` (or take one from :mod:`coda.blocks`), then ``compile`` it for the
current GPU and ``launch`` it with tensors bound by name, or evaluate it on the CPU with ``reference``.
The C++ core is the extension ``coda._coda``; torch is never imported here (see ``coda.torch``).
"""

from . import _coda
from ._coda import (
    Accumulation,
    Binding,
    BlockScaleOperand,
    BuildReport,
    Domain,
    DType,
    Error,
    GemmSpec,
    Graph,
    Kernel,
    KernelConfig,
    Major,
    Node,
    ReduceOp,
    ScaleMode,
    Value,
    Width,
    __version__,
    bf16,
    bindings,
    block_scale_names,
    block_scale_operands,
    blocks,
    check,
    compile,
    default_config,
    device_arch,
    device_available,
    device_unavailable_reason,
    e4m3,
    e5m2,
    f16,
    f32,
    i32,
    parse_graph,
    parse_graphs,
    problems,
    reference,
    size_of,
    source,
    to_text,
    warm,
)

import sys as _sys

# `import coda.blocks` and `from coda.blocks import out_proj` work as for a module of its own.
_sys.modules[__name__ + ".blocks"] = blocks

__all__ = [name for name in dir() if not name.startswith("_")]
