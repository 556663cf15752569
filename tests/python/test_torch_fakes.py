"""coda's torch ops as torch.library sees them. Every op a training step calls has a fake kernel (what torch.compile
traces with) whose outputs have the real outputs' shapes, dtypes and strides: each call of a CPU step (forward and
backward, bf16 and each FP8 recipe, with and without FP8 weight gradients and fp32 gradient buffers) is recorded with
its inputs and outputs, then run again on fake tensors. Most fakes are the ops themselves run with no launch
(_register.custom_op); a schedule that made an output differently under fake tensors would show here, not first
inside a compiled model. And no op takes more than 12 parameters: settings travel as one config text, tensors in
lists by role."""
import pytest

torch = pytest.importorskip("torch")

from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_flatten, tree_map  # noqa: E402

import coda.torch as ct  # noqa: E402
from coda.torch import fp8_recipes  # noqa: E402
from coda.torch._register import OPS  # noqa: E402


class _CodaCalls(TorchDispatchMode):
    """Records (op, its inputs as they were before the call, its outputs) of every coda op."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        before = None
        if func.namespace == "coda":  # copies first: an op may update its inputs (a scale state, a gradient buffer)
            before = tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, (args, kwargs))
        out = func(*args, **kwargs)
        if before is not None:
            self.calls.append((func, before, out))
        return out


def _meta(tree):
    leaves, _ = tree_flatten(tree)
    return [(tuple(t.shape), t.dtype, t.stride()) if isinstance(t, torch.Tensor) else t for t in leaves]


def _step_calls(recipe, fp8_wgrad, fp32_grad_accumulation):
    torch.manual_seed(0)
    model = ct.LlamaModel(64, 256, 2, 2, 160, dtype=torch.float64, fp8=recipe, fp8_wgrad=fp8_wgrad,
                          fp32_grad_accumulation=fp32_grad_accumulation)
    tokens = torch.randint(0, 64, (2, 8))
    with _CodaCalls() as calls:
        model(tokens, tokens).backward()
    return calls.calls


@pytest.mark.parametrize("fp32_grad_accumulation", [False, True], ids=["returned", "buffers"])
@pytest.mark.parametrize("recipe,fp8_wgrad", [(None, False)] + [(r, w) for r in fp8_recipes.RECIPES
                                                                 for w in (False, True)])
def test_each_fake_kernel_gives_what_its_op_gives(recipe, fp8_wgrad, fp32_grad_accumulation):
    calls = _step_calls(recipe, fp8_wgrad, fp32_grad_accumulation)
    names = {func.name() for func, _, _ in calls}
    if recipe is not None:
        assert {"coda::decoder_layer_fp8", "coda::decoder_layer_fp8_backward", "coda::rms_stats_fp8"} <= names
    for func, (args, kwargs), real in calls:
        with FakeTensorMode(allow_non_fake_inputs=False) as mode:
            fake_args, fake_kwargs = tree_map(lambda t: mode.from_tensor(t) if isinstance(t, torch.Tensor) else t,
                                              (args, kwargs))
            faked = func(*fake_args, **fake_kwargs)
        assert _meta(faked) == _meta(real), func.name()


def test_no_op_takes_more_than_twelve_parameters():
    counts = {name: len(getattr(torch.ops.coda, name).default._schema.arguments) for name in OPS}
    assert len(counts) >= 19
    assert max(counts.values()) <= 12, counts
