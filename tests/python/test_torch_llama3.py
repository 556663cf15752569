"""coda.torch at LLaMA-3's architecture: grouped-query attention, LLaMA 3.1's RoPE frequency scaling, tied
embeddings, and the Hugging Face conversion (from_hf, to_hf_state_dict).

CPU tests run the ops through the float64 reference of their kernels (as test_torch_cpu.py does; inputs on the
bf16 grid, results within the bf16 rounding of values handed between graphs). GPU tests compare bf16 on CUDA with
an fp32 reference. Tests that need transformers skip without it (a test-only, optional dependency)."""
import copy
import math
import sys

import pytest

sys.dont_write_bytecode = True
torch = pytest.importorskip("torch")


import coda.torch as ct  # noqa: E402
from coda.torch import reference as ref  # noqa: E402

CHAINED = 1e-2  # one bf16 rounding of a value handed from one graph to the next (test_torch_cpu.py)
MODEL_GRAD = 3e-2  # a gradient through a whole model: several such roundings
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 64}


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30)).item()


def on_grid(module, scale=64):
    # Weights on the bf16 grid (multiples of 1/64 in [-1, 1)), so the reference's rounding of inputs is exact.
    with torch.no_grad():
        for p in module.parameters():
            p.copy_((p * scale).round().clamp(-64, 63) / 64)


# --- RoPE frequencies --------------------------------------------------------------------------------------------

def llama3_frequency(j: int, head_dim: int, base: float, s: dict) -> float:
    """LLaMA 3.1's rescaled frequency of pair j, case by case as its definition reads."""
    freq = base ** (-2 * j / head_dim)
    wavelength = 2 * math.pi / freq
    if wavelength < s["original_max_position_embeddings"] / s["high_freq_factor"]:
        return freq
    if wavelength > s["original_max_position_embeddings"] / s["low_freq_factor"]:
        return freq / s["factor"]
    blend = ((s["original_max_position_embeddings"] / wavelength - s["low_freq_factor"])
             / (s["high_freq_factor"] - s["low_freq_factor"]))
    return (1 - blend) * freq / s["factor"] + blend * freq


@pytest.mark.parametrize("head_dim,base,scaling", [
    (64, 500000.0, {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 8192}),
    (128, 500000.0, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192}),
    (16, 10000.0, LLAMA3)])
def test_llama3_rope_frequencies_follow_the_formula(head_dim, base, scaling):
    got = ref.rope_frequencies(head_dim, base, scaling)
    want = torch.tensor([llama3_frequency(j, head_dim, base, scaling) for j in range(head_dim // 2)],
                        dtype=torch.float64)
    assert torch.allclose(got, want, rtol=1e-14, atol=0)
    plain = ref.rope_frequencies(head_dim, base)
    # All three bands occur at these settings: kept, divided by the factor, and blended in between.
    assert (got == plain).any() and torch.isclose(got, plain / scaling["factor"]).any()
    assert ((got < plain) & ~torch.isclose(got, plain / scaling["factor"])).any()


def test_rope_theta_lays_out_query_key_and_value_pairs():
    theta = ref.rope_theta(64, n_heads=4, base=100.0, n_kv_heads=2, rope_scaling=LLAMA3)
    per_head = ref.rope_frequencies(16, 100.0, LLAMA3).float()
    assert theta.shape == ((4 + 2 * 2) * 16 // 2,)
    assert torch.equal(theta[:32], per_head.repeat(4))       # Q: 4 heads of 8 pairs
    assert torch.equal(theta[32:48], per_head.repeat(2))     # K: 2 heads
    assert torch.equal(theta[48:], torch.zeros(16))          # V: not rotated


def test_unsupported_rope_scaling_is_refused():
    with pytest.raises(ValueError, match="yarn"):
        ref.rope_frequencies(64, 10000.0, {"rope_type": "yarn", "factor": 4.0})
    with pytest.raises(ValueError, match="invalid"):
        ref.rope_frequencies(64, 10000.0, {**LLAMA3, "low_freq_factor": 4.0, "high_freq_factor": 1.0})


# --- grouped-query attention and tied embeddings on the CPU -------------------------------------------------------

def test_reference_gqa_attention_is_mha_over_repeated_kv_heads():
    g = torch.Generator().manual_seed(0)
    b, s, nh, nkv, hd = 2, 5, 4, 2, 6
    qkv = torch.randn(b * s, (nh + 2 * nkv) * hd, generator=g, dtype=torch.float64)
    q, k, v = qkv.split((nh * hd, nkv * hd, nkv * hd), dim=1)
    expand = lambda t: t.view(b * s, nkv, 1, hd).expand(-1, -1, nh // nkv, -1).reshape(b * s, nh * hd)  # noqa: E731
    mha = torch.cat((q, expand(k), expand(v)), dim=1)
    assert torch.allclose(ref.attend(qkv, nh, s, n_kv_heads=nkv), ref.attend(mha, nh, s), rtol=1e-12, atol=1e-12)


def tiny(**kw):
    torch.manual_seed(0)
    model = ct.LlamaModel(vocab=64, d=32, n_layers=2, n_heads=4, ffn=40, dtype=torch.float64, **kw)
    on_grid(model)
    with torch.no_grad():
        for layer in model.layers:
            layer.attn_norm.add_(torch.randint(-16, 16, (32,)).double() / 64)
    return model


def batch(vocab=64, shape=(3, 7), seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, shape, generator=g), torch.randint(0, vocab, shape, generator=g)


def grads(model):
    return {name: (p.main_grad.double() if getattr(p, "main_grad", None) is not None else p.grad)
            for name, p in model.named_parameters()}


@pytest.mark.parametrize("kw", [
    dict(n_kv_heads=2),
    dict(n_kv_heads=1),
    dict(n_kv_heads=2, head_dim=6, rope_scaling=LLAMA3),
    dict(n_kv_heads=2, tie_embeddings=True),
    dict(n_kv_heads=2, tie_embeddings=True, store_logits=False),
], ids=["gqa2", "mqa", "head_dim6_llama3", "tied", "tied_logit_free"])
def test_model_matches_eager(kw):
    model = tiny(**kw)
    eager = copy.deepcopy(model)
    tokens, labels = batch()
    loss = model(tokens, labels)
    loss_ref = ref.model_loss(eager, tokens, labels)
    assert rel(loss, loss_ref) <= CHAINED
    loss.backward()
    loss_ref.backward()
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        assert rel(p.grad, q.grad) <= MODEL_GRAD, f"grad of {name}: {rel(p.grad, q.grad):.3g}"


def test_compile_fullgraph_traces_a_llama3_shaped_model():
    model = tiny(n_kv_heads=2, tie_embeddings=True, rope_scaling=LLAMA3, ignore_index=-100, shift_labels=True)
    eager = copy.deepcopy(model)
    tokens, _ = batch()
    loss = torch.compile(model, backend="aot_eager", fullgraph=True)(tokens, tokens)
    loss.backward()
    loss_ref = eager(tokens, tokens)
    loss_ref.backward()
    assert torch.equal(loss, loss_ref)
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        assert torch.equal(p.grad, q.grad), name


def test_layer_shapes_and_errors():
    layer = ct.LlamaDecoderLayer(64, 8, 96, n_kv_heads=2, dtype=torch.float64)
    assert tuple(layer.w_qkv.shape) == ((8 + 2 * 2) * 8, 64) and tuple(layer.w_o.shape) == (64, 64)
    layer = ct.LlamaDecoderLayer(64, 4, 96, n_kv_heads=2, head_dim=32, dtype=torch.float64)
    assert tuple(layer.w_qkv.shape) == (8 * 32, 64) and tuple(layer.w_o.shape) == (64, 128)
    with pytest.raises(ValueError, match="multiple of n_kv_heads"):
        ct.LlamaDecoderLayer(64, 8, 96, n_kv_heads=3)
    with pytest.raises(ValueError, match="even head_dim"):
        ct.LlamaDecoderLayer(60, 4, 96)
    with pytest.raises(ValueError, match="stand-in"):
        ct.LlamaDecoderLayer(64, 8, 96, n_kv_heads=2, attention="none")


def test_tied_embedding_gradient_is_the_sum_of_both_uses():
    tied = tiny(n_kv_heads=2, tie_embeddings=True)
    assert tied.head.weight is tied.embed.weight
    assert sum(p is tied.embed.weight for p in tied.parameters()) == 1  # one parameter for the optimizer
    untied = tiny(n_kv_heads=2)
    untied.load_state_dict(tied.state_dict())
    tokens, labels = batch()
    tied(tokens, labels).backward()
    untied(tokens, labels).backward()
    both = untied.embed.weight.grad + untied.head.weight.grad
    assert rel(tied.embed.weight.grad, both) <= 1e-12


@pytest.mark.parametrize("tie", [False, True])
def test_fp32_grad_accumulation_covers_the_embedding(tie):
    model = tiny(n_kv_heads=2, tie_embeddings=tie, fp32_grad_accumulation=True)
    plain = tiny(n_kv_heads=2, tie_embeddings=tie)
    plain.load_state_dict(model.state_dict())
    tokens, labels = batch()
    for _ in range(2):
        model(tokens, labels).backward()
    plain(tokens, labels).backward()
    for (name, p), q in zip(model.named_parameters(), plain.parameters()):
        if name.endswith("norm"):  # norm weights take their gradients as usual
            continue
        assert p.grad is None, f"{name}: the gradient went to .grad, not main_grad"
        assert rel(p.main_grad, 2 * q.grad) <= 1e-6, f"{name}.main_grad after two steps"


def test_shift_labels_scores_the_next_token_and_skips_the_last():
    model = tiny(n_kv_heads=2, ignore_index=-100, shift_labels=True)
    tokens, _ = batch()
    labels = tokens.clone()
    labels[0, 2] = -100
    shifted = torch.cat((labels[:, 1:], torch.full((3, 1), -100)), dim=1)
    plain = tiny(n_kv_heads=2, ignore_index=-100)
    assert rel(model(tokens, labels), plain(tokens, shifted)) <= 1e-12
    assert rel(model(tokens, labels), ref.model_loss(model, tokens, labels)) <= CHAINED
    with pytest.raises(ValueError, match="ignore_index"):
        tiny(shift_labels=True)


# --- Hugging Face ---------------------------------------------------------------------------------------------------

def hf_config(tie=False, **kw):
    transformers = pytest.importorskip("transformers")
    rope = {**LLAMA3, "rope_theta": 500.0}
    args = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                intermediate_size=48, rms_norm_eps=1e-5, tie_word_embeddings=tie, attn_implementation="eager")
    args.update(kw)
    try:
        return transformers.LlamaConfig(rope_parameters=rope, **args)
    except TypeError:  # transformers 4: the base in rope_theta, the rest in rope_scaling
        return transformers.LlamaConfig(rope_theta=500.0, rope_scaling=LLAMA3, **args)


def hf_model(config, dtype=torch.float64, device="cpu"):
    from transformers import LlamaForCausalLM
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(device=device, dtype=dtype)
    if dtype == torch.float64:
        on_grid(model, scale=256)
    return model


@pytest.mark.parametrize("tie", [False, True])
def test_hf_state_dict_round_trips(tie):
    hf = hf_model(hf_config(tie))
    model = ct.from_hf(hf)
    assert model.tie_embeddings == tie and model.layers[0].n_kv_heads == 2
    back = ct.to_hf_state_dict(model)
    original = hf.state_dict()
    assert set(back) == set(original)
    for key, value in original.items():
        assert torch.equal(back[key], value), key
    # And from a config plus a state dict (a checkpoint), without the model.
    again = ct.from_hf(hf.config, state_dict=back)
    for (name, p), q in zip(again.named_parameters(), model.parameters()):
        assert torch.equal(p, q), name


def test_hf_rope_permutation_is_the_one_huggingface_applies():
    # One head's Q row pair in coda's layout is HF's dimensions (j, j + hd/2): check on the weights themselves.
    hf = hf_model(hf_config())
    model = ct.from_hf(hf)
    hd = model.layers[0].head_dim
    q_hf = hf.model.layers[0].self_attn.q_proj.weight
    w_qkv = model.layers[0].w_qkv
    for j in range(hd // 2):
        assert torch.equal(w_qkv[2 * j], q_hf[j]) and torch.equal(w_qkv[2 * j + 1], q_hf[j + hd // 2])
    gate, up = hf.model.layers[0].mlp.gate_proj.weight, hf.model.layers[0].mlp.up_proj.weight
    assert torch.equal(model.layers[0].w_gate_up[0::2], gate) and torch.equal(model.layers[0].w_gate_up[1::2], up)


@pytest.mark.parametrize("tie", [False, True])
def test_hf_loss_and_gradients_match_huggingface(tie):
    hf = hf_model(hf_config(tie))
    model = ct.from_hf(hf)
    tokens, _ = batch()
    labels = tokens.clone()
    labels[1, 3] = -100
    loss_hf = hf(input_ids=tokens, labels=labels).loss
    loss = model(tokens, labels)
    assert rel(loss, loss_hf) <= CHAINED
    loss_hf.backward()
    loss.backward()
    ours = ct.hf.convert_to_hf({n: p.grad for n, p in model.named_parameters(remove_duplicate=False)}, model)
    for name, p in hf.named_parameters():
        assert rel(ours[name], p.grad) <= MODEL_GRAD, f"grad of {name}: {rel(ours[name], p.grad):.3g}"


def test_hf_configs_coda_cannot_run_are_refused():
    for kw, word in [(dict(attention_bias=True), "attention_bias"), (dict(hidden_act="gelu"), "hidden_act"),
                     (dict(mlp_bias=True), "mlp_bias")]:
        with pytest.raises(ValueError, match=word):
            ct.from_hf(hf_config(**kw))
    config = hf_config()
    yarn = {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0}
    setattr(config, "rope_parameters" if hasattr(config, "rope_parameters") else "rope_scaling", yarn)
    with pytest.raises(ValueError, match="yarn"):
        ct.from_hf(config)


# --- the GPU --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n_kv_heads", [4, 1])
@pytest.mark.usefixtures("poison")
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gqa_layer_matches_fp32_eager_on_the_gpu(n_kv_heads):
    torch.manual_seed(0)
    d, heads, ffn, b, s = 1024, 16, 2816, 2, 1024
    layer = ct.LlamaDecoderLayer(d, heads, ffn, n_kv_heads=n_kv_heads, rope_scaling={
        **LLAMA3, "original_max_position_embeddings": 256}, rope_base=500000.0, device="cuda")
    with torch.no_grad():
        layer.attn_norm.add_(0.1 * torch.randn_like(layer.attn_norm))
    x = torch.randn(b * s, d, device="cuda").bfloat16().requires_grad_()
    pos = torch.arange(s, device="cuda", dtype=torch.int32).repeat(b)
    gamma = (1 + 0.1 * torch.randn(d, device="cuda")).bfloat16()
    dy = torch.randn(b * s, d, device="cuda").bfloat16()
    h, rstd = torch.ops.coda.rms_stats(x.detach(), layer.attn_norm.detach(), 1e-5)
    out = layer(x, h, rstd, gamma, pos, s)[0]
    out.backward(dy)
    eager = copy.deepcopy(layer).float()
    x32 = x.detach().float().requires_grad_()
    out32 = ref.decoder_layer(eager, x32, pos, s)
    out32.backward(dy.float())
    assert rel(out, out32) <= 1e-2
    assert rel(x.grad, x32.grad) <= 3e-2
    for (name, p), q in zip(layer.named_parameters(), eager.parameters()):
        assert rel(p.grad, q.grad) <= 3e-2, f"grad of {name}: {rel(p.grad, q.grad):.3g}"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gqa_layer_step_launches_only_coda_and_attention_kernels():
    from test_torch_gpu import foreign_kernels
    torch.manual_seed(0)
    layer = ct.LlamaDecoderLayer(1024, 16, 2816, n_kv_heads=4, device="cuda")
    x = torch.randn(2048, 1024, device="cuda").bfloat16().requires_grad_()
    pos = torch.arange(1024, device="cuda", dtype=torch.int32).repeat(2)
    dy = torch.randn_like(x)

    def step():
        h, rstd = torch.ops.coda.rms_stats(x.detach(), layer.attn_norm.detach(), 1e-5)
        layer(x, h, rstd, layer.mlp_norm, pos, 1024)[0].backward(dy)

    step()
    torch.cuda.synchronize()
    # A second backward into existing gradients would add into them (AccumulateGrad's own kernel, not coda's).
    layer.zero_grad(set_to_none=True)
    x.grad = None
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    foreign = foreign_kernels(prof)
    assert not foreign, "kernels other than coda's and attention's:\n" + "\n".join(f"  {k}  [{op}]"
                                                                                   for k, op in foreign)


@pytest.mark.parametrize("tie", [False, True])
@pytest.mark.usefixtures("poison")
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_hf_model_matches_huggingface_on_the_gpu(tie):
    # A tiny random LlamaForCausalLM: coda (bf16, from_hf) and HF's bf16 eager model, each against HF in fp32.
    config = hf_config(tie, vocab_size=1024, hidden_size=256, num_hidden_layers=2, num_attention_heads=8,
                       num_key_value_heads=2, intermediate_size=704, attn_implementation="sdpa")
    hf32 = hf_model(config, torch.float32, "cuda")
    hf16 = copy.deepcopy(hf32).bfloat16()
    model = ct.from_hf(hf16)
    gen = torch.Generator(device="cuda").manual_seed(1)
    tokens = torch.randint(0, 1024, (4, 128), device="cuda", generator=gen)
    labels = tokens.clone()
    labels[:, :5] = -100
    loss32 = hf32(input_ids=tokens, labels=labels).loss
    loss16 = hf16(input_ids=tokens, labels=labels).loss
    loss = model(tokens, labels)
    print(f"loss: fp32 {loss32.item():.5f}, HF bf16 {loss16.item():.5f}, coda {loss.item():.5f}")
    assert abs(loss.item() - loss32.item()) <= 1e-2 * loss32.item()
    for t in (loss32, loss16, loss):
        t.backward()
    ours = ct.hf.convert_to_hf({n: p.grad for n, p in model.named_parameters(remove_duplicate=False)}, model)
    for (name, p32), p16 in zip(hf32.named_parameters(), hf16.parameters()):
        err, hf_err = rel(ours[name], p32.grad), rel(p16.grad, p32.grad)
        print(f"{name}: coda {err:.3g}, HF bf16 {hf_err:.3g}")
        assert err <= max(5e-2, 2 * hf_err), f"grad of {name}: coda {err:.3g}, HF bf16 {hf_err:.3g}"
