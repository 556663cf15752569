"""coda.torch's FP8 layer (fp8="tensorwise") on the CPU, where its graphs run through coda.reference: against an eager
emulation of the same recipe (reference.fp8_decoder_layer: every GEMM operand rounded to FP8 under the scales the
layer used), against the bf16 layer, and the delayed scales' bookkeeping (coda.torch.fp8.Fp8Scaling).

Why the tolerances. The reference rounds each graph's bf16 inputs to bf16 (the emulation keeps float64); a value that
moves by d relative across an FP8 rounding boundary moves by one FP8 step u (2^-4 relative in e4m3, 2^-3 in e5m2), so
two runs that differ by d before a quantization differ by about sqrt(d u) after it, and each quantization feeds the
next. Measured (2026-12-07, these sizes): the forward within 3.4% of the emulation (h2 4%), the gradients (two to four
e5m2 roundings behind a forward that already differs) within 11.1%, and the bf16 layer as far (10% forward, 19%
gradients) as the recipe's rounding makes it. Each tolerance is at most twice what was measured. The bugs these tests are for are far larger: a scale from the wrong slot is off by its ratio to
the right one (2x to 10^5 here), a wrong layout or a lost residual by 100% or more, an e4m3 store where e5m2 belongs
saturates. The GPU tests check the kernels themselves against the reference elementwise (tests/gpu, the FP8 graphs).
"""
import copy

import pytest

torch = pytest.importorskip("torch")

import coda.torch as ct  # noqa: E402
from coda.torch import fp8, ops_fp8_layer  # noqa: E402
from coda.torch import reference as ref  # noqa: E402
from fp8_support import grid, rel, train_side_by_side  # noqa: E402

D, HEADS, FFN, SEQ, BATCH, EPS = 32, 2, 40, 8, 2, 1e-5
M = SEQ * BATCH


def make_layer(attention="sdpa", recipe="tensorwise", fp8_wgrad=False, mlp_gain=1.0):
    layer = ct.LlamaDecoderLayer(D, HEADS, FFN, eps=EPS, attention=attention, dtype=torch.float64, fp8=recipe,
                                 fp8_wgrad=fp8_wgrad)
    with torch.no_grad():
        for i, w in enumerate((layer.w_qkv, layer.w_o, layer.w_gate_up, layer.w_down)):
            w.copy_(grid(*w.shape, seed=10 + i, scale=0.5))
        layer.attn_norm.copy_(1 + grid(D, seed=20, scale=0.5))
        layer.mlp_norm.copy_(mlp_gain * (1 + grid(D, seed=21, scale=0.5)))
    return layer


def run_steps(layer, steps, attention_inputs):
    """`steps` forward + backward passes of one layer on the same inputs (the scales calibrate from the first):
    the last step's (x2, h2 dequantized, gradients, the entry's (scale, inv_scale))."""
    x0, pos, next_gamma, dy = attention_inputs
    entry = fp8.Fp8Scaling({"h": "e4m3"})
    for _ in range(steps):
        layer.zero_grad()
        entry.update(M)
        x = x0.clone().requires_grad_()
        h, rstd, amax = torch.ops.coda.rms_stats_fp8(x, layer.attn_norm.detach(), EPS, entry.inv_scale("h"))
        entry.record(amax)
        x2, h2, rstd2, h2_scale = layer(x, h, rstd, next_gamma, pos, SEQ, entry.scale("h"))
        x2.backward(dy)
    grads = [x.grad] + [p.grad for p in (layer.w_qkv, layer.w_o, layer.w_gate_up, layer.w_down, layer.attn_norm,
                                          layer.mlp_norm)]
    h_scales = (float(entry.scale("h")), float(entry.inv_scale("h")))
    return x2.detach(), h2.double() * float(h2_scale), grads, h_scales


def inputs():
    pos = (torch.arange(M, dtype=torch.int32) % SEQ)
    return grid(M, D, seed=1), pos, 1 + grid(D, seed=2, scale=0.5), grid(M, D, seed=3, scale=1.0 / M)


def layer_scales(layer):
    state = layer.fp8.state
    return {name: (float(state[fp8.SCALE, i]), float(state[fp8.INV_SCALE, i]))
            for i, name in enumerate(ops_fp8_layer.SLOTS)}


NAMES = ("dx", "dw_qkv", "dw_o", "dw_gate_up", "dw_down", "d_attn_norm", "d_mlp_norm")


@pytest.mark.parametrize("fp8_wgrad", [False, True])
@pytest.mark.parametrize("attention", ["sdpa", "none"])
def test_layer_matches_the_recipe_emulated(attention, fp8_wgrad):
    # mlp_gain: the two norms' outputs (o_qkv and o_mlp, FP8 weight gradients' operands) differ in scale by 4x, so
    # that one read under the other's scale shows.
    layer = make_layer(attention, fp8_wgrad=fp8_wgrad, mlp_gain=4.0)
    x0, pos, next_gamma, dy = inputs()
    x2, h2, grads, h_scales = run_steps(layer, 2, (x0, pos, next_gamma, dy))
    scales = layer_scales(layer)
    # The second step ran on scales calibrated by the first: none is a prior any more (the norm outputs' slots serve
    # FP8 weight gradients alone).
    used = [s for name, (s, _) in scales.items() if fp8_wgrad or not name.startswith("o_")]
    assert all(s != 1.0 for s in used) and h_scales[0] != 1.0

    x = x0.clone().requires_grad_()
    x2_ref = ref.fp8_decoder_layer(layer, x, pos, SEQ, h_scales, scales, fp8_wgrad)
    grads_ref = torch.autograd.grad(x2_ref, [x, layer.w_qkv, layer.w_o, layer.w_gate_up, layer.w_down,
                                             layer.attn_norm, layer.mlp_norm], dy)
    assert rel(x2, x2_ref) < 0.06
    # h2 is the next layer's e4m3 operand, under the h_next slot's scale.
    h2_ref = ref.fp8_round(x2_ref.detach() * next_gamma, *scales["h_next"], "e4m3")
    assert rel(h2, h2_ref) < 0.06
    for name, g, g_ref in zip(NAMES, grads, grads_ref):
        assert rel(g, g_ref) < 0.2, name


def test_layer_is_close_to_the_bf16_layer():
    layer = make_layer()
    x0, pos, next_gamma, dy = inputs()
    x2, h2, grads, _ = run_steps(layer, 2, (x0, pos, next_gamma, dy))
    x = x0.clone().requires_grad_()
    x2_ref = ref.decoder_layer(layer, x, pos, SEQ)
    grads_ref = torch.autograd.grad(x2_ref, [x, layer.w_qkv, layer.w_o, layer.w_gate_up, layer.w_down,
                                             layer.attn_norm, layer.mlp_norm], dy)
    assert rel(x2, x2_ref) < 0.15
    for name, g, g_ref in zip(NAMES, grads, grads_ref):
        assert rel(g, g_ref) < 0.35, name


def test_model_in_fp8_tracks_bf16_and_trains():
    torch.manual_seed(0)
    kw = dict(vocab=64, d=D, n_layers=2, n_heads=HEADS, ffn=FFN, dtype=torch.float64)
    model = ct.LlamaModel(**kw, fp8="tensorwise")
    base = ct.LlamaModel(**kw)
    base.load_state_dict(model.state_dict(), strict=False)  # less the FP8 scales
    tokens = torch.randint(0, 64, (BATCH, SEQ), generator=torch.Generator().manual_seed(5))
    labels = torch.randint(0, 64, (BATCH, SEQ), generator=torch.Generator().manual_seed(6))
    losses = train_side_by_side({"fp8": model, "bf16": base}, tokens, labels, 3e-3, 12, torch.optim.AdamW)
    assert losses["fp8"][-1] < losses["fp8"][0] - 0.3  # it learns (the same batch, memorized)
    for a, b in zip(losses["fp8"], losses["bf16"]):
        assert abs(a - b) < 0.05 * b


def test_fp8_scaling_delays_its_scales():
    s = fp8.Fp8Scaling({"a": "e4m3", "g": "e5m2"}, history=2)
    s.update(tokens=64)
    # Priors: 1 for activations, 1 / tokens for gradients; no amax recorded yet.
    assert float(s.scale("a")) == 1.0 and float(s.scale("g")) == pytest.approx(1 / 64)
    s.record(torch.tensor([896.0, 0.0]))
    s.record(torch.tensor([448.0, 0.0]))  # the larger of one step's records counts
    s.update(tokens=64)
    assert float(s.scale("a")) == 2.0 and float(s.inv_scale("a")) == 0.5
    assert float(s.scale("g")) == pytest.approx(1 / 64)  # nothing recorded: the scale stays
    s.record(torch.tensor([44.8, 57344.0 * 4]))
    s.update(tokens=64)
    assert float(s.scale("a")) == 2.0  # the history's max (896) still counts
    assert float(s.scale("g")) == 4.0
    s.update(tokens=64)  # 896 left the two-step history; 44.8 is the max now
    assert float(s.scale("a")) == pytest.approx(0.1)
    # model.to(dtype) keeps the scales f32.
    s = s.to(torch.bfloat16)
    assert s.state.dtype == torch.float32 and s.amax_history.dtype == torch.float32


def test_an_unknown_recipe_is_an_error_that_names_the_recipes():
    for make in (lambda: ct.LlamaDecoderLayer(D, HEADS, FFN, dtype=torch.float64, fp8="e4m3"),
                 lambda: ct.LlamaModel(vocab=64, d=D, n_layers=1, n_heads=HEADS, ffn=FFN, dtype=torch.float64,
                                       fp8="e4m3")):
        with pytest.raises(ValueError, match="'tensorwise', 'rowwise', 'blockwise'"):
            make()


def test_fp8_weight_gradients_need_an_fp8_recipe_and_tokens_in_sixteens():
    with pytest.raises(ValueError, match="needs an FP8 recipe"):
        ct.LlamaDecoderLayer(D, HEADS, FFN, dtype=torch.float64, fp8=None, fp8_wgrad=True)
    layer = make_layer(fp8_wgrad=True)
    x0, pos, next_gamma, _ = inputs()
    m = 12  # not a multiple of 16
    entry = fp8.Fp8Scaling({"h": "e4m3"})
    entry.update(m)
    h, rstd, _ = torch.ops.coda.rms_stats_fp8(x0[:m], layer.attn_norm.detach(), EPS, entry.inv_scale("h"))
    with pytest.raises(ValueError, match="M = 12 tokens is not a multiple of 16"):
        layer(x0[:m], h, rstd, next_gamma, pos[:m], 6, entry.scale("h"))


@pytest.mark.parametrize("fp8_wgrad", [False, True])
def test_model_in_fp8_with_either_weight_gradient_trains(fp8_wgrad):
    torch.manual_seed(0)
    kw = dict(vocab=64, d=D, n_layers=2, n_heads=HEADS, ffn=FFN, dtype=torch.float64)
    model = ct.LlamaModel(**kw, fp8="tensorwise", fp8_wgrad=fp8_wgrad, fp32_grad_accumulation=fp8_wgrad)
    tokens = torch.randint(0, 64, (BATCH, SEQ), generator=torch.Generator().manual_seed(5))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(8):
        opt.zero_grad()
        loss = model(tokens, tokens)
        loss.backward()
        if fp8_wgrad:  # the weight gradients were added into main_grad (wgrad_fp8_accumulate): hand them to AdamW
            for p in model.parameters():
                if hasattr(p, "main_grad"):
                    p.grad = p.main_grad.to(p.dtype)
                    p.main_grad.zero_()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.3


def test_layer_needs_its_input_scale_and_e4m3_h():
    layer = make_layer()
    x0, pos, next_gamma, _ = inputs()
    h, rstd = x0 * layer.attn_norm.detach(), torch.rsqrt(x0.pow(2).mean(-1) + EPS)
    with pytest.raises(ValueError, match="h_scale"):
        layer(x0, h, rstd, next_gamma, pos, SEQ)
    with pytest.raises(ValueError, match="float8_e4m3fn"):
        layer(x0, h, rstd, next_gamma, pos, SEQ, torch.tensor(1.0))


def test_hugging_face_llama_in_fp8():
    # A Hugging Face Llama (grouped-query attention, LLaMA 3 RoPE scaling, tied embeddings) run in FP8: its weights
    # load (the FP8 scales start fresh) and its loss stays within the recipe's rounding of Hugging Face's own.
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, intermediate_size=48, rms_norm_eps=1e-5,
                                      tie_word_embeddings=True, attn_implementation="eager")
    torch.manual_seed(0)
    hf = transformers.LlamaForCausalLM(config).to(torch.float64)
    model = ct.from_hf(hf, fp8="tensorwise")
    assert model.layers[0].n_kv_heads == 2 and model.layers[0].fp8 is not None
    tokens = torch.randint(0, 64, (BATCH, SEQ), generator=torch.Generator().manual_seed(7))
    expected = float(hf(input_ids=tokens, labels=tokens).loss)
    for _ in range(2):  # the second step on calibrated scales
        loss = model(tokens, tokens)
        loss.backward()
    assert abs(loss.item() - expected) < 0.02 * expected


# --- on the GPU: the same checks through the kernels (FP8 rows need 16-byte multiples: every size a multiple of 16) ---

GPU = dict(d=256, heads=4, ffn=512, seq=128, batch=2)


def gpu_layer(attention, recipe="tensorwise", fp8_wgrad=False, accumulation="fast"):
    torch.manual_seed(0)
    return ct.LlamaDecoderLayer(GPU["d"], GPU["heads"], GPU["ffn"], eps=EPS, attention=attention, device="cuda",
                                fp8=recipe, fp8_wgrad=fp8_wgrad, fp8_backward_accumulation=accumulation)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("accumulation", ["fast", "promoted"])
@pytest.mark.parametrize("fp8_wgrad", [False, True])
@pytest.mark.parametrize("attention", ["sdpa", "none"])
def test_layer_on_the_gpu_matches_the_recipe_emulated(attention, fp8_wgrad, accumulation, poison):
    d, seq, m = GPU["d"], GPU["seq"], GPU["seq"] * GPU["batch"]
    layer = gpu_layer(attention, fp8_wgrad=fp8_wgrad, accumulation=accumulation)
    g = torch.Generator(device="cuda").manual_seed(1)
    x0 = torch.randn(m, d, device="cuda", generator=g).bfloat16()
    dy = (torch.randn(m, d, device="cuda", generator=g) / m).bfloat16()
    pos = torch.arange(seq, device="cuda", dtype=torch.int32).repeat(GPU["batch"])
    next_gamma = torch.ones(d, device="cuda", dtype=torch.bfloat16)
    entry = fp8.Fp8Scaling({"h": "e4m3"}, device="cuda")
    for _ in range(2):
        layer.zero_grad()
        entry.update(m)
        x = x0.clone().requires_grad_()
        h, rstd, amax = torch.ops.coda.rms_stats_fp8(x, layer.attn_norm.detach(), EPS, entry.inv_scale("h"))
        entry.record(amax)
        x2, h2, _, h2_scale = layer(x, h, rstd, next_gamma, pos, seq, entry.scale("h"))
        x2.backward(dy)
    params = [layer.w_qkv, layer.w_o, layer.w_gate_up, layer.w_down, layer.attn_norm, layer.mlp_norm]
    grads = [x.grad] + [p.grad for p in params]
    scales = layer_scales(layer)
    ref_layer = copy_to_float(layer)
    xr = x0.float().requires_grad_()
    x2_ref = ref.fp8_decoder_layer(ref_layer, xr, pos, seq, (float(entry.scale("h")), float(entry.inv_scale("h"))),
                                   scales, fp8_wgrad)
    ref_params = [ref_layer.w_qkv, ref_layer.w_o, ref_layer.w_gate_up, ref_layer.w_down, ref_layer.attn_norm,
                  ref_layer.mlp_norm]
    grads_ref = torch.autograd.grad(x2_ref, [xr] + ref_params, dy.float())
    assert torch.isfinite(x2).all() and all(torch.isfinite(g_).all() for g_ in grads)
    assert rel(x2, x2_ref) < 0.036
    h2_ref = ref.fp8_round(x2_ref.detach() * next_gamma.float(), *scales["h_next"], "e4m3")
    assert rel(h2.float() * float(h2_scale), h2_ref) < 0.06
    print(f"tensorwise {attention} fp8_wgrad={fp8_wgrad} {accumulation}: x2 {rel(x2, x2_ref):.3f}, "
          + ", ".join(f"{name} {rel(g_, g_ref):.3f}" for name, g_, g_ref in zip(NAMES, grads, grads_ref)))
    # Measured on an H100 (2026-12-07): x2 within 1.8% (tolerance 3.6%, above), every gradient within 8.2%
    # (d_attn_norm); twice that is the gradients' tolerance.
    for name, g_, g_ref in zip(NAMES, grads, grads_ref):
        assert rel(g_, g_ref) < 0.16, name


def copy_to_float(layer):
    out = copy.deepcopy(layer).float()
    out.fp8 = None
    return out


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise", "blockwise"])
def test_model_in_fp8_on_the_gpu_tracks_bf16(recipe):
    kw = dict(vocab=512, d=GPU["d"], n_layers=2, n_heads=GPU["heads"], ffn=GPU["ffn"], device="cuda")
    torch.manual_seed(0)
    model = ct.LlamaModel(**kw, fp8=recipe)
    base = ct.LlamaModel(**kw)
    base.load_state_dict(model.state_dict(), strict=False)
    g = torch.Generator(device="cuda").manual_seed(2)
    tokens = torch.randint(0, 512, (GPU["batch"], GPU["seq"]), device="cuda", generator=g)
    labels = torch.randint(0, 512, (GPU["batch"], GPU["seq"]), device="cuda", generator=g)
    losses = train_side_by_side({"fp8": model, "bf16": base}, tokens, labels, 1e-3, 10, torch.optim.AdamW)
    assert losses["fp8"][-1] < losses["fp8"][0] - 0.3
    # Within 3% of bf16's loss plus 1% of the first loss (ln 512): the losses fall from 6.2 to 0.5 in these 10 steps,
    # and near 0.5 the recipes sat 0.016 to 0.028 above bf16 on an H100 (3.3% of the loss there, 0.5% of the first).
    for a, b in zip(losses["fp8"], losses["bf16"]):
        assert abs(a - b) < 0.03 * b + 0.01 * losses["bf16"][0]
