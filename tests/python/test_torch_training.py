"""coda.torch inside PyTorch's training machinery: activation checkpointing, DDP and FSDP2 (in one process, and in
two under torchrun), and torch.compile with fp32_grad_accumulation. Each runs against the same model without the
wrapper, on the same random batch.

On the CPU (float64 through coda.reference, tiny shapes) a wrapper adds no arithmetic in one process, so losses and
gradients are compared bitwise; two ranks average their gradients in another order than one process sums them
(1e-12). On the GPU (marked gpu) the model is bf16 and also checked against fp32 eager with test_torch_gpu.py's
tolerances (loss 1e-2, gradients 5e-2), every coda output poisoned (NaN) before each launch; against the unwrapped
bf16 model the same kernels run on the same inputs, so that comparison is bitwise, as test_torch_gpu.py's CUDA-graph
and reduce-overhead tests assume of the same model.

These tests found library problems, now fixed, each with a test here: LlamaModel.forward read a norm weight outside
its FSDP2 unit (sharded there; and an autograd edge from outside delayed its gradient past the unit's reduce-scatter),
and the CPU path made parameter storage non-resizable (which FSDP2 resizes). fp32 gradient accumulation, once an
error under torch.compile, now runs there: its buffers exist before the compiled step."""
import contextlib
import copy
import os
import signal
import subprocess
import sys

import pytest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

torch = pytest.importorskip("torch")
dist = torch.distributed

from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402
from torch.distributed.tensor import DTensor  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

import coda  # noqa: E402
import coda.torch as ct  # noqa: E402
from coda.torch import reference as ref  # noqa: E402

import torch_fsdp_worker as worker  # noqa: E402  (tests/python is on sys.path under pytest)

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_fsdp_worker.py")
TWO_RANKS_TIMEOUT_S = 240  # torchrun, two imports of torch and coda, two steps; GPU ranks also compile kernels
TWO_RANKS_TOL = 1e-12
LOSS_TOL, GRAD_TOL = 1e-2, 5e-2  # bf16 coda against fp32 eager, as test_torch_gpu.py's whole-model test

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@contextlib.contextmanager
def one_process_group(tmp_path, device):
    dist.init_process_group("nccl" if device == "cuda" else "gloo", init_method=f"file://{tmp_path / 'group'}",
                            rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def grads_of(model):
    """name -> the whole gradient of each parameter: main_grad where fp32 accumulation put it, else grad."""
    out = {}
    for name, p in model.named_parameters():
        g = getattr(p, "main_grad", None)
        g = p.grad if g is None else g
        out[name] = g.full_tensor() if isinstance(g, DTensor) else g
    return out


def step(forward, model, tokens, labels):
    model.zero_grad(set_to_none=True)
    loss = forward(tokens, labels)
    loss.backward()
    return loss.detach(), grads_of(model)


def assert_same(got, expected, what):
    (loss, grads), (loss_ref, grads_ref) = got, expected
    assert torch.equal(loss, loss_ref), f"{what}: loss {loss.item()!r} != {loss_ref.item()!r}"
    assert grads.keys() == grads_ref.keys()
    for name, g in grads.items():
        assert g is not None, f"{what}: no gradient for {name}"
        assert torch.equal(g, grads_ref[name]), \
            f"{what}: gradient of {name} differs by up to {(g - grads_ref[name]).abs().max().item():.3g}"


def rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30)).item()


def assert_near_fp32(loss, grads, model, tokens, labels, what):
    """bf16 coda's loss and gradients against fp32 eager PyTorch on the same weights (`model`: the unwrapped one)."""
    eager = copy.deepcopy(model).float()
    eager.zero_grad(set_to_none=True)  # the copy carries `model`'s gradients
    loss32 = ref.model_loss(eager, tokens, labels)
    loss32.backward()
    print(f"{what}: loss {loss.item():.6f}, fp32 eager {loss32.item():.6f}")
    assert abs(loss.item() - loss32.item()) <= LOSS_TOL * loss32.item(), f"{what}: loss {loss.item()} vs {loss32}"
    for name, p in eager.named_parameters():
        err = rel(grads[name].to(p.device), p.grad)
        print(f"  gradient of {name}: {err:.2e}")
        assert err <= GRAD_TOL, f"{what}: gradient of {name}: {err:.3g}"


# --- activation checkpointing ------------------------------------------------------------------------------------

def layers_forward(model, tokens, labels, checkpointed):
    """LlamaModel.forward, each decoder layer run under non-reentrant torch.utils.checkpoint if `checkpointed`."""
    b, s = tokens.shape
    x = model.embedding(tokens)
    pos = model.positions(b, s, tokens.device)
    h, rstd = torch.ops.coda.rms_stats(x, model.layers[0].attn_norm, model.eps)
    for i, layer in enumerate(model.layers):
        nxt = model.layers[i + 1].attn_norm if i + 1 < len(model.layers) else model.head.norm
        if checkpointed:
            x, h, rstd = checkpoint(layer, x, h, rstd, nxt, pos, s, use_reentrant=False)
        else:
            x, h, rstd = layer(x, h, rstd, nxt, pos, s)
    return model.head(x, h, rstd, model.targets(labels))


def checkpointed_and_plain(device, **kw):
    torch.manual_seed(0)
    model = ct.LlamaModel(**{**worker.CONFIGS[device]["model"], **kw}, device=device)
    twin = copy.deepcopy(model)
    ct.grad_buffers(twin)  # (a deep copy does not copy the main_grad attributes)
    tokens, labels = worker.batch(device, 7)
    plain = step(lambda t, l: layers_forward(model, t, l, False), model, tokens, labels)
    # The copy of LlamaModel.forward above is that forward.
    with torch.no_grad():
        assert torch.equal(model(tokens, labels), plain[0]), "layers_forward no longer matches LlamaModel.forward"
    checkpointed = step(lambda t, l: layers_forward(twin, t, l, True), twin, tokens, labels)
    return model, tokens, labels, plain, checkpointed


@pytest.mark.parametrize("fp32_grad_accumulation", [False, True])
def test_checkpointed_layers_match_eager(fp32_grad_accumulation):
    # The backward recomputes each layer's forward from its saved inputs; the weight-gradient buffers (main_grad)
    # are forward inputs too, so a recomputed layer adds into the same ones, once.
    *_, plain, checkpointed = checkpointed_and_plain("cpu", fp32_grad_accumulation=fp32_grad_accumulation)
    assert_same(checkpointed, plain, "checkpointed layers")


@pytest.mark.gpu
@needs_cuda
@pytest.mark.usefixtures("poison")
@pytest.mark.parametrize("attention", ["sdpa", "none"])
def test_checkpointed_layers_match_eager_gpu(attention):
    model, tokens, labels, plain, checkpointed = checkpointed_and_plain("cuda", attention=attention)
    assert_same(checkpointed, plain, "checkpointed layers")
    assert_near_fp32(*checkpointed, model, tokens, labels, "checkpointed layers")


# --- DDP and FSDP2 in one process ---------------------------------------------------------------------------------

def ddp_matches_eager(tmp_path, device):
    model = worker.build(device)
    twin = copy.deepcopy(model)
    tokens, labels = worker.batch(device, 0)
    expected = step(model, model, tokens, labels)
    with one_process_group(tmp_path, device):
        wrapped = DDP(twin, device_ids=[0] if device == "cuda" else None)
        got = step(wrapped, twin, tokens, labels)
    assert_same(got, expected, "DDP, world size 1")
    return model, tokens, labels, got


def test_ddp_world_size_1_matches_eager(tmp_path):
    ddp_matches_eager(tmp_path, "cpu")


@pytest.mark.gpu
@needs_cuda
@pytest.mark.usefixtures("poison")
def test_ddp_world_size_1_matches_eager_gpu(tmp_path):
    model, tokens, labels, got = ddp_matches_eager(tmp_path, "cuda")
    assert_near_fp32(*got, model, tokens, labels, "DDP")


def fsdp2_matches_eager(tmp_path, device, **kw):
    """Per-layer fully_shard plus the root, world size 1, against the unwrapped model over two steps on different
    batches (a gradient reduced a step late would show in the second)."""
    model = worker.build(device, **kw)
    twin = worker.build(device, **kw)
    twin.load_state_dict(model.state_dict())
    with one_process_group(tmp_path, device):
        worker.shard(twin, device)
        assert all(isinstance(p, DTensor) for p in twin.parameters())
        for i in range(2):
            tokens, labels = worker.batch(device, i)
            expected = step(model, model, tokens, labels)
            got = step(twin, twin, tokens, labels)
            assert_same(got, expected, f"FSDP2, world size 1, step {i}")
    return model, tokens, labels, got


@pytest.mark.parametrize("kw", [{}, dict(n_kv_heads=1, tie_embeddings=True), dict(fp8="tensorwise"),
                                dict(fp8="rowwise"), dict(fp8="blockwise")],
                         ids=["mha", "gqa_tied", "fp8_tensorwise", "fp8_rowwise", "fp8_blockwise"])
def test_fsdp2_world_size_1_matches_eager(tmp_path, kw):
    # FSDP2 runs on the CPU (gloo) in torch 2.11. Tied: the root unit holds the one embedding/LM-head parameter. FP8:
    # the weights are quantized from the unsharded parameters FSDP2 gathers; the delayed scales (buffers) stay whole.
    fsdp2_matches_eager(tmp_path, "cpu", **kw)


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise", "blockwise"])
def test_fsdp2_gradient_accumulation_inside_reuse_weights_matches_eager(tmp_path, recipe):
    # FSDP2 frees the gathered weights after each forward and gathers them again: reuse_weights must see a weight that
    # moved (and quantize it anew), never hand another unit's quantization to a unit at a reused address.
    model = worker.build("cpu", fp8=recipe)
    twin = worker.build("cpu", fp8=recipe)
    twin.load_state_dict(model.state_dict())

    def accumulate(m, context):
        m.zero_grad(set_to_none=True)
        with context:
            for i in range(3):
                m(*worker.batch("cpu", i)).backward()
        return grads_of(m)

    with one_process_group(tmp_path, "cpu"):
        worker.shard(twin, "cpu")
        expected = accumulate(model, contextlib.nullcontext())
        got = accumulate(twin, ct.fp8.reuse_weights())
    for name, g in got.items():
        assert torch.equal(g, expected[name]), f"gradient of {name}"


@pytest.mark.gpu
@needs_cuda
@pytest.mark.usefixtures("poison")
def test_fsdp2_world_size_1_matches_eager_gpu(tmp_path):
    model, tokens, labels, got = fsdp2_matches_eager(tmp_path, "cuda")
    assert_near_fp32(*got, model, tokens, labels, "FSDP2")


def test_fp32_grad_accumulation_under_fsdp2_is_an_error(tmp_path):
    # FSDP2 reduces p.grad into the sharded parameter: a main_grad beside it would be neither reduced nor seen.
    model = worker.build("cpu", fp32_grad_accumulation=True)
    with one_process_group(tmp_path, "cpu"):
        worker.shard(model, "cpu")
        with pytest.raises(RuntimeError, match="does not compose with FSDP2"):
            model(*worker.batch("cpu", 0))


def test_cpu_path_leaves_parameter_storage_resizable():
    # Tensor.numpy() on a parameter itself would mark its storage non-resizable, which FSDP2 resizes.
    model = worker.build("cpu")
    model(*worker.batch("cpu", 0)).backward()
    frozen = [name for name, p in model.named_parameters() if not p.untyped_storage().resizable()]
    assert not frozen, f"storage made non-resizable by the CPU path: {frozen}"


# --- FSDP2 over two processes -------------------------------------------------------------------------------------

def two_ranks(device, tmp_path):
    """Runs torch_fsdp_worker.py on two ranks (torchrun) and returns what each saved."""
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(coda.__file__)))
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", WORKER,
           "--device", device, "--out", str(tmp_path)]
    # A session of its own, so that a timeout ends torchrun's ranks too.
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=TWO_RANKS_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"torchrun did not finish in {TWO_RANKS_TIMEOUT_S} s:\n{out[-6000:]}")
    assert proc.returncode == 0, f"torchrun exited with {proc.returncode}:\n{out[-6000:]}"
    return [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]


def whole_batch_steps(device, tmp_path):
    """Per step of the two ranks: one process's model, the whole batch, the mean of the ranks' losses and their
    gradients, after checking that both ranks hold the same (all-gathered) gradients."""
    ranks = two_ranks(device, tmp_path)
    model = worker.build(device)
    for i, (r0, r1) in enumerate(zip(*ranks)):
        for name, g in r0["grads"].items():
            assert torch.equal(g, r1["grads"][name]), f"step {i}: ranks disagree on the gradient of {name}"
        yield i, model, *worker.batch(device, i), (r0["loss"] + r1["loss"]) / 2, r0["grads"]


def test_fsdp2_two_ranks_match_one_process_on_the_whole_batch(tmp_path):
    for i, model, tokens, labels, loss, grads in whole_batch_steps("cpu", tmp_path):
        loss_ref, grads_ref = step(model, model, tokens, labels)
        assert abs(loss - loss_ref) <= TWO_RANKS_TOL * loss_ref, f"step {i}: loss {loss.item()} vs {loss_ref.item()}"
        for name, g in grads_ref.items():
            err = (grads[name] - g).norm() / g.norm()
            assert err <= TWO_RANKS_TOL, f"step {i}: gradient of {name}: relative error {err:.3g}"


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2,
                    reason=f"needs 2 CUDA GPUs (this machine has {torch.cuda.device_count()})")
def test_fsdp2_two_ranks_match_one_process_on_the_whole_batch_gpu(tmp_path):
    for i, model, tokens, labels, loss, grads in whole_batch_steps("cuda", tmp_path):
        assert_near_fp32(loss, grads, model, tokens, labels, f"FSDP2 on two ranks, step {i}")


# --- torch.compile with fp32_grad_accumulation ---------------------------------------------------------------------

@pytest.mark.parametrize("fullgraph", [True, False])
def test_compile_with_fp32_grad_accumulation_matches_eager(fullgraph):
    # The backward adds into main_grad buffers that exist before the compiled step (graph inputs): with and without
    # fullgraph, the compiled step accumulates what the eager one does, bitwise on the CPU path, over two steps.
    torch._dynamo.reset()
    model = ct.LlamaModel(**worker.CONFIGS["cpu"]["model"], fp32_grad_accumulation=True)
    twin = copy.deepcopy(model)
    ct.grad_buffers(twin)
    compiled = torch.compile(model, backend="aot_eager", fullgraph=fullgraph)
    for i in range(2):
        tokens, labels = worker.batch("cpu", i)
        compiled(tokens, labels).backward()
        twin(tokens, labels).backward()
    got, want = grads_of(model), grads_of(twin)
    for name, g in want.items():
        assert torch.equal(got[name], g), name
