"""coda.torch.fp8.reuse_weights: each weight quantized once per optimizer step (issue 28, "weights quantized once per
step"), on the CPU. What it must never do is hand back a stale quantization: after an in-place update, for another
weight of the same shape, or once the context has closed."""
import contextlib

import pytest

torch = pytest.importorskip("torch")

import coda.torch as ct  # noqa: E402
from coda.torch import fp8  # noqa: E402
from fp8_support import grid  # noqa: E402

QUANTIZERS = [fp8.quantize_weight, fp8.quantize_weight_blockwise, fp8.quantize_weight_rowwise]


def weight(seed, shape=(256, 128)):
    return (grid(*shape, seed=seed) / 16).to(torch.bfloat16)


def same(a, b):
    return all(torch.equal(x.view(torch.uint8) if x.dtype.itemsize == 1 else x,
                           y.view(torch.uint8) if y.dtype.itemsize == 1 else y) for x, y in zip(a, b))


@pytest.mark.parametrize("quantize", QUANTIZERS, ids=lambda f: f.__name__)
def test_a_weight_is_quantized_once_inside_and_at_each_call_outside(quantize):
    w = weight(1)
    outside = quantize(w), quantize(w)
    assert outside[0][0] is not outside[1][0]
    with fp8.reuse_weights():
        first = quantize(w)
        assert quantize(w) is first
        assert quantize(w.detach()) is first  # an alias of the same weight, as a custom op sees it
        assert same(first, outside[0])
    assert quantize(w) is not first  # the context closed: its entries are gone
    assert fp8._reused is None


@pytest.mark.parametrize("quantize", QUANTIZERS, ids=lambda f: f.__name__)
def test_an_in_place_update_or_another_weight_is_quantized_anew(quantize):
    w, other = weight(1), weight(2)
    with fp8.reuse_weights():
        first = quantize(w)
        assert same(quantize(other), quantize(weight(2)))  # same shape, other values: not w's entry
        with torch.no_grad():
            w.mul_(3)  # what optimizer.step does: an in-place write that bumps the version counter
        after = quantize(w)
        assert after is not first
        assert same(after, quantize.__wrapped__(w))
        half = w[:128]  # a view: the same storage at the same offset but another shape
        assert quantize(half)[0].shape[0] == 128


def test_contexts_nest_and_the_outermost_owns_the_entries():
    w = weight(3)
    with fp8.reuse_weights():
        first = fp8.quantize_weight_blockwise(w)
        with fp8.reuse_weights():
            assert fp8.quantize_weight_blockwise(w) is first
        assert fp8.quantize_weight_blockwise(w) is first
    assert fp8._reused is None


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise", "blockwise"])
def test_gradient_accumulation_gives_the_same_gradients_with_and_without_reuse(recipe):
    torch.manual_seed(0)
    kw = dict(vocab=64, d=128, n_layers=2, n_heads=2, ffn=96, dtype=torch.float64)
    model = ct.LlamaModel(**kw, fp8=recipe)
    g = torch.Generator().manual_seed(4)
    batches = [(torch.randint(0, 64, (2, 8), generator=g), torch.randint(0, 64, (2, 8), generator=g))
               for _ in range(3)]

    def accumulate(reuse):
        model.zero_grad(set_to_none=True)
        model.load_state_dict(start)  # the same delayed scales and amax histories for both runs (tensorwise)
        for m in model.modules():
            if isinstance(m, fp8.Fp8Scaling):
                m.started = False
        with fp8.reuse_weights() if reuse else contextlib.nullcontext():
            for tokens, labels in batches:
                model(tokens, labels).backward()
            entries = len(fp8._reused) if reuse else None
        return [p.grad.clone() for p in model.parameters()], entries

    start = {k: v.clone() for k, v in model.state_dict().items()}
    plain, _ = accumulate(False)
    reused, entries = accumulate(True)
    assert entries == 4 * 2  # four weights a layer, each quantized once over the three micro-batches
    for a, b in zip(plain, reused):
        assert torch.equal(a, b)

