"""coda.torch's FP8 layers without state (fp8="blockwise", "rowwise", "tensorwise_current", each also with FP8 weight
gradients: fp8_wgrad) and their quantization on the CPU, where their graphs run through coda.reference: against eager
emulations of the same recipes (reference.fp8_blockwise_decoder_layer, fp8_rowwise_decoder_layer,
fp8_tensorwise_current_decoder_layer: every GEMM operand rounded to e4m3 under its own blocks', rows' or whole
tensor's scale), against the bf16 layer, and the scales' layouts.

The sizes make several groups everywhere: d = 256 (two 128-column groups), QKV 768 wide, SwiGLU's y 160 (a group of
128 and one cut at 32) and dz 320 (groups of 256: one whole, one cut at 64). The tolerances come from the same
effect as the tensorwise layer's (test_torch_fp8_layer.py: bf16 roundings that cross an FP8 rounding boundary grow).
Measured (2026-12-07): the forward within 0.9% of the emulation (h2 2.1%), the gradients within 9.4% (bf16 layer:
12.7%), each tolerance at most twice that; given the same inputs, a block-scaled GEMM matches the emulation to
1e-7. The bugs they are for (a scale of the wrong row or block, a transposed scale matrix, a lost group) are off by the ratio of two blocks' amax, up to 5x for the weights' and 100x
for the activations' here."""
import copy

import pytest

torch = pytest.importorskip("torch")

import coda.torch as ct  # noqa: E402
from coda.torch import fp8, fp8_recipes  # noqa: E402
from coda.torch import reference as ref  # noqa: E402
from fp8_support import grid, rel, train_side_by_side  # noqa: E402

D, HEADS, FFN, SEQ, BATCH, EPS = 256, 2, 160, 8, 2, 1e-5
M = SEQ * BATCH
NAMES = ("dx", "dw_qkv", "dw_o", "dw_gate_up", "dw_down", "d_attn_norm", "d_mlp_norm")
# The recipes whose scales come from each tensor's own blocks, rows or whole: no state.
FINE = ("blockwise", "rowwise", "tensorwise_current")


def spread(t, seed, rows=4.6, cols=2.0, row_block=1):
    # Magnitudes that differ from row to row (or from one `row_block` of rows to the next) by up to e^rows and from one
    # 128-column group to the next by up to e^cols, so that a scale read from the wrong row, group or block shows.
    g = torch.Generator().manual_seed(seed)
    n_rows, n_cols = t.shape
    row = torch.exp(torch.rand(-(-n_rows // row_block), 1, generator=g) * rows).repeat_interleave(row_block, 0)
    col = torch.exp(torch.rand(1, -(-n_cols // 128), generator=g) * cols).repeat_interleave(128, 1)
    return t * row[:n_rows] * col[:, :n_cols]


def make_layer(attention="sdpa", recipe="blockwise", fp8_wgrad=False):
    layer = ct.LlamaDecoderLayer(D, HEADS, FFN, eps=EPS, attention=attention, dtype=torch.float64, fp8=recipe,
                                 fp8_wgrad=fp8_wgrad)
    with torch.no_grad():
        for i, w in enumerate((layer.w_qkv, layer.w_o, layer.w_gate_up, layer.w_down)):
            # Blocks of different magnitudes (x1 to x10 by row and by column), so that a weight's scales read
            # transposed (its forward ones in a dgrad) show.
            w.copy_(spread(grid(*w.shape, seed=10 + i, scale=0.5), 50 + i, 1.6, 1.6, 128) / w.shape[1] ** 0.5)
        layer.attn_norm.copy_(1 + grid(D, seed=20, scale=0.5))
        layer.mlp_norm.copy_(1 + grid(D, seed=21, scale=0.5))
    return layer


def inputs():
    pos = (torch.arange(M, dtype=torch.int32) % SEQ)
    return spread(grid(M, D, seed=1), 4), pos, 1 + grid(D, seed=2, scale=0.5), grid(M, D, seed=3, scale=1.0 / M)


def dequantize(q, scales):
    """q [M x N] (e4m3) times its scales: a group's [ceil(N / 128) x M] or a row's [M]."""
    if scales.dim() == 1:
        return q.double() * scales.double()[:, None]
    per_element = scales.t().double().repeat_interleave(fp8.BLOCK, 1)[:, :q.shape[1]]
    return q.double() * per_element


def emulated(recipe):
    """(the layer's emulation, how it rounds an A operand) of a recipe."""
    if recipe == "blockwise":
        return ref.fp8_blockwise_decoder_layer, ref.fp8_group_round
    if recipe == "tensorwise_current":
        return ref.fp8_tensorwise_current_decoder_layer, ref.fp8_tensor_round
    return ref.fp8_rowwise_decoder_layer, ref.fp8_row_round


def rms_stats(recipe, x, gamma):
    return torch.ops.coda.rms_stats_fp8(x, gamma, EPS, None, recipe)


def run_layer(layer, x0, pos, next_gamma, dy):
    x = x0.clone().requires_grad_()
    h, rstd, h_scale = rms_stats(layer.fp8_recipe, x, layer.attn_norm.detach())
    x2, h2, rstd2, h2_scale = layer(x, h, rstd, next_gamma, pos, SEQ, h_scale)
    x2.backward(dy)
    grads = [x.grad] + [p.grad for p in (layer.w_qkv, layer.w_o, layer.w_gate_up, layer.w_down, layer.attn_norm,
                                          layer.mlp_norm)]
    return x2.detach(), dequantize(h2, h2_scale), grads


def test_weight_quantization_has_a_scale_per_128_by_128_block():
    w = spread(grid(300, 260, seed=30), 31).bfloat16()  # a weight as the layers hold it (the kernels read bf16)
    w[128:256, 128:256] = 0  # an all-zero block: the smallest scale, zeros
    q, scale, q_t, scale_t = fp8.quantize_weight_blockwise(w)
    w = w.double()
    assert q.dtype == torch.float8_e4m3fn and tuple(q.shape) == (300, 260)
    assert tuple(scale.shape) == (3, 3) and scale.dtype == torch.float32
    assert torch.equal(q_t.view(torch.uint8), q.t().contiguous().view(torch.uint8)) and torch.equal(scale_t, scale.t())
    for i in range(3):
        for j in range(3):
            block = w[128 * i:128 * (i + 1), 128 * j:128 * (j + 1)]
            assert float(scale[i, j]) == pytest.approx(max(float(block.abs().max()) / 448, fp8.SMALLEST_SCALE),
                                                       rel=1e-6)
    assert float(scale[1, 1]) == fp8.SMALLEST_SCALE and not q.double()[128:256, 128:256].any()
    dequantized = q.double() * scale.double().repeat_interleave(128, 0)[:300].repeat_interleave(128, 1)[:, :260]
    assert torch.allclose(dequantized, ref.fp8_weight_block_round(w), rtol=1e-6, atol=0)
    # e4m3 keeps 3 bits: every element within 1/16 of itself, every block's amax exact.
    assert ((dequantized - w).abs() <= w.abs() / 16 + 1e-30).all()


def test_activations_are_quantized_by_row_group_and_their_scales_are_an_a_scale():
    x = spread(grid(M, 300, seed=40), 41).bfloat16().double()  # the graph reads bf16: these values exactly
    q, scales = fp8.quantize_blockwise(x)
    assert q.dtype == torch.float8_e4m3fn and tuple(scales.shape) == (3, M) and scales.dtype == torch.float32
    for g0 in range(3):
        group = x[:, 128 * g0:128 * (g0 + 1)]
        assert torch.allclose(scales[g0].double(), group.abs().amax(1) / 448, rtol=1e-6)
    assert rel(dequantize(q, scales), ref.fp8_group_round(x)) < 1e-6
    # The scales feed a block-scaled GEMM as they are: q @ w^T under both sets of scales is the emulated product.
    w = spread(grid(256, 300, seed=42), 43).bfloat16()
    w_q, w_scale, _, _ = fp8.quantize_weight_blockwise(w)
    w = w.double()
    out = torch.ops.coda.scaled_mm(q, w_q.t(), scales.t(), w_scale, blockwise=True)
    expected = ref.fp8_group_round(x) @ ref.fp8_weight_block_round(w).t()
    assert rel(out, expected) < 0.01  # out is bf16


def test_activations_read_transposed_are_quantized_per_feature_and_128_tokens_in_one_pass():
    # quantize_blockwise_t(x) is quantize_blockwise(x.t()): x [T x F] read transposed by the tile program, so its
    # groups run along the tokens (300: groups of 128, 128 and 44), one scale per feature each.
    x = spread(grid(300, M, seed=44), 45).bfloat16().double()
    q, scales = fp8.quantize_blockwise_t(x)
    assert q.dtype == torch.float8_e4m3fn and tuple(q.shape) == (M, 300) and tuple(scales.shape) == (3, M)
    q_ref, scales_ref = fp8.quantize_blockwise(x.t().contiguous())
    assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8)) and torch.equal(scales, scales_ref)
    for g0 in range(3):
        group = x[128 * g0:128 * (g0 + 1), :]
        assert torch.allclose(scales[g0].double(), group.abs().amax(0) / 448, rtol=1e-6)


def test_rowwise_weights_have_a_scale_per_row_and_one_per_column_and_activations_one_per_row():
    w = spread(grid(300, 260, seed=60), 61).bfloat16()  # a weight as the layers hold it (the kernels read bf16)
    q, row, q_t, col = fp8.quantize_weight_rowwise(w)
    w = w.double()
    assert (q.dtype, tuple(q.shape), tuple(row.shape)) == (torch.float8_e4m3fn, (300, 260), (300,))
    assert (q_t.dtype, tuple(q_t.shape), tuple(col.shape)) == (torch.float8_e4m3fn, (260, 300), (260,))
    assert q_t.is_contiguous() and row.dtype == col.dtype == torch.float32
    assert torch.allclose(row.double(), w.abs().amax(1) / 448, rtol=1e-6)
    assert torch.allclose(col.double(), w.abs().amax(0) / 448, rtol=1e-6)
    # Against the emulation, and every element within e4m3's 1/16 of itself. The kernels multiply by the scale's f32
    # reciprocal: a bf16 weight over its row's amax often lands on an e4m3 rounding boundary, which that reciprocal's
    # rounding tips one way or the other, so the emulation multiplies by it too (in f64: an element whose f32 product
    # sits on a boundary may still round the other way).
    for got, scale, exact in ((q, row, w), (q_t, col, w.t())):
        inv = (1.0 / scale).double()[:, None]
        emulated = (exact * inv).clamp(-448, 448).to(torch.float8_e4m3fn).double() * scale.double()[:, None]
        deq = got.double() * scale.double()[:, None]
        assert rel(deq, emulated) < 1e-3
        assert rel(deq, ref.fp8_row_round(exact)) < 4e-3  # the boundary cases
        assert ((deq - exact).abs() <= exact.abs() / 16 + 1e-30).all()
    # An activation by rows (coda.blocks.quantize_e4m3_rowwise) and the row-wise scaled_mm of the two.
    x = spread(grid(M, 260, seed=62), 63).bfloat16().double()  # the graph reads bf16: these values exactly
    scale, inv = fp8.row_scales(x.abs().amax(1)[None, :])
    x_q = fp8.quantize_rowwise(x, inv)
    assert rel(x_q.double() * scale.double()[:, None], ref.fp8_row_round(x)) < 1e-6
    out = torch.ops.coda.scaled_mm(x_q, q.t(), scale[:, None], row[None, :])
    assert rel(out, ref.fp8_row_round(x) @ ref.fp8_row_round(w).t()) < 0.01  # out is bf16


def test_tensorwise_current_scales_each_tensor_by_its_own_amax():
    # One scale per tensor, its largest row's: the row-wise recipe's largest, in every row of h_scale; the same for a
    # weight's scales both ways and for a weight gradient's operand; and the values as the emulation rounds them (of
    # the inputs as the graphs read them, in bf16).
    x0, _, gamma, dy = inputs()
    h, _, h_scale = rms_stats("tensorwise_current", x0, gamma)
    assert torch.all(h_scale == rms_stats("rowwise", x0, gamma)[2].max())
    assert rel(dequantize(h, h_scale), ref.fp8_tensor_round(bf16(x0) * gamma)) < 1e-6
    recipe = fp8_recipes.TensorwiseCurrent(True)
    w = bf16(spread(grid(300, 260, seed=30), 31))
    (q, scale), (q_t, scale_t) = recipe.weight(w)
    largest = w.abs().max() / 448
    assert torch.allclose(scale.double(), largest.expand(300), rtol=1e-6)
    assert torch.allclose(scale_t.double(), largest.expand(260), rtol=1e-6)
    assert rel(dequantize(q, scale), ref.fp8_tensor_round(w)) < 1e-6
    assert rel(dequantize(q_t, scale_t), ref.fp8_tensor_round(w).t()) < 1e-6
    q_dy, scale_dy = recipe.wgrad_operand(dy)
    assert torch.all(scale_dy == scale_dy[0])
    assert rel(dequantize(q_dy, scale_dy), ref.fp8_tensor_round(bf16(dy)).t()) < 1e-6


def bf16(t):
    return t.bfloat16().double()


# (recipe, fp8_wgrad): the fine recipes, each also with FP8 weight gradients.
VARIANTS = [(recipe, fp8_wgrad) for recipe in FINE for fp8_wgrad in (False, True)]


@pytest.mark.parametrize("recipe, fp8_wgrad", VARIANTS)
@pytest.mark.parametrize("attention", ["sdpa", "none"])
def test_layer_matches_the_recipe_emulated(attention, recipe, fp8_wgrad):
    layer = make_layer(attention, recipe, fp8_wgrad)
    x0, pos, next_gamma, dy = inputs()
    x2, h2, grads = run_layer(layer, x0, pos, next_gamma, dy)
    x = x0.clone().requires_grad_()
    emulation, operand = emulated(recipe)
    x2_ref = emulation(layer, x, pos, SEQ, fp8_wgrad=True) if fp8_wgrad else emulation(layer, x, pos, SEQ)
    grads_ref = torch.autograd.grad(x2_ref, [x, layer.w_qkv, layer.w_o, layer.w_gate_up, layer.w_down,
                                             layer.attn_norm, layer.mlp_norm], dy)
    assert rel(x2, x2_ref) < 0.018
    # h2 is the next layer's e4m3 operand, with its own row groups' (rows') scales.
    assert rel(h2, operand(x2_ref.detach() * next_gamma)) < 0.04
    for name, g, g_ref in zip(NAMES, grads, grads_ref):
        assert rel(g, g_ref) < 0.15, name


@pytest.mark.parametrize("recipe", FINE)
def test_layer_is_close_to_the_bf16_layer(recipe):
    layer = make_layer(recipe=recipe)
    x0, pos, next_gamma, dy = inputs()
    x2, _, grads = run_layer(layer, x0, pos, next_gamma, dy)
    x = x0.clone().requires_grad_()
    x2_ref = ref.decoder_layer(layer, x, pos, SEQ)
    grads_ref = torch.autograd.grad(x2_ref, [x, layer.w_qkv, layer.w_o, layer.w_gate_up, layer.w_down,
                                             layer.attn_norm, layer.mlp_norm], dy)
    assert rel(x2, x2_ref) < 0.022
    for name, g, g_ref in zip(NAMES, grads, grads_ref):
        assert rel(g, g_ref) < 0.2, name


def test_rowwise_fp8_weight_gradients_quantize_each_column_and_match_their_emulation():
    # The operands dY [M x N] and X [M x K] with columns of magnitudes 1 to 100 (spread's row factors, transposed): a
    # scale read for the wrong column is off by up to 100x.
    rowwise = fp8_recipes.Rowwise(True)
    dy = spread(grid(300, M, seed=70), 71).t().contiguous()
    x = spread(grid(260, M, seed=73), 74).t().contiguous()
    dy, x = dy.bfloat16().double(), x.bfloat16().double()  # the quantize program reads bf16: these values exactly
    q_t, scale = rowwise.wgrad_operand(dy)
    assert (q_t.dtype, tuple(q_t.shape), tuple(scale.shape)) == (torch.float8_e4m3fn, (300, M), (300,))
    assert torch.allclose(scale.double(), dy.abs().amax(0) / 448, rtol=1e-6)
    # Against the emulation in f64 (an element whose f32 quotient sits on a rounding boundary may round the other
    # way: 1e-3 of the norm, as for the weights above).
    assert rel(q_t.double() * scale.double()[:, None], ref._block_round(dy, 0).t()) < 2e-3
    expected = ref._block_round(dy, 0).t() @ ref._block_round(x, 0)
    buffer = torch.zeros(300, 260, dtype=torch.float32)
    assert rowwise.wgrad(dy, x, buffer, dy).numel() == 0
    assert rel(buffer, expected) < 2e-3
    assert rel(rowwise.wgrad(dy, x, None, dy), expected) < 5e-3  # bf16
    print(f"FP8 rounding of dW: {rel(expected, dy.t() @ x):.2e}")
    assert rel(expected, dy.t() @ x) > 1e-2  # what these checks tell apart from the exact product


def test_blockwise_fp8_weight_gradients_quantize_each_column_in_groups_of_128_tokens():
    # dY [M x N] and X [M x K] at M = 300 tokens (groups of 128, 128 and 44), each column's groups of magnitudes 1 to
    # 100 (spread's factors, transposed): a scale read for the wrong column or the wrong group of tokens is off by up
    # to 100x. Against the emulation (reference._Blockwise.weight_gradient): q(dY^T) q(X^T)^T.
    blockwise = fp8_recipes.Blockwise(True)
    dy = spread(grid(300, 300, seed=80), 81, rows=4.6, cols=4.6).t().contiguous()
    x = spread(grid(260, 300, seed=82), 83, rows=4.6, cols=4.6).t().contiguous()
    dy, x = dy.bfloat16().double(), x.bfloat16().double()  # the quantize program reads bf16: these values exactly
    expected = ref.fp8_group_round(dy.t()) @ ref.fp8_group_round(x.t()).t()
    buffer = torch.zeros(300, 260, dtype=torch.float32)
    assert blockwise.wgrad(dy, x, buffer, dy).numel() == 0
    # The program multiplies by the scale's f32 reciprocal where the emulation divides: values near a rounding
    # boundary round the other way, and with magnitudes 100x apart a few such terms move dW by 5e-3 of its norm.
    print(f"dW against the emulation: {rel(buffer, expected):.2e}")
    assert rel(buffer, expected) < 1e-2
    assert rel(blockwise.wgrad(dy, x, None, dy), expected) < 1e-2  # stored in the activations' dtype
    print(f"FP8 rounding of dW: {rel(expected, dy.t() @ x):.2e}")
    assert rel(expected, dy.t() @ x) > 1e-2  # what these checks tell apart from the exact product
    # Without fp8_wgrad, the exact product (bf16 weight gradients).
    assert rel(fp8_recipes.Blockwise(False).wgrad(dy, x, None, dy), dy.t() @ x) < 1e-12


def test_rowwise_fp8_weight_gradients_need_tokens_in_sixteens():
    layer = make_layer("sdpa", "rowwise", True)
    x0, pos, next_gamma, _ = inputs()
    m = 12
    h, rstd, h_scale = rms_stats("rowwise", x0[:m], layer.attn_norm.detach())
    with pytest.raises(ValueError, match="M = 12 tokens is not a multiple of 16"):
        layer(x0[:m], h, rstd, next_gamma, pos[:m], 4, h_scale)


def test_rowwise_fp8_weight_gradients_are_the_gemms_a_step_launches():
    # What the layer runs for its weight gradients (a dry run: every coda launch recorded, none made): FP8 GEMMs of
    # each weight's shape, over the tokens, and no bf16 ones.
    from coda.torch import _kernels
    x0, pos, next_gamma, dy = inputs()
    for fp8_wgrad in (False, True):
        layer = make_layer("sdpa", "rowwise", fp8_wgrad)
        launches = _kernels.record_launches(lambda: run_layer(layer, x0, pos, next_gamma, dy))
        names = {launch[0] for launch in launches}
        weights = [tuple(w.shape) for w in (layer.w_qkv, layer.w_o, layer.w_gate_up, layer.w_down)]
        fp8_wgrads = {(n, k) for name, n, k, m in launches if name == "dgrad_fp8_rowwise" and m == M}
        assert (fp8_wgrads == set(weights)) == fp8_wgrad
        # (The weights' transposed copies come from the same tile program, over their rows, not the tokens.)
        activations_t = {n for name, m, n, _ in launches if name == "quantize_e4m3_colwise_t" and m == M}
        assert bool(activations_t) == fp8_wgrad
        assert ("wgrad_store" in names) != fp8_wgrad


@pytest.mark.parametrize("recipe, fp8_wgrad", VARIANTS)
def test_model_in_fp8_tracks_bf16_and_trains(recipe, fp8_wgrad):
    torch.manual_seed(0)
    kw = dict(vocab=64, d=D, n_layers=2, n_heads=HEADS, ffn=FFN, dtype=torch.float64)
    model = ct.LlamaModel(**kw, fp8=recipe, fp8_wgrad=fp8_wgrad)
    base = ct.LlamaModel(**kw)
    base.load_state_dict(model.state_dict())  # no FP8 state: the same keys
    tokens = torch.randint(0, 64, (BATCH, SEQ), generator=torch.Generator().manual_seed(5))
    labels = torch.randint(0, 64, (BATCH, SEQ), generator=torch.Generator().manual_seed(6))
    # lr: slow enough that the losses stay of order 1.
    losses = train_side_by_side({"fp8": model, "bf16": base}, tokens, labels, 3e-4, 8, torch.optim.AdamW)
    assert losses["fp8"][-1] < losses["fp8"][0] - 0.3  # it learns (the same batch, memorized)
    for a, b in zip(losses["fp8"], losses["bf16"]):
        assert abs(a - b) < 0.05 * b


@pytest.mark.parametrize("recipe, shape, text", [("blockwise", (2, M), r"\[2 x 16\]"), ("rowwise", (M,), r"\[16\]"),
                                                  ("tensorwise_current", (M,), r"\[16\]")])
def test_layer_checks_h_and_its_scales(recipe, shape, text):
    layer = make_layer(recipe=recipe)
    x0, pos, next_gamma, _ = inputs()
    h, rstd, h_scale = rms_stats(recipe, x0, layer.attn_norm.detach())
    assert tuple(h_scale.shape) == shape and h.dtype == torch.float8_e4m3fn
    with pytest.raises(ValueError, match="h_scale"):
        layer(x0, h, rstd, next_gamma, pos, SEQ)
    with pytest.raises(ValueError, match="float8_e4m3fn"):
        layer(x0, h.double(), rstd, next_gamma, pos, SEQ, h_scale)
    with pytest.raises(ValueError, match=text):
        layer(x0, h, rstd, next_gamma, pos, SEQ, torch.tensor(1.0))  # a tensorwise scale
    assert layer.fp8 is None  # no state: every scale is its own block's or row's


@pytest.mark.parametrize("recipe", FINE)
def test_hugging_face_llama_in_fp8(recipe):
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=256, num_hidden_layers=2, num_attention_heads=2,
                                      num_key_value_heads=1, intermediate_size=160, rms_norm_eps=1e-5,
                                      tie_word_embeddings=True, attn_implementation="eager")
    torch.manual_seed(0)
    hf = transformers.LlamaForCausalLM(config).to(torch.float64)
    model = ct.from_hf(hf, fp8=recipe)
    assert model.layers[0].n_kv_heads == 1 and model.layers[0].fp8_recipe == recipe
    tokens = torch.randint(0, 64, (BATCH, SEQ), generator=torch.Generator().manual_seed(7))
    expected = float(hf(input_ids=tokens, labels=tokens).loss)
    loss = model(tokens, tokens)
    loss.backward()
    assert abs(loss.item() - expected) < 0.02 * expected


@pytest.mark.parametrize("recipe, fp8_wgrad", VARIANTS + [("tensorwise", False)])
def test_compile_fullgraph_traces_the_fp8_models(recipe, fp8_wgrad):
    # aot_eager traces forward and backward through the FP8 ops' fake kernels with no graph break (both recipes: the
    # tensorwise scales' update too), and gives eager's losses and gradients, two steps running. (Other tests'
    # compiles of the same forward count against Dynamo's recompile limit: start afresh.)
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = ct.LlamaModel(vocab=64, d=D, n_layers=2, n_heads=HEADS, ffn=FFN, dtype=torch.float64, fp8=recipe,
                          fp8_wgrad=fp8_wgrad)
    eager = copy.deepcopy(model)
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    tokens = torch.randint(0, 64, (BATCH, SEQ), generator=torch.Generator().manual_seed(3))
    for _ in range(2):
        for m in (model, eager):
            m.zero_grad()
        loss = compiled(tokens, tokens)
        loss.backward()
        loss_ref = eager(tokens, tokens)
        loss_ref.backward()
        assert float(loss) == float(loss_ref)
        for p, q in zip(model.parameters(), eager.parameters()):
            assert torch.equal(p.grad, q.grad)


# --- on the GPU: the same checks through the kernels ---

GPU = dict(d=512, heads=4, ffn=704, seq=128, batch=2)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("recipe, fp8_wgrad", VARIANTS)
@pytest.mark.parametrize("attention", ["sdpa", "none"])
def test_layer_on_the_gpu_matches_the_recipe_emulated(attention, recipe, fp8_wgrad, poison):
    d, seq, m = GPU["d"], GPU["seq"], GPU["seq"] * GPU["batch"]
    torch.manual_seed(0)
    layer = ct.LlamaDecoderLayer(d, GPU["heads"], GPU["ffn"], eps=EPS, attention=attention, device="cuda",
                                 fp8=recipe, fp8_wgrad=fp8_wgrad)
    g = torch.Generator(device="cuda").manual_seed(1)
    x0 = torch.randn(m, d, device="cuda", generator=g).bfloat16()
    dy = (torch.randn(m, d, device="cuda", generator=g) / m).bfloat16()
    pos = torch.arange(seq, device="cuda", dtype=torch.int32).repeat(GPU["batch"])
    next_gamma = torch.ones(d, device="cuda", dtype=torch.bfloat16)
    x = x0.clone().requires_grad_()
    h, rstd, h_scale = rms_stats(recipe, x, layer.attn_norm.detach())
    x2, h2, _, h2_scale = layer(x, h, rstd, next_gamma, pos, seq, h_scale)
    x2.backward(dy)
    params = [layer.w_qkv, layer.w_o, layer.w_gate_up, layer.w_down, layer.attn_norm, layer.mlp_norm]
    grads = [x.grad] + [p.grad for p in params]
    ref_layer = copy.deepcopy(layer).float()
    xr = x0.float().requires_grad_()
    emulation, operand = emulated(recipe)
    x2_ref = emulation(ref_layer, xr, pos, seq, fp8_wgrad=True) if fp8_wgrad else emulation(ref_layer, xr, pos, seq)
    ref_params = [ref_layer.w_qkv, ref_layer.w_o, ref_layer.w_gate_up, ref_layer.w_down, ref_layer.attn_norm,
                  ref_layer.mlp_norm]
    grads_ref = torch.autograd.grad(x2_ref, [xr] + ref_params, dy.float())
    assert torch.isfinite(x2).all() and all(torch.isfinite(g_).all() for g_ in grads)
    # Measured on an H100 (2026-12-07): x2 within 2.0%, every gradient within 5.7% (rowwise's d_attn_norm); the
    # tolerances are at most twice that.
    assert rel(x2, x2_ref) < 0.04
    assert rel(dequantize(h2.cpu(), h2_scale.cpu()), operand(x2_ref.detach() * next_gamma.float()).cpu()) < 0.06
    print(f"{recipe} {attention} fp8_wgrad={fp8_wgrad}: x2 {rel(x2, x2_ref):.3f}, "
          + ", ".join(f"{name} {rel(g_, g_ref):.3f}" for name, g_, g_ref in zip(NAMES, grads, grads_ref)))
    for name, g_, g_ref in zip(NAMES, grads, grads_ref):
        assert rel(g_, g_ref) < 0.11, name


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("shape", [(4096, 1024), (1024, 264), (1000, 130)])
def test_transposed_blockwise_quantization_on_the_gpu_is_the_two_pass_one_bitwise(shape, poison):
    # The tile program that reads x [T x F] transposed, staged through shared memory where every row moves in 16-byte
    # units (4096 x 1024; 1024 x 264, whose last tile has 8 features), direct where the output's rows of T bytes do
    # not (1000 x 130), against torch's transpose and quantize_blockwise: the same arithmetic, so the same bytes and
    # scales. Outputs poisoned (NaN) first.
    g = torch.Generator(device="cuda").manual_seed(11)
    x = spread(torch.randn(*shape, device="cuda", generator=g).cpu(), 80, 3.0, 1.0, 1).cuda().bfloat16()
    q, scales = fp8.quantize_blockwise_t(x)
    q_ref, scales_ref = fp8.quantize_blockwise(x.t().contiguous())
    assert q.shape == (shape[1], shape[0]) and scales.shape == (-(-shape[0] // 128), shape[1])
    assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))
    assert torch.equal(scales, scales_ref)


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("shape", [(384, 640), (300, 260)])
def test_weight_block_quantization_on_the_gpu_is_the_product_by_the_reciprocal_and_its_transpose(shape, poison):
    # The kernels' arithmetic exactly: w (bf16) times 1 / scale in f32, rounded to e4m3; the transposed copy (the tile
    # program transpose_e4m3, poisoned first) the same bytes. (300 x 260: blocks cut at both edges.)
    g = torch.Generator(device="cuda").manual_seed(7)
    w = spread(torch.randn(*shape, device="cuda", generator=g).cpu(), 70, 1.6, 1.6, 128).cuda().bfloat16()
    q, scale, q_t, scale_t = fp8.quantize_weight_blockwise(w)
    n, k = shape
    nb, kb = -(-n // 128), -(-k // 128)
    blocks = torch.nn.functional.pad(w.float(), (0, kb * 128 - k, 0, nb * 128 - n)).view(nb, 128, kb, 128)
    amax = blocks.abs().amax(dim=(1, 3))
    assert torch.equal(scale, (amax * torch.tensor(1 / 448, dtype=torch.float32)).clamp_min(fp8.SMALLEST_SCALE))
    expected = (blocks * (1 / scale)[:, None, :, None]).view(nb * 128, kb * 128)[:n, :k].to(torch.float8_e4m3fn)
    assert q.shape == (n, k) and torch.equal(q.view(torch.uint8), expected.view(torch.uint8))
    assert q_t.shape == (k, n) and q_t.is_contiguous()
    assert torch.equal(q_t.view(torch.uint8), q.t().contiguous().view(torch.uint8))
    assert torch.equal(scale_t, scale.t())
