"""What every coda.torch op shares at registration: its fake kernel (which first registers the ops with Inductor)
and the autograd setup of outputs that carry no gradient."""
import ast
import functools

import torch

OPS: list[str] = []  # every op of coda.torch, by name (torch.ops.coda.<name>); fake() adds each
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
    for name in OPS:
        op = getattr(torch.ops.coda, name).default
        if op not in lowerings:
            make_fallback(op, layout_constraint=tag_to_layout_constraint(get_layout_constraint_tag(op, with_default=True)))


def fake(op):
    """`@op.register_fake`, registering the Inductor fallbacks first."""
    OPS.append(op._opoverload._opname)

    def register(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            _register_inductor_fallbacks()
            return fn(*args, **kwargs)
        op.register_fake(wrapper)
        return fn
    return register


def config_text(config) -> str:
    """An op's settings (a NamedTuple of scalars) as the one text the op takes: torch.library takes no structures of
    scalars, and a text keeps the op's parameters few."""
    return " ".join(f"{k}={v!r}" for k, v in config._asdict().items())


@functools.lru_cache(maxsize=None)
def parse_config(cls, text: str):
    """config_text's inverse (as a classmethod of the NamedTuple: Config.parse(text))."""
    values = dict(item.split("=", 1) for item in text.split())
    return cls(*(ast.literal_eval(values[k]) for k in cls._fields))


def custom_op(name: str, mutates_args=()):
    """torch.library.custom_op whose fake kernel is the op's own function, run with no launch
    (_kernels.shapes_only): its outputs' shapes, dtypes and strides come from the one schedule that makes them. For
    ops whose PyTorch work has no data-dependent branch (the LM head's loss has one, and keeps a fake of its own)."""
    from coda.torch import _kernels

    def make(fn):
        op = torch.library.custom_op(name, fn, mutates_args=mutates_args)

        def shapes(*args, **kwargs):
            with _kernels.shapes_only():
                return fn(*args, **kwargs)
        fake(op)(shapes)
        return op
    return make


def no_gradient(ctx, *outputs) -> None:
    """Marks `outputs` as carrying no gradient (h, rstd, saved activations) and leaves the gradients that never
    arrive as None: autograd would otherwise fill a zero tensor for each of them before every backward."""
    ctx.mark_non_differentiable(*outputs)
    ctx.set_materialize_grads(False)
