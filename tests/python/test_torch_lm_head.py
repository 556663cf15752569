"""coda.torch's LM head + mean cross-entropy with ignore_index (Hugging Face's -100): the loss is the mean over the
rows not ignored and an ignored row's gradient is 0, against eager F.cross_entropy(..., ignore_index=...).

On the CPU the ops run through coda.reference (float64), with inputs on a 1/64 grid as in test_torch_cpu.py: h is
rounded to bf16 where it enters the GEMM, so the loss is checked at 1e-2 and the gradients at 2e-2. On the GPU
(marked gpu) bf16 inputs at a small odd shape against fp32 eager, every coda output poisoned (NaN) before each
launch, with test_torch_gpu.py's tolerances."""
import sys

import pytest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

torch = pytest.importorskip("torch")
F = torch.nn.functional

import coda  # noqa: E402
import coda.torch  # noqa: E402, F401  (registers torch.ops.coda)
from coda.torch import _kernels  # noqa: E402
from coda.torch import reference as ref  # noqa: E402

CHAINED, EPS, IGNORE = 1e-2, 1e-5, -100
OPS = ["lm_head_ce", "lm_head_ce_stats"]
M, D, VOCAB, CHUNK = 37, 24, 50, 16  # lm_head_ce_stats' backward in 3 row chunks


def grid(*shape, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-64, 64, shape, generator=g).double() / 64 * scale


def close(actual, expected, tol, what):
    err = (actual - expected).norm() / expected.norm().clamp_min(1e-30)
    assert err <= tol, f"{what}: relative error {err:.3g} > {tol}"


def stats(x, gamma, eps):
    # h and rstd as a previous epilogue would hand them over (detached: they carry no gradient).
    x = x.detach()
    return x * gamma.detach(), torch.rsqrt(x.pow(2).mean(-1) + eps)


def labels_with_ignored(m, v, ignore_index, fraction=0.3, seed=0, device=None):
    g = torch.Generator(device=device or "cpu").manual_seed(seed)
    labels = torch.randint(0, v, (m,), generator=g, dtype=torch.int32, device=device)
    ignored = torch.rand(m, generator=g, device=device) < fraction
    return labels.masked_fill(ignored, ignore_index)


def coda_loss(op, x, gamma, w, labels, w_grad=None, chunk=CHUNK, **kw):
    h, rstd = stats(x, gamma, EPS)
    if op == "lm_head_ce_stats":
        return torch.ops.coda.lm_head_ce_stats(x, h, rstd, gamma, w, labels, w_grad, chunk, **kw)[0]
    return torch.ops.coda.lm_head_ce(x, h, rstd, gamma, w, labels, w_grad, **kw)[0]


def eager_loss(x, gamma, w, labels, ignore_index):
    logits = ref.rms_norm(x, gamma, EPS) @ w.t()
    return F.cross_entropy(logits if logits.dtype == torch.float64 else logits.float(), labels.long(),
                           ignore_index=ignore_index)


def loss_and_grads(fn, inputs, dtype=torch.float64):
    ins = [t.detach().to(dtype).requires_grad_() for t in inputs]
    loss = fn(*ins)
    loss.backward()
    return loss, [t.grad for t in ins]


def cpu_inputs():
    return grid(M, D, seed=1), 1 + grid(D, seed=2, scale=0.5), grid(VOCAB, D, seed=3, scale=0.5)


# --- the graphs ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("block,variant", [("cross_entropy_backward", "cross_entropy_backward_row_scale"),
                                           ("lm_head_ce_backward", "lm_head_ce_backward_row_scale")])
def test_row_scale_graphs_are_the_blocks_graphs_with_a_row_scale(block, variant):
    # Node for node coda.blocks' graph, in its order: only the scalar `scale` became the row vector `row_scale`.
    expected = (str(getattr(coda.blocks, block)())
                .replace(f"graph {block} ", f"graph {variant} ")
                .replace("%scale = scalar", "%row_scale = row_input f32")
                .replace(" %scale\n", " %row_scale\n"))
    assert str(_kernels.graph(variant)) == expected


# --- CPU: the reference path -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("ignore_index", [IGNORE, 3])  # 3: an ignored label that is a column too
@pytest.mark.parametrize("op", OPS)
def test_ignore_index_matches_eager_float64(op, ignore_index):
    inputs = cpu_inputs()
    labels = labels_with_ignored(M, VOCAB, ignore_index, seed=4)
    ignored = labels == ignore_index
    assert 0 < int(ignored.sum()) < M
    loss, grads = loss_and_grads(lambda *t: coda_loss(op, *t, labels, ignore_index=ignore_index), inputs)
    loss_ref, grads_ref = loss_and_grads(lambda *t: eager_loss(*t, labels, ignore_index), inputs)
    close(loss, loss_ref, CHAINED, f"{op} loss")
    for name, got, want in zip(("dx", "dgamma", "dw"), grads, grads_ref):
        close(got, want, 2 * CHAINED, f"{op} {name}")
    # An ignored row's dlogits is exactly 0, so is its dx (do = 0 and s = 0), as eager's.
    assert (grads[0][ignored] == 0).all() and (grads_ref[0][ignored] == 0).all()


@pytest.mark.parametrize("op", OPS)
def test_without_ignore_index_nothing_is_rejected_and_the_mean_is_over_all_rows(op):
    # Today's path: a label matching no column (-100, or VOCAB) is not checked; its row's loss is its lse and it
    # counts in the mean over all M rows.
    inputs = cpu_inputs()
    labels = labels_with_ignored(M, VOCAB, IGNORE, seed=5)
    labels[0] = VOCAB
    loss, grads = loss_and_grads(lambda *t: coda_loss(op, *t, labels), inputs)
    explicit, grads_explicit = loss_and_grads(lambda *t: coda_loss(op, *t, labels, ignore_index=None), inputs)
    assert torch.equal(loss, explicit)
    assert all(torch.equal(a, b) for a, b in zip(grads, grads_explicit))

    def old_mean(x, gamma, w):
        logits = ref.rms_norm(x, gamma, EPS) @ w.t()
        in_range = (labels >= 0) & (labels < VOCAB)
        target = logits.gather(1, labels.long().clamp(0, VOCAB - 1)[:, None])[:, 0] * in_range
        return (torch.logsumexp(logits, 1) - target).mean()
    loss_ref, grads_ref = loss_and_grads(old_mean, inputs)
    close(loss, loss_ref, CHAINED, f"{op} loss")
    for name, got, want in zip(("dx", "dgamma", "dw"), grads, grads_ref):
        close(got, want, 2 * CHAINED, f"{op} {name}")


@pytest.mark.parametrize("op", OPS)
def test_all_rows_ignored_gives_nan_loss_and_zero_gradients(op):
    # What F.cross_entropy gives: the mean over no rows is 0/0 = NaN, and the gradient is 0 (not NaN).
    inputs = cpu_inputs()
    labels = torch.full((M,), IGNORE, dtype=torch.int32)
    loss, grads = loss_and_grads(lambda *t: coda_loss(op, *t, labels, ignore_index=IGNORE), inputs)
    loss_ref, grads_ref = loss_and_grads(lambda *t: eager_loss(*t, labels, IGNORE), inputs)
    assert torch.isnan(loss) and torch.isnan(loss_ref)
    for name, got, want in zip(("dx", "dgamma", "dw"), grads, grads_ref):
        assert (want == 0).all(), f"eager {name}"
        assert (got == 0).all(), f"{op} {name}: not all zero"


@pytest.mark.parametrize("op", OPS)
def test_fp32_gradient_buffer_with_ignore_index(op):
    # w_grad given: the weight gradient is added into the f32 buffer (in chunks for lm_head_ce_stats) and none is
    # returned for w.
    x0, gamma0, w0 = cpu_inputs()
    labels = labels_with_ignored(M, VOCAB, IGNORE, seed=6)
    start = grid(VOCAB, D, seed=7).float()
    buffer = start.clone()
    x, gamma, w = (t.clone().requires_grad_() for t in (x0, gamma0, w0))
    coda_loss(op, x, gamma, w, labels, w_grad=buffer, ignore_index=IGNORE).backward()
    assert w.grad is None
    _, (dx_ref, dgamma_ref, dw_ref) = loss_and_grads(lambda *t: eager_loss(*t, labels, IGNORE), (x0, gamma0, w0))
    close((buffer - start).double(), dw_ref, 2 * CHAINED, f"{op} w_grad buffer")
    close(x.grad, dx_ref, 2 * CHAINED, f"{op} dx")
    close(gamma.grad, dgamma_ref, 2 * CHAINED, f"{op} dgamma")


@pytest.mark.parametrize("bad", [VOCAB, -5])
@pytest.mark.parametrize("op", OPS)
def test_a_label_out_of_range_is_a_value_error_on_the_cpu(op, bad):
    x, gamma, w = cpu_inputs()
    labels = labels_with_ignored(M, VOCAB, IGNORE, seed=8)
    labels[3] = bad
    with pytest.raises(ValueError, match=rf"ignore_index \({IGNORE}\) or in \[0, {VOCAB}\).*\[{bad}\] at rows \[3\]"):
        coda_loss(op, x, gamma, w, labels, ignore_index=IGNORE)


def test_compile_fullgraph_traces_ignore_index():
    # The fake kernels and the autograd wiring take the new argument: aot_eager traces forward and backward.
    inputs = cpu_inputs()
    labels = labels_with_ignored(M, VOCAB, IGNORE, seed=9)

    def both(x, gamma, w):
        return sum(coda_loss(op, x, gamma, w, labels, ignore_index=IGNORE) for op in OPS)
    loss, grads = loss_and_grads(torch.compile(both, backend="aot_eager", fullgraph=True), inputs)
    loss_ref, grads_ref = loss_and_grads(both, inputs)
    close(loss, loss_ref, 1e-12, "compiled loss")
    for got, want in zip(grads, grads_ref):
        close(got, want, 1e-12, "compiled grad")


# --- GPU: bf16 against fp32 eager ------------------------------------------------------------------------------------

OUT_TOL, GRAD_TOL = 1e-2, 3e-2
GPU_M, GPU_D, GPU_VOCAB = 301, 96, 250
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30)).item()


def gpu_inputs(seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    rnd = lambda *s, scale=1.0: torch.randn(*s, generator=gen, device="cuda") * scale  # noqa: E731
    return (rnd(GPU_M, GPU_D).bfloat16(), (1 + rnd(GPU_D, scale=0.1)).bfloat16(),
            rnd(GPU_VOCAB, GPU_D, scale=GPU_D ** -0.5).bfloat16())


def gpu_coda_loss(op, x, gamma, w, labels, w_grad=None, **kw):
    # rstd in f32 as the previous epilogue gives it; 3 row chunks in lm_head_ce_stats' backward.
    xd = x.detach()
    h, rstd = xd * gamma.detach(), torch.rsqrt(xd.float().pow(2).mean(-1) + EPS)
    if op == "lm_head_ce_stats":
        return torch.ops.coda.lm_head_ce_stats(x, h, rstd, gamma, w, labels, w_grad, (GPU_M + 2) // 3, **kw)[0]
    return torch.ops.coda.lm_head_ce(x, h, rstd, gamma, w, labels, w_grad, **kw)[0]


@pytest.mark.gpu
@needs_cuda
@pytest.mark.usefixtures("poison")
@pytest.mark.parametrize("op", OPS)
def test_gpu_ignore_index_matches_fp32_eager(op):
    inputs = gpu_inputs()
    labels = labels_with_ignored(GPU_M, GPU_VOCAB, IGNORE, seed=1, device="cuda")
    ignored = labels == IGNORE
    # The glue that turns ignore_index into the mean and the row scales must not wait for the GPU.
    torch.cuda.set_sync_debug_mode("error")
    try:
        loss, grads = loss_and_grads(lambda *t: gpu_coda_loss(op, *t, labels, ignore_index=IGNORE), inputs,
                                     torch.bfloat16)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    loss32, grads32 = loss_and_grads(lambda *t: eager_loss(*t, labels, IGNORE), inputs, torch.float32)
    assert torch.isfinite(loss)
    assert rel(loss, loss32) <= OUT_TOL, f"{op} loss: {rel(loss, loss32):.3g}"
    for name, got, want in zip(("dx", "dgamma", "dw"), grads, grads32):
        assert torch.isfinite(got).all(), f"{op} {name}: not finite"
        assert rel(got, want) <= GRAD_TOL, f"{op} {name}: {rel(got, want):.3g}"
    assert (grads[0][ignored] == 0).all(), f"{op}: an ignored row's dx is not 0"


@pytest.mark.gpu
@needs_cuda
@pytest.mark.usefixtures("poison")
@pytest.mark.parametrize("op", OPS)
def test_gpu_all_rows_ignored_gives_nan_loss_and_zero_gradients(op):
    inputs = gpu_inputs(seed=2)
    labels = torch.full((GPU_M,), IGNORE, dtype=torch.int32, device="cuda")
    loss, grads = loss_and_grads(lambda *t: gpu_coda_loss(op, *t, labels, ignore_index=IGNORE), inputs,
                                 torch.bfloat16)
    assert torch.isnan(loss)
    for name, got in zip(("dx", "dgamma", "dw"), grads):
        assert (got == 0).all(), f"{op} {name}: not all zero"


@pytest.mark.gpu
@needs_cuda
@pytest.mark.usefixtures("poison")
@pytest.mark.parametrize("op", OPS)
def test_gpu_fp32_gradient_buffer_with_ignore_index(op):
    x0, gamma0, w0 = gpu_inputs(seed=3)
    labels = labels_with_ignored(GPU_M, GPU_VOCAB, IGNORE, seed=4, device="cuda")
    start = torch.randn(GPU_VOCAB, GPU_D, device="cuda") * 1e-2
    buffer = start.clone()
    x, gamma, w = (t.clone().requires_grad_() for t in (x0, gamma0, w0))
    gpu_coda_loss(op, x, gamma, w, labels, w_grad=buffer, ignore_index=IGNORE).backward()
    assert w.grad is None
    _, (dx32, dgamma32, dw32) = loss_and_grads(lambda *t: eager_loss(*t, labels, IGNORE), (x0, gamma0, w0),
                                               torch.float32)
    assert rel(buffer - start, dw32) <= GRAD_TOL, f"{op} w_grad buffer: {rel(buffer - start, dw32):.3g}"
    assert rel(x.grad, dx32) <= GRAD_TOL and rel(gamma.grad, dgamma32) <= GRAD_TOL
