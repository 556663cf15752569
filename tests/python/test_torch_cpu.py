"""coda.torch on the CPU: every op runs its graphs through coda.reference (float64), so these tests check the
ops' algebra and autograd wiring against eager float64 PyTorch without a GPU.

Inputs are multiples of 1/64 in [-1, 1): exact in bf16, which the reference rounds every graph input to. A value
one graph stores and the next reads as an operand is rounded to bf16 there (relative error up to 2^-9); that is
why results that pass through two graphs are checked at 1e-2 and single-graph results at 1e-9."""
import copy

import pytest

torch = pytest.importorskip("torch")

import coda.torch as ct  # noqa: E402
from coda.torch import reference as ref  # noqa: E402

EXACT = 1e-9
CHAINED = 1e-2


def grid(*shape, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(-64, 64, shape, generator=g).double() / 64 * scale)


def close(actual, expected, tol, what):
    err = (actual - expected).norm() / expected.norm().clamp_min(1e-30)
    assert err <= tol, f"{what}: relative error {err:.3g} > {tol}"


def stats(x, gamma, eps):
    # h and rstd as a previous epilogue would hand them over (detached: they carry no gradient).
    x = x.detach()
    return x * gamma, torch.rsqrt(x.pow(2).mean(-1) + eps)


M, D, HEADS, FFN, VOCAB, EPS = 37, 24, 2, 20, 50, 1e-5


def test_rms_stats_matches_eager():
    x, gamma = grid(M, D, seed=1), 1 + grid(D, seed=2, scale=0.5)
    h, rstd = torch.ops.coda.rms_stats(x, gamma, EPS)
    h_ref, rstd_ref = stats(x, gamma, EPS)
    close(h, h_ref, EXACT, "h")
    close(rstd, rstd_ref, 1e-7, "rstd (finalized from f32 partials)")


def test_out_proj_forward_and_gradcheck():
    a, w, res = grid(M, 2 * D, seed=3), grid(D, 2 * D, seed=4, scale=0.25), grid(M, D, seed=5)
    gamma = 1 + grid(D, seed=6, scale=0.5)
    x1, h1, rstd1 = torch.ops.coda.out_proj(a, w, res, gamma, EPS)
    x1_ref = a @ w.t() + res
    close(x1, x1_ref, EXACT, "x1")
    close(h1, x1_ref * gamma, EXACT, "h1")
    close(rstd1, torch.rsqrt(x1_ref.pow(2).mean(-1) + EPS), 1e-7, "rstd1")
    # Linear in each input, and every value (and every value +- eps) stays on the bf16 grid: the check is exact.
    inputs = [a[:9, :10].clone().requires_grad_(), w[:, :10].clone().requires_grad_(), res[:9].clone().requires_grad_()]
    fn = lambda a_, w_, r_: torch.ops.coda.out_proj(a_, w_, r_, gamma, EPS)[0]  # noqa: E731
    assert torch.autograd.gradcheck(fn, inputs, eps=2 ** -6, atol=1e-9, rtol=1e-9)


def test_qkv_rope_gradcheck():
    # x on the grid, gamma = 1: h = x is exact; rstd is rounded to f32 only. The backward GEMM reads dz (RoPE's
    # cos/sin output) in bf16: Jacobian entries are off by up to 2^-9 relative, so atol = rtol = 1e-2.
    d, heads, m = 8, 2, 5
    theta = ref.rope_theta(d, heads)
    pos = torch.arange(m, dtype=torch.int32) * 3
    gamma = torch.ones(d, dtype=torch.float64)

    def fn(x, w):
        h, rstd = x * gamma, torch.rsqrt(x.pow(2).mean(-1) + EPS)
        return torch.ops.coda.qkv_rope(x, h.detach(), rstd.detach(), gamma, w, pos, theta)

    x = grid(m, d, seed=7).requires_grad_()
    w = grid(3 * d, d, seed=8, scale=0.5).requires_grad_()
    assert torch.autograd.gradcheck(fn, (x, w), eps=2 ** -6, atol=1e-2, rtol=1e-2)


def test_lm_head_ce_stats_matches_lm_head_ce():
    # The logit-free head (backward in row chunks of 4 here) gives the loss and gradients of the stored-logits one.
    d, m, v = 8, 11, 10
    gamma = 1 + grid(d, seed=30, scale=0.5)
    labels = torch.randint(0, v, (m,), generator=torch.Generator().manual_seed(4), dtype=torch.int32)
    x0, w0 = grid(m, d, seed=31), grid(v, d, seed=32)
    results = []
    for stats_only in (False, True):
        x, w, g = x0.clone().requires_grad_(), w0.clone().requires_grad_(), gamma.clone().requires_grad_()
        h, rstd = stats(x, g, EPS)
        if stats_only:
            loss = torch.ops.coda.lm_head_ce_stats(x, h, rstd, g, w, labels, None, 4)[0]
        else:
            loss = torch.ops.coda.lm_head_ce(x, h, rstd, g, w, labels)[0]
        loss.backward()
        results.append((loss, x.grad, w.grad, g.grad))
    # Same loss; the gradients differ by the stored head reading its logits back in bf16 (this one recomputes them).
    close(results[1][0], results[0][0], 1e-9, "logit-free loss")
    for name, a, b in zip(("dx", "dw", "dgamma"), results[1][1:], results[0][1:]):
        close(a, b, CHAINED, f"logit-free {name}")


def test_lm_head_ce_gradcheck():
    d, m, v = 8, 6, 10
    gamma = torch.ones(d, dtype=torch.float64)
    labels = torch.tensor([0, 3, 9, 4, 4, 1], dtype=torch.int32)

    def fn(x, w):
        h, rstd = x * gamma, torch.rsqrt(x.pow(2).mean(-1) + EPS)
        return torch.ops.coda.lm_head_ce(x, h.detach(), rstd.detach(), gamma, w, labels)[0]

    x = grid(m, d, seed=9).requires_grad_()
    w = grid(v, d, seed=10).requires_grad_()
    assert torch.autograd.gradcheck(fn, (x, w), eps=2 ** -6, atol=1e-2, rtol=1e-2)


def eager_grads(fn, inputs, out_grad_seed=0):
    out = fn(*inputs)
    g = grid(*out.shape, seed=out_grad_seed) if out.dim() else torch.ones((), dtype=out.dtype)
    return out, torch.autograd.grad(out, inputs, g, allow_unused=True), g


@pytest.mark.parametrize("op", ["qkv_rope", "out_proj", "mlp", "lm_head_ce"])
def test_op_grads_match_eager_float64(op):
    x = grid(M, D, seed=11)
    gamma = 1 + grid(D, seed=12, scale=0.5)
    theta = ref.rope_theta(D, HEADS)
    pos = (torch.arange(M, dtype=torch.int32) % 13)
    labels = torch.randint(0, VOCAB, (M,), generator=torch.Generator().manual_seed(0), dtype=torch.int32)
    w = {"qkv_rope": grid(3 * D, D, seed=13, scale=0.5), "out_proj": grid(D, D, seed=14, scale=0.5),
         "mlp": grid(2 * FFN, D, seed=15, scale=0.5), "lm_head_ce": grid(VOCAB, D, seed=16, scale=0.5)}[op]
    w_down = grid(D, FFN, seed=17, scale=0.5)
    gamma_next = 1 + grid(D, seed=18, scale=0.5)

    def coda_fn(x_, gamma_, w_, *rest):
        h, rstd = stats(x_, gamma_, EPS)
        if op == "qkv_rope":
            return torch.ops.coda.qkv_rope(x_, h, rstd, gamma_, w_, pos, theta)
        if op == "out_proj":
            return torch.ops.coda.out_proj(x_, w_, x_, gamma_, EPS)[0]
        if op == "mlp":
            return torch.ops.coda.mlp(x_, h, rstd, gamma_, w_, rest[0], gamma_next, EPS)[0]
        return torch.ops.coda.lm_head_ce(x_, h, rstd, gamma_, w_, labels)[0]

    def eager_fn(x_, gamma_, w_, *rest):
        n = ref.rms_norm(x_, gamma_, EPS)
        if op == "qkv_rope":
            return ref.rope(n @ w_.t(), pos, theta.double())
        if op == "out_proj":
            return x_ @ w_.t() + x_
        if op == "mlp":
            return x_ + ref.swiglu(n @ w_.t()) @ rest[0].t()
        return torch.nn.functional.cross_entropy(n @ w_.t(), labels.long())

    inputs = [x, gamma, w] + ([w_down] if op == "mlp" else [])
    a_in = [t.clone().requires_grad_() for t in inputs]
    e_in = [t.clone().requires_grad_() for t in inputs]
    out, grads, g = eager_grads(coda_fn, a_in)
    out_ref, grads_ref, _ = eager_grads(eager_fn, e_in)
    # h = x * gamma is rounded to bf16 where it enters the GEMM, so only out_proj (which reads x) is exact.
    close(out, out_ref, 1e-7 if op == "out_proj" else CHAINED, f"{op} output")
    names = ["dx", "dgamma", "dw", "dw_down"]
    for name, got, want in zip(names, grads, grads_ref):
        if op == "out_proj" and name == "dgamma":
            assert got is None and want is None  # gamma only feeds h1, which carries no gradient
            continue
        close(got, want, 2 * CHAINED, f"{op} {name}")


def tiny_model(**kw):
    torch.manual_seed(0)
    return ct.LlamaModel(vocab=64, d=16, n_layers=2, n_heads=2, ffn=24, dtype=torch.float64, **kw)


def test_model_loss_and_grads_match_eager():
    model = tiny_model()
    with torch.no_grad():  # weights on the bf16 grid, norms away from 1
        for p in model.parameters():
            p.copy_((p * 64).round().clamp(-64, 63) / 64)
        for layer in model.layers:
            layer.attn_norm.add_(grid(16, seed=1, scale=0.25))
            layer.mlp_norm.add_(grid(16, seed=2, scale=0.25))
    eager = copy.deepcopy(model)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 64, (3, 7), generator=g)
    labels = torch.randint(0, 64, (3, 7), generator=g)
    loss = model(tokens, labels)
    loss_ref = ref.model_loss(eager, tokens, labels)
    close(loss, loss_ref, CHAINED, "loss")
    loss.backward()
    loss_ref.backward()
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        close(p.grad, q.grad, 3e-2, f"grad of {name}")


def test_dtype_casts_keep_the_rope_angles_f32_and_exact():
    model = tiny_model()
    before = [layer.theta.clone() for layer in model.layers]
    for cast in (model.bfloat16, model.half, model.double, lambda: model.to(torch.float16)):
        cast()
        for layer, theta in zip(model.layers, before):
            assert layer.theta.dtype == torch.float32
            assert torch.equal(layer.theta, theta)
    assert model.layers[0].w_qkv.dtype == torch.float16


@pytest.mark.parametrize("store_logits", [True, False])
def test_fp32_grad_accumulation_adds_into_main_grad(store_logits):
    model = tiny_model(fp32_grad_accumulation=True, store_logits=store_logits)
    plain = copy.deepcopy(model)
    for layer in plain.layers:
        layer.fp32_grad_accumulation = False
    plain.head.fp32_grad_accumulation = False
    tokens = torch.randint(0, 64, (2, 5), generator=torch.Generator().manual_seed(2))
    for _ in range(2):
        model(tokens, tokens).backward()
    plain(tokens, tokens).backward()
    for layer, ref_layer in zip(model.layers, plain.layers):
        for name in ("w_qkv", "w_o", "w_gate_up", "w_down"):
            p, q = getattr(layer, name), getattr(ref_layer, name)
            assert p.grad is None, f"{name}: the gradient went to main_grad"
            close(p.main_grad.double(), 2 * q.grad, 1e-6, f"{name}.main_grad after two steps")
    close(model.head.weight.main_grad.double(), 2 * plain.head.weight.grad, 1e-6, "lm head main_grad")


def test_compile_fullgraph_traces_the_ops():
    # aot_eager traces forward and backward through the fake kernels with no graph break.
    model = tiny_model()
    tokens = torch.randint(0, 64, (2, 6), generator=torch.Generator().manual_seed(3))
    eager = copy.deepcopy(model)
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    loss = compiled(tokens, tokens)
    loss.backward()
    loss_ref = eager(tokens, tokens)
    loss_ref.backward()
    close(loss, loss_ref, EXACT, "compiled loss")
    for p, q in zip(model.parameters(), eager.parameters()):
        close(p.grad, q.grad, EXACT, "compiled grad")


def test_inductor_compiles_a_deep_model_with_the_ops_as_registered_fallbacks():
    # Inductor left to discover coda's ops formats their inputs' IR into a log line first, which triples with every
    # op (x, h and rstd feed the next one): 3 layers took 200 s. Tracing (the fake kernels) registers them up front.
    from torch._inductor.lowering import lowerings
    from coda.torch import _register

    torch.manual_seed(0)
    # attention="none": Inductor's own CPU SDPA backward mixes float and double.
    model = ct.LlamaModel(vocab=64, d=16, n_layers=4, n_heads=2, ffn=24, attention="none", dtype=torch.float64)
    tokens = torch.randint(0, 64, (2, 6), generator=torch.Generator().manual_seed(3))
    torch.compile(copy.deepcopy(model), backend="aot_eager", fullgraph=True)(tokens, tokens)
    missing = [name for name in _register.OPS if getattr(torch.ops.coda, name).default not in lowerings]
    assert not missing, f"traced, but not registered with Inductor: {missing}"

    eager = copy.deepcopy(model)
    loss = torch.compile(model, fullgraph=True)(tokens, tokens)
    loss.backward()
    loss_ref = eager(tokens, tokens)
    loss_ref.backward()
    close(loss, loss_ref, 1e-6, "inductor loss")
    for p, q in zip(model.parameters(), eager.parameters()):
        close(p.grad, q.grad, 1e-6, "inductor grad")


@pytest.mark.parametrize("tie", [False, True])
def test_compile_fullgraph_with_fp32_grad_accumulation_matches_eager(tie):
    # The main_grad buffers exist from the constructor: the compiled step reads them as graph inputs and its backward
    # adds into them, as the eager step does (two steps: the second adds onto the first).
    model = tiny_model(fp32_grad_accumulation=True, tie_embeddings=tie)
    eager = copy.deepcopy(model)
    ct.grad_buffers(eager)
    tokens = torch.randint(0, 64, (2, 6), generator=torch.Generator().manual_seed(3))
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    for _ in range(2):
        compiled(tokens, tokens).backward()
        eager(tokens, tokens).backward()
    accumulating = 0
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        if getattr(p, "main_grad", None) is not None:
            accumulating += 1
            assert p.grad is None, f"{name}: a gradient went to .grad"
            assert torch.equal(p.main_grad, q.main_grad), name
        else:
            assert torch.equal(p.grad, q.grad), name
    assert accumulating == 2 * 4 + (1 if tie else 2)  # the layers' four weights, the embedding and the LM head


def test_compile_with_fp32_grad_accumulation_needs_its_buffers_first():
    model = tiny_model(fp32_grad_accumulation=True)
    del model.layers[0].w_qkv.main_grad  # as after a move to another device: no buffer that fits
    tokens = torch.randint(0, 64, (2, 6), generator=torch.Generator().manual_seed(3))
    with pytest.raises(Exception, match="grad_buffers"):
        torch.compile(model, backend="aot_eager", fullgraph=True)(tokens, tokens)
    ct.grad_buffers(model)
    torch.compile(model, backend="aot_eager", fullgraph=True)(tokens, tokens).backward()
    assert model.layers[0].w_qkv.main_grad.abs().sum() > 0


def test_bad_input_is_a_coda_error():
    import coda
    x = grid(4, 6)
    with pytest.raises(coda.Error):
        torch.ops.coda.out_proj(x, grid(6, 5), x, torch.ones(6, dtype=torch.float64), EPS)


def test_rmsnorm_backward_variants_match_the_block():
    # coda.torch stores dx in bf16 (adding the residual gradient in the epilogue) where coda.blocks.rmsnorm_backward
    # accumulates into f32: the same values on the same inputs.
    import coda
    from coda.torch import _kernels
    m, n, k = 9, 12, 16
    ins = {"A": grid(m, k, seed=20).numpy(), "B": grid(k, n, seed=21).numpy(), "x": grid(m, n, seed=22).numpy(),
           "rstd": (1 + grid(m, seed=23, scale=0.5)).numpy(), "s": grid(m, seed=24).numpy(),
           "gamma": (1 + grid(n, seed=25, scale=0.5)).numpy()}
    dx_in = grid(m, n, seed=26).numpy()
    block = coda.reference(coda.blocks.rmsnorm_backward(), {**ins, "dx_residual": dx_in}, m, n, k)
    variant = coda.reference(_kernels.graph("rmsnorm_backward_residual"), {**ins, "dx_in": dx_in}, m, n, k)
    plain = coda.reference(_kernels.graph("rmsnorm_backward_bf16"), ins, m, n, k)
    for key in ("o", "dgamma_partials"):
        assert abs(block[key] - variant[key]).max() < 1e-12 and abs(block[key] - plain[key]).max() < 1e-12
    assert abs(block["dx_residual"] - variant["dx"]).max() < 1e-12
    assert abs(block["dx_residual"] - dx_in - plain["dx"]).max() < 1e-12
    assert abs(plain["dx"]).max() > 0.1


def test_a_dry_run_records_every_launch_of_a_step_and_makes_none():
    from coda.torch import _kernels
    model = tiny_model()
    tokens = torch.zeros(3, 8, dtype=torch.long)
    before = [p.detach().clone() for p in model.parameters()]
    launches = _kernels.record_launches(lambda: model(tokens, tokens).backward())
    m, d, f, v = 24, 16, 24, 64
    expected = {("rms_entry", m, d, 0), ("rms_finalize", m, 0, 0), ("qkv_rope", m, 3 * d, d), ("out_proj", m, d, d),
                ("gate_up_swiglu", m, 2 * f, d), ("out_proj", m, d, f), ("lm_head_ce", m, v, d),
                ("ce_finalize", m, 0, 0), ("cross_entropy_backward", m, v, 0), ("dgrad", m, d, d),
                ("swiglu_backward", m, f, d), ("rmsnorm_backward_residual", m, d, 2 * f),
                ("rmsnorm_backward_residual", m, d, 3 * d), ("rmsnorm_backward_bf16", m, d, v),
                ("rope_backward_from_output", m, d, 0), ("rms_backward_finalize", m, 0, 0),
                ("dgamma_finalize", d, 0, 0), ("wgrad_store", 3 * d, d, m), ("wgrad_store", 2 * f, d, m),
                ("wgrad_store", d, f, m), ("wgrad_store", d, d, m), ("wgrad_store", v, d, m)}
    assert launches == expected, f"missing {expected - launches}, unexpected {launches - expected}"
    assert not _kernels.dry_run()
    for p, q in zip(model.parameters(), before):
        assert torch.equal(p, q)


def test_a_dry_run_adds_nothing_into_the_f32_gradient_buffers():
    # warm() runs a dry run before training: its tensors hold no values, so nothing may reach a main_grad, which a
    # training loop zeroes after its optimizer step, not before the first (the embedding's was the one PyTorch wrote).
    from coda.torch import _kernels
    torch.manual_seed(0)
    model = ct.LlamaModel(64, 16, 1, 2, 24, dtype=torch.float64, fp32_grad_accumulation=True, tie_embeddings=True)
    tokens = torch.randint(0, 64, (3, 8))
    model(tokens, tokens).backward()
    before = {name: p.main_grad.clone() for name, p in model.named_parameters() if hasattr(p, "main_grad")}
    assert len(before) >= 5 and before["embed.weight"].abs().max() > 0
    _kernels.record_launches(lambda: model(tokens, tokens).backward())
    for name, p in model.named_parameters():
        if name in before:
            assert torch.equal(p.main_grad, before[name]), name


def test_warm_compiles_a_steps_kernels_in_parallel_without_a_gpu(tmp_path, monkeypatch):
    import coda
    built = []
    real_warm = coda.warm

    def counting_warm(graph, arch=None, config=None, shape=None):
        built.append((graph.name, shape))
        return real_warm(graph, arch=arch, config=config, shape=shape)
    monkeypatch.setattr(coda, "warm", counting_warm)
    model = ct.LlamaModel(vocab=64, d=16, n_layers=1, n_heads=2, ffn=24, attention="none", dtype=torch.float64)
    launches = ct.warm(model, 2, 8, jobs=2, arch="sm_90a")
    assert len(built) == len(launches) and len(set(name for name, _ in built)) >= 15
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize("name", sorted(__import__("coda.torch._kernels", fromlist=["_LOCAL"])._LOCAL))
def test_every_graph_coda_torch_builds_compiles_for_hopper_without_spills(name):
    # The graphs coda.torch makes itself (coda.blocks' are checked in test_build.py): NVRTC needs no GPU.
    import coda
    from coda.torch import _kernels
    report = coda.warm(_kernels.graph(name), arch="sm_90a")
    assert report.spill_bytes == 0, f"{name}: {report}"
    assert 0 < report.registers <= 255


def _promoted_graphs():
    # Every :promoted graph a step of the per-tensor and row-wise FP8 models runs (fp8_backward_accumulation), with and
    # without FP8 weight gradients into f32 buffers: recorded in dry runs, nothing compiled.
    import coda.torch as ct
    from coda.torch import _kernels
    names = set()
    for recipe in ("tensorwise", "rowwise"):
        for fp8_wgrad in (False, True):
            model = ct.LlamaModel(64, 128, 1, 2, 96, dtype=torch.float64, fp8=recipe, fp8_wgrad=fp8_wgrad,
                                  fp32_grad_accumulation=fp8_wgrad, fp8_backward_accumulation="promoted")
            tokens = torch.zeros(1, 16, dtype=torch.long)
            names |= {n for n, *_ in _kernels.record_launches(lambda: model(tokens, tokens).backward())
                      if n.endswith(_kernels.PROMOTED)}
    return sorted(names)


@pytest.mark.parametrize("name", _promoted_graphs())
def test_every_promoted_graph_compiles_for_hopper_without_spills(name):
    # The promoted loop keeps a block sum beside the accumulator: at 128 x 256 SwiGLU's backward spilled, so its
    # default tile is 128 x 128 (src/mainloop/hopper.cpp); at the d = 4096 layer's shape class.
    import coda
    from coda.torch import _kernels
    report = coda.warm(_kernels.graph(name), arch="sm_90a", shape=(16384, 4096, 4096))
    assert report.spill_bytes == 0, f"{name}: {report}"
    assert 0 < report.registers <= 255


def test_split_swiglu_backward_matches_the_fused_one():
    # "split": dy stored in bf16 by a plain dgrad GEMM, then the tile program. The same gradients up to that one
    # rounding of dy, and the launches it makes instead of the fused epilogue.
    from coda.torch import _kernels, ops
    results, launches = {}, {}
    for mode in ("fused", "split"):
        ops.set_swiglu_backward(mode)
        try:
            model = tiny_model()
            tokens = torch.randint(0, 64, (2, 6), generator=torch.Generator().manual_seed(5))
            model(tokens, tokens).backward()
            results[mode] = [p.grad for p in model.parameters()]
            launches[mode] = _kernels.record_launches(lambda: tiny_model()(tokens, tokens).backward())
        finally:
            ops.set_swiglu_backward("fused")
    for (name, _), a, b in zip(tiny_model().named_parameters(), results["split"], results["fused"]):
        close(a, b, CHAINED, f"split SwiGLU backward: grad of {name}")
    m, d, f = 12, 16, 24
    assert launches["split"] - launches["fused"] == {("swiglu_backward_tile", m, f, 0), ("dgrad", m, f, d)}
    assert launches["fused"] - launches["split"] == {("swiglu_backward", m, f, d)}
    with pytest.raises(ValueError, match="fused"):
        ops.set_swiglu_backward("fast")
