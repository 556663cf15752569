"""The tensorwise recipe's delayed scales on the CPU (coda.torch.fp8.Fp8Scaling and the layer that reads them): no
stale scale when several forwards run before their backwards, saturations and non-finite amaxes counted and reported,
and activation checkpointing under torch.compile giving the eager steps.

The schedule tests run the same micro-batches one after the other (each forward, then its backward) and in flight
(every forward, then the backwards), from an amax history set so that the two schedules must agree bit for bit: the
forward tensors' scales move after the first forward (a large amax leaves the history), which is what a stale scale
shows on, while the gradients' scales stay put (their history holds amaxes 4x the gradients', which no micro-batch
reaches, so its backward's records change nothing in either schedule). The same holds for the norm backwards' outputs,
which the backward quantizes for FP8 weight gradients."""
import warnings

import pytest

torch = pytest.importorskip("torch")

import coda.torch as ct  # noqa: E402
from coda.torch import fp8  # noqa: E402
from coda.torch.ops_fp8_layer import SLOTS  # noqa: E402
from fp8_support import grid  # noqa: E402

D, HEADS, FFN, SEQ, BATCH, EPS = 32, 2, 40, 8, 2, 1e-5
M = SEQ * BATCH
PARAMS = ("w_qkv", "w_o", "w_gate_up", "w_down", "attn_norm", "mlp_norm")
HISTORY = 8  # long enough that the gradients' headroom outlasts four micro-batches' updates
# The tensors the backward quantizes (under the scales the state holds when it runs): the gradients and, for FP8
# weight gradients, the norm backwards' outputs.
BACKWARD = ("dx2", "dz_mlp", "dx1", "dz_qkv", "o_mlp", "o_qkv")


def make_layer(fp8_wgrad):
    layer = ct.LlamaDecoderLayer(D, HEADS, FFN, eps=EPS, dtype=torch.float64, fp8="tensorwise", fp8_wgrad=fp8_wgrad,
                                 fp8_history=HISTORY)
    with torch.no_grad():
        for i, name in enumerate(PARAMS[:4]):
            w = getattr(layer, name)
            w.copy_(grid(*w.shape, seed=10 + i, scale=0.5))
        layer.attn_norm.copy_(1 + grid(D, seed=20, scale=0.5))
        layer.mlp_norm.copy_(1 + grid(D, seed=21, scale=0.5))
    return layer


class Entry:
    """What LlamaModel does before its first layer: h = x * gamma in e4m3 under its own delayed scale."""

    def __init__(self):
        self.scaling = fp8.Fp8Scaling({"h": "e4m3"}, history=1)

    def __call__(self, layer, x):
        self.scaling.update(M)
        h, rstd, amax = torch.ops.coda.rms_stats_fp8(x, layer.attn_norm.detach(), EPS, self.scaling.inv_scale("h"))
        self.scaling.record(amax)
        return h, rstd, self.scaling.scale("h")


def inputs(seed):
    pos = torch.arange(M, dtype=torch.int32) % SEQ
    return grid(M, D, seed=seed), pos, 1 + grid(D, seed=2, scale=0.5), grid(M, D, seed=seed + 1, scale=1.0 / M)


def forward(layer, entry, x0, pos, next_gamma):
    x = x0.clone().requires_grad_()
    h, rstd, h_scale = entry(layer, x)
    return layer(x, h, rstd, next_gamma, pos, SEQ, h_scale)[0]


def prepared(fp8_wgrad):
    """A layer and entry whose histories are set as the module docstring says, from one step's amaxes."""
    layer, entry = make_layer(fp8_wgrad), Entry()
    x0, pos, next_gamma, dy = inputs(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the priors' step saturates
        forward(layer, entry, x0, pos, next_gamma).backward(dy)
    amax = layer.fp8.state[fp8.AMAX].clone()
    backward = torch.tensor([name in BACKWARD for name in SLOTS])
    history = torch.zeros(HISTORY, len(SLOTS))
    history[:, backward] = 4 * amax[backward]
    history[HISTORY - 2, ~backward] = 4 * amax[~backward]  # leaves the history at the second update
    with torch.no_grad():
        layer.fp8.amax_history.copy_(history)
        layer.fp8.state[fp8.AMAX].zero_()
    layer.zero_grad(set_to_none=True)
    return layer, entry


def grads(layer):
    return [getattr(layer, name).grad.clone() for name in PARAMS]


def in_sequence(batches, fp8_wgrad):
    """Each micro-batch's forward, then its backward, one after the other."""
    layer, entry = prepared(fp8_wgrad)
    for x0, pos, next_gamma, dy in batches:
        forward(layer, entry, x0, pos, next_gamma).backward(dy)
    return grads(layer)


def in_flight(batches, order, fp8_wgrad):
    """Every micro-batch's forward first, then their backwards in `order` (indices into batches). Also returns
    whether a forward scale moved while the first micro-batch was in flight (what makes the test bite)."""
    layer, entry = prepared(fp8_wgrad)
    outs = []
    for x0, pos, next_gamma, _ in batches:
        outs.append(forward(layer, entry, x0, pos, next_gamma))
        if len(outs) == 1:
            first = layer.fp8.state[fp8.SCALE].clone()
    moved = not torch.equal(layer.fp8.state[fp8.SCALE, 0], first[0])  # attn_out's
    for i in order:
        outs[i].backward(batches[i][3])
    return grads(layer), moved


@pytest.mark.parametrize("fp8_wgrad", [False, True])
def test_two_forwards_then_one_backward_match_the_steps_one_after_the_other(fp8_wgrad):
    batches = [inputs(3), inputs(5)]
    sequential = in_sequence(batches, fp8_wgrad)
    layer, entry = prepared(fp8_wgrad)
    loss = sum((forward(layer, entry, x0, pos, g) * dy).sum() for x0, pos, g, dy in batches)
    loss.backward()
    for name, a, b in zip(PARAMS, grads(layer), sequential):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("order", [(0, 1, 2, 3), (3, 2, 1, 0)], ids=["in order", "reversed"])
@pytest.mark.parametrize("fp8_wgrad", [False, True])
def test_four_micro_batches_in_flight_match_the_steps_one_after_the_other(fp8_wgrad, order):
    # A pipeline schedule: four forwards (each moving the scales on), then the four backwards. Gradients of several
    # micro-batches add up in the order their backwards ran: equal up to that order's rounding.
    batches = [inputs(3 + 2 * i) for i in range(4)]
    sequential = in_sequence(batches, fp8_wgrad)
    pipelined, moved = in_flight(batches, order, fp8_wgrad)
    assert moved
    for name, a, b in zip(PARAMS, pipelined, sequential):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=0, msg=name)


def test_a_forward_keeps_the_scales_it_quantized_with_for_its_backward():
    # The scales a forward used are a copy: updates after it (another forward) leave that copy, and what the layer
    # returns as h's scale, as it was.
    layer, entry = prepared(True)
    x0, pos, next_gamma, _ = inputs(3)
    x = x0.clone().requires_grad_()
    h, rstd, h_scale = entry(layer, x)
    _, _, _, h2_scale = layer(x, h, rstd, next_gamma, pos, SEQ, h_scale)
    before = float(h2_scale)
    assert before == float(layer.fp8.scale("h_next"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            forward(layer, entry, grid(M, D, seed=9, scale=3.0), pos, next_gamma)
    assert float(layer.fp8.scale("h_next")) != before
    assert float(h2_scale) == before


# --- overflow that is seen ------------------------------------------------------------------------------------------

def test_saturations_and_non_finite_amaxes_are_counted():
    s = fp8.Fp8Scaling({"a": "e4m3", "g": "e5m2"}, history=4)
    s.update(tokens=64)  # priors: a 1, g 1/64
    s.record(torch.tensor([300.0, 57344.0 / 64]))  # both within scale * largest: nothing saturated
    s.update(tokens=64)
    assert float(s.state[fp8.SATURATED].sum()) == 0
    s.record(torch.tensor([300.0 * 2, 57344.0 / 64]))  # a's scale is 300 / 448 now: 600 passes it
    with pytest.warns(UserWarning, match=r"tensors of fp8 had values past their delayed scale.*: a \(e4m3, 1 step"):
        s.update(tokens=64)
    assert s.state[fp8.SATURATED].tolist() == [1.0, 0.0]
    scale_a = float(s.scale("a"))
    assert scale_a == pytest.approx(600 / 448)
    s.record(torch.tensor([float("nan"), float("inf")]))
    with pytest.warns(UserWarning, match="non-finite amax"):
        s.update(tokens=64)
    assert s.state[fp8.NONFINITE].tolist() == [1.0, 1.0]
    assert s.state[fp8.SATURATED].tolist() == [1.0, 0.0]  # a non-finite amax is not a saturation
    # Kept out of the history: the scales are those of the finite amaxes before, not frozen or infinite.
    assert torch.isfinite(s.amax_history).all()
    assert float(s.scale("a")) == scale_a and float(s.scale("g")) == pytest.approx(1 / 64)
    s.record(torch.tensor([900.0, 0.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a slot is warned about once
        s.update(tokens=64)
    assert s.state[fp8.SATURATED].tolist() == [2.0, 0.0]
    s.record(torch.tensor([1.0, 0.0]))
    s.update(tokens=64)
    assert float(s.scale("a")) == pytest.approx(900 / 448)  # the history's max, the NaN not among it


def test_stats_reports_every_scaled_tensor_by_its_module_path():
    torch.manual_seed(0)
    model = ct.LlamaModel(vocab=64, d=D, n_layers=2, n_heads=HEADS, ffn=FFN, dtype=torch.float64, fp8="tensorwise")
    tokens = torch.randint(0, 64, (BATCH, SEQ), generator=torch.Generator().manual_seed(5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            model(tokens, tokens).backward()
        with torch.no_grad():
            model.layers[0].w_down.mul_(1e4)  # the next layer's h grows past its calibrated scale
        model(tokens, tokens).backward()
    with pytest.warns(UserWarning, match=r"layers\.0\.fp8 had values past .*h_next \(e4m3"):
        model(tokens, tokens).backward()  # the update at its start counts the step before
    stats = fp8.stats(model)
    assert set(stats) == {"layers.0.fp8", "layers.1.fp8", "fp8_entry"}
    assert set(stats["layers.0.fp8"]) == set(ct.ops_fp8_layer.SLOTS)
    h_next = stats["layers.0.fp8"]["h_next"]
    assert h_next["format"] == "e4m3" and h_next["saturated_steps"] >= 1 and h_next["nonfinite_steps"] == 0
    assert h_next["scale"] == float(model.layers[0].fp8.scale("h_next"))


def test_a_state_saved_before_the_counts_loads():
    s = fp8.Fp8Scaling({"a": "e4m3"})
    old = {"state": torch.tensor([[2.0], [0.5], [3.0]]), "amax_history": torch.zeros(16, 1)}
    s.load_state_dict(old)
    assert s.state[:3].tolist() == [[2.0], [0.5], [3.0]] and s.state[3:].tolist() == [[0.0], [0.0]]


# --- activation checkpointing under torch.compile ---------------------------------------------------------------------

def test_checkpointed_layers_under_compile_take_the_eager_steps():
    # Dynamo will not trace a checkpointed tensorwise layer (its forward writes Python state, see
    # LlamaDecoderLayer._step_scales): the region runs eagerly, where the recomputation takes the first run's scales.
    # Traced, the recomputation read the state the update had written: other scales than the first run's. Three
    # micro-batches, so that the scales move between them.
    from test_torch_fp8_training import forward_checkpointed, micro_batches, restart

    torch.manual_seed(0)
    model = ct.LlamaModel(vocab=64, d=128, n_layers=2, n_heads=2, ffn=96, dtype=torch.float64, fp8="tensorwise",
                          fp8_wgrad=True)
    start = {k: v.clone() for k, v in model.state_dict().items()}

    def accumulate(step):
        restart(model, start)
        model.zero_grad(set_to_none=True)
        losses = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for tokens, labels in micro_batches(3, seed=8):
                loss = step(tokens, labels)
                loss.backward()
                losses.append(loss.item())
        states = [b.clone() for name, b in model.named_buffers() if name.endswith(("state", "amax_history"))]
        return losses, [p.grad.clone() for p in model.parameters()], states

    torch._dynamo.reset()
    eager = accumulate(model)
    compiled = accumulate(torch.compile(lambda t, l: forward_checkpointed(model, t, l), backend="aot_eager"))
    assert eager[0] == compiled[0]
    for a, b in zip(eager[1] + eager[2], compiled[1] + compiled[2]):
        assert torch.equal(a, b)
    # With fullgraph=True the refusal is Dynamo's error, which names the checkpointed forward's side effect.
    torch._dynamo.reset()
    whole = torch.compile(lambda t, l: forward_checkpointed(model, t, l), backend="aot_eager", fullgraph=True)
    tokens, labels = micro_batches(1, seed=8)[0]
    with pytest.raises(torch._dynamo.exc.Unsupported, match="checkpoint"):
        whole(tokens, labels)


def test_a_layer_with_scales_in_use_copies_and_pickles():
    # deepcopy and torch.save of a layer whose state has been looked at (its host copy) and whose forward is in flight.
    import copy
    import io

    layer, entry = prepared(True)
    x0, pos, next_gamma, dy = inputs(3)
    out = forward(layer, entry, x0, pos, next_gamma)
    twin = copy.deepcopy(layer)
    assert torch.equal(twin.fp8.state, layer.fp8.state) and len(twin._first_run_scales) == 0
    torch.save(layer, io.BytesIO())
    out.backward(dy)
