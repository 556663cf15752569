"""The FP8 layers in PyTorch's training loops, on the CPU: coda.torch.fp8.reuse_weights, each weight quantized once per
optimizer step (issue 28, "weights quantized once per step"), which must never hand back a stale quantization (after an
in-place update, for another weight of the same shape, once the context has closed); and activation checkpointing,
whose recomputed forwards must see the scales the first forward saw."""
import contextlib

import pytest

torch = pytest.importorskip("torch")

from torch.utils.checkpoint import checkpoint  # noqa: E402

import coda  # noqa: E402
import coda.torch as ct  # noqa: E402
from coda.torch import _kernels, fp8  # noqa: E402
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
    batches = micro_batches(3)

    def accumulate(reuse):
        model.zero_grad(set_to_none=True)
        model.load_state_dict(start)  # the same delayed scales and amax histories for both runs (tensorwise)
        for m in model.modules():
            if isinstance(m, fp8.Fp8Scaling):
                m.started.fill_(False)
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



def micro_batches(count, seed=4):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randint(0, 64, (2, 8), generator=g), torch.randint(0, 64, (2, 8), generator=g))
            for _ in range(count)]


def restart(model, state):
    """model as it was when `state` (its state dict) was taken, and its delayed scales not yet started."""
    model.load_state_dict(state)
    for m in model.modules():
        if isinstance(m, fp8.Fp8Scaling):
            m.started.fill_(False)


def forward_checkpointed(model, tokens, labels):
    """LlamaModel's FP8 forward (its _forward_fp8) with each decoder layer under non-reentrant torch.utils.checkpoint."""
    b, s = tokens.shape
    x = model.embedding(tokens)
    pos = model.positions(b, s, tokens.device)
    gamma = model.layers[0].attn_norm
    if model.fp8_recipe == "tensorwise":
        model.fp8_entry.update(x.shape[0])
        h, rstd, amax = torch.ops.coda.rms_stats_fp8(x, gamma, model.eps, model.fp8_entry.inv_scale("h"))
        model.fp8_entry.record(amax)
        h_scale = model.fp8_entry.scale("h")
    else:
        h, rstd, h_scale = torch.ops.coda.rms_stats_fp8(x, gamma, model.eps, None, model.fp8_recipe)
    for i, layer in enumerate(model.layers):
        last = i + 1 == len(model.layers)
        nxt = model.head.norm if last else model.layers[i + 1].attn_norm
        x, h, rstd, h_scale = checkpoint(layer, x, h, rstd, nxt, pos, s, h_scale, not last, use_reentrant=False)
    return model.head(x, h, rstd, model.targets(labels))


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise", "blockwise"])
def test_checkpointed_fp8_layers_match_plain_ones(recipe):
    # Two micro-batches, so that the second runs on scales the first one's amax moved (tensorwise): a recomputed
    # forward that moved them again would quantize with others than its first run did.
    torch.manual_seed(0)
    model = ct.LlamaModel(vocab=64, d=128, n_layers=2, n_heads=2, ffn=96, dtype=torch.float64, fp8=recipe)
    start = {k: v.clone() for k, v in model.state_dict().items()}

    def accumulate(forward):
        restart(model, start)
        model.zero_grad(set_to_none=True)
        losses = []
        for tokens, labels in micro_batches(2, seed=8):
            loss = forward(tokens, labels)
            loss.backward()
            losses.append(loss.item())
        scales = [m.state.clone() for m in model.modules() if isinstance(m, fp8.Fp8Scaling)]
        return losses, [p.grad.clone() for p in model.parameters()], scales

    plain = accumulate(model)
    checkpointed = accumulate(lambda tokens, labels: forward_checkpointed(model, tokens, labels))
    assert plain[0] == checkpointed[0]
    for a, b in zip(plain[1] + plain[2], checkpointed[1] + checkpointed[2]):
        assert torch.equal(a, b)


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise", "blockwise"])
def test_a_dry_run_leaves_the_delayed_scales_as_they_were(recipe):
    # warm() records a step's launches in a dry run, whose tensors hold no values: their amaxes (garbage, NaN) must not
    # reach the scales, nor may the dry run count as a step of the history. The next real step then matches a model
    # that had no dry run.
    torch.manual_seed(0)
    model = ct.LlamaModel(vocab=64, d=128, n_layers=2, n_heads=2, ffn=96, dtype=torch.float64, fp8=recipe)
    start = {k: v.clone() for k, v in model.state_dict().items()}
    (tokens, labels), = micro_batches(1)
    plain = model(tokens, labels).item()
    restart(model, start)
    model.zero_grad(set_to_none=True)
    _kernels.record_launches(lambda: model(tokens, labels).backward())
    for key, value in model.state_dict().items():
        assert torch.equal(value, start[key]), key
    model.zero_grad(set_to_none=True)
    assert model(tokens, labels).item() == plain


def _backward_launches(recipe, fp8_wgrad, accumulation):
    torch.manual_seed(0)
    model = ct.LlamaModel(vocab=64, d=128, n_layers=2, n_heads=2, ffn=96, dtype=torch.float64, fp8=recipe,
                          fp8_wgrad=fp8_wgrad, fp32_grad_accumulation=fp8_wgrad,
                          fp8_backward_accumulation=accumulation)
    (tokens, labels), = micro_batches(1)
    forward = {name for name, *_ in _kernels.record_launches(lambda: model(tokens, labels))}
    launches = {name for name, *_ in _kernels.record_launches(lambda: model(tokens, labels).backward())} - forward
    model.zero_grad(set_to_none=True)
    for p in model.parameters():  # a dry run's gradients are the caller's to clear (warm_step)
        if hasattr(p, "main_grad"):
            p.main_grad.zero_()
    loss = model(tokens, labels)
    loss.backward()
    grads = [p.grad if p.grad is not None else p.main_grad for p in model.parameters()]
    return forward, launches, loss.item(), grads


@pytest.mark.parametrize("fp8_wgrad", [False, True])
@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise", "blockwise"])
def test_promoted_backward_accumulation_runs_the_promoted_graphs(recipe, fp8_wgrad):
    fast_forward, fast, fast_loss, fast_grads = _backward_launches(recipe, fp8_wgrad, "fast")
    forward, promoted, loss, grads = _backward_launches(recipe, fp8_wgrad, "promoted")
    assert forward == fast_forward and not any(n.endswith(_kernels.PROMOTED) for n in forward)
    fp8_gemms = {n for n in fast if _kernels.graph(n).domain == coda.Domain.Gemm
                 and _kernels.graph(n).spec.input in (coda.e4m3, coda.e5m2)}
    if recipe == "blockwise":  # its GEMMs promote already, in the mainloop
        assert promoted == fast
    else:
        # Every FP8 GEMM of the backward (its dgrads, and with fp8_wgrad its weight gradients), and nothing else.
        assert len(fp8_gemms) >= 4 + fp8_wgrad
        assert promoted == (fast - fp8_gemms) | {n + _kernels.PROMOTED for n in fp8_gemms}
        for name in fp8_gemms:
            spec = _kernels.graph(name + _kernels.PROMOTED).spec
            assert spec.accumulation == coda.Accumulation.Promoted
    # The CPU reference sums in fp64 either way: the same loss and gradients.
    assert loss == fast_loss
    for a, b in zip(grads, fast_grads):
        assert torch.equal(a, b)


def test_the_backward_accumulation_is_checked():
    with pytest.raises(ValueError, match="fp8_backward_accumulation must be 'fast' or 'promoted'"):
        ct.LlamaDecoderLayer(128, 2, 96, fp8="tensorwise", fp8_backward_accumulation="precise")
    with pytest.raises(ValueError, match="takes no :promoted"):
        _kernels.graph("quantize_e4m3" + _kernels.PROMOTED)
