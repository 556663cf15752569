"""coda.torch.ops_fp8.scaled_mm: torch._scaled_mm's contract on coda's FP8 GEMM. On the CPU the op runs the fp64
reference (these tests); on an sm_90a GPU the FP8 Hopper kernel, checked against torch._scaled_mm."""
import re

import pytest

torch = pytest.importorskip("torch")
if not hasattr(torch, "float8_e4m3fn"):
    pytest.skip("this torch has no float8 dtypes", allow_module_level=True)

import coda.torch  # noqa: E402,F401  (registers torch.ops.coda.*)

M, N, K = 40, 24, 64
FP8 = [torch.float8_e4m3fn, torch.float8_e5m2]
# A's and B's types where they differ: FP8 training's backward (e5m2 gradients x e4m3 weights), either way round.
MIXED = [(torch.float8_e5m2, torch.float8_e4m3fn), (torch.float8_e4m3fn, torch.float8_e5m2)]


def operands(dtype, device="cpu", m=M, n=N, k=K, seed=0, dtype_b=None):
    g = torch.Generator().manual_seed(seed)
    a = (torch.rand(m, k, generator=g) * 4 - 2).to(dtype).to(device)
    w = (torch.rand(n, k, generator=g) * 4 - 2).to(dtype_b or dtype).to(device)
    return a, w.t()  # B [K x N] column-major, as torch._scaled_mm takes it


def expected(a, b, scale_a, scale_b):
    """The exact product of the FP8 values, scaled, rounded once to bf16."""
    product = a.double() @ b.double()
    return (product * scale_a.double() * scale_b.double()).to(torch.bfloat16)


@pytest.mark.parametrize("dtype, dtype_b", [(t, t) for t in FP8] + MIXED)
def test_tensorwise_and_rowwise_scales_match_the_exact_product(dtype, dtype_b):
    a, b = operands(dtype, dtype_b=dtype_b)
    sa, sb = torch.tensor(0.75), torch.tensor([2.5])
    out = torch.ops.coda.scaled_mm(a, b, sa, sb)
    assert out.dtype == torch.bfloat16 and out.shape == (M, N)
    torch.testing.assert_close(out, expected(a, b, sa, sb), rtol=0, atol=0)
    row = torch.rand(M, 1, generator=torch.Generator().manual_seed(1)) + 0.5
    col = torch.rand(1, N, generator=torch.Generator().manual_seed(2)) + 0.5
    out = torch.ops.coda.scaled_mm(a, b, row, col)
    # The reference rounds the f32 scales' product per element in fp64: at most one bf16 ulp from this rounding.
    torch.testing.assert_close(out, expected(a, b, row, col), rtol=2 ** -8, atol=0)


def test_what_the_fp8_gemm_does_not_take_is_a_clear_error():
    a, b = operands(torch.float8_e4m3fn)
    one = torch.tensor(1.0)
    cases = [
        ((a, b.to(torch.bfloat16), one, one), "must each be float8_e4m3fn or float8_e5m2"),
        ((a.float(), b, one, one), "got torch.float32 and torch.float8_e4m3fn"),
        ((a, b.contiguous(), one, one), "B column-major"),
        ((a.t().contiguous().t(), b, one, one), "A must be row-major"),
        ((a, b[:, :N - 1], one, one), "N = 23 is odd"),
        ((a, b, one.double(), one), "scales must be float32"),
        ((a, b, torch.ones(M), torch.ones(N)), "[M x 1] and [1 x N]"),
        ((a[:, :32], b, one, one), "need A [M x K] and B [K x N]"),
    ]
    for args, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)):
            torch.ops.coda.scaled_mm(*args)


def test_the_fake_kernel_gives_the_shape_and_checks_the_same_rules():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        a = torch.empty(M, K, dtype=torch.float8_e4m3fn)
        b = torch.empty(N, K, dtype=torch.float8_e4m3fn).t()
        out = torch.ops.coda.scaled_mm(a, b, torch.empty(()), torch.empty(()))
        assert out.shape == (M, N) and out.dtype == torch.bfloat16
        with pytest.raises(ValueError, match="B column-major"):
            torch.ops.coda.scaled_mm(a, b.contiguous(), torch.empty(()), torch.empty(()))


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("dtype", FP8)
@pytest.mark.parametrize("rowwise", [False, True])
def test_matches_torch_scaled_mm_on_the_gpu(dtype, rowwise):
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("coda's FP8 GEMM needs an sm_90a GPU")
    m, n, k = 1000, 1024, 4096
    a, b = operands(dtype, "cuda", m, n, k)
    if rowwise:
        sa = (torch.rand(m, 1, device="cuda") + 0.5)
        sb = (torch.rand(1, n, device="cuda") + 0.5)
    else:
        sa, sb = torch.tensor(0.5, device="cuda"), torch.tensor(1.5, device="cuda")
    out = torch.ops.coda.scaled_mm(a, b, sa, sb)
    exact = expected(a, b, sa, sb).double()
    err = (out.double() - exact).norm() / exact.norm()
    assert err < 1e-2, f"relative error {err:.3g}"
    if dtype == torch.float8_e4m3fn:  # cuBLASLt's FP8 GEMM takes e4m3 x e4m3 on every torch that has it
        theirs = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
        assert (theirs.double() - exact).norm() / exact.norm() < 1e-2


@pytest.mark.gpu
@pytest.mark.hopper
@pytest.mark.parametrize("dtype, dtype_b", MIXED)
def test_two_fp8_types_match_torch_scaled_mm_on_the_gpu(dtype, dtype_b):
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("coda's FP8 GEMM needs an sm_90a GPU")
    m, n, k = 1000, 1024, 4096
    a, b = operands(dtype, "cuda", m, n, k, dtype_b=dtype_b)
    sa, sb = torch.tensor(0.5, device="cuda"), torch.tensor(1.5, device="cuda")
    out = torch.ops.coda.scaled_mm(a, b, sa, sb)
    exact = expected(a, b, sa, sb).double()
    assert (out.double() - exact).norm() / exact.norm() < 1e-2
    # Per tensor, as cuBLASLt takes e4m3 x e5m2 and e5m2 x e4m3 (its row-wise kernels take e4m3 alone).
    theirs = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    assert (theirs.double() - exact).norm() / exact.norm() < 1e-2
    assert (out.double() - theirs.double()).norm() / exact.norm() < 2e-2


def test_coda_torch_scaled_mm_skips_the_dispatcher_only_where_nothing_needs_it(monkeypatch):
    # coda.torch.scaled_mm calls the op's body itself in eager mode, and torch.ops.coda.scaled_mm wherever the
    # dispatcher has work: a gradient wanted, a dispatch mode, torch.compile's tracing.
    from torch.utils._python_dispatch import TorchDispatchMode
    a, b = operands(torch.float8_e4m3fn, m=12, n=260, k=300)
    sa, sb = torch.tensor(0.5), torch.tensor(1.5)
    dispatched = []
    real = torch.ops.coda.scaled_mm

    class Spy:
        def __call__(self, *args):
            dispatched.append(args)
            return real(*args)
    monkeypatch.setattr(torch.ops.coda, "scaled_mm", Spy())
    out = coda.torch.scaled_mm(a, b, sa, sb)
    assert not dispatched
    torch.testing.assert_close(out, real(a, b, sa, sb), rtol=0, atol=0)

    class Passing(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    with Passing():
        coda.torch.scaled_mm(a, b, sa, sb)
    assert len(dispatched) == 1
    with pytest.raises(Exception):  # the op has no autograd: asked for a gradient, the dispatcher refuses
        coda.torch.scaled_mm(a, b, sa.clone().requires_grad_(), sb).sum().backward()
    assert len(dispatched) == 2
    compiled = torch.compile(lambda *t: coda.torch.scaled_mm(*t), backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(a, b, sa, sb), out, rtol=0, atol=0)
    assert len(dispatched) == 3


def blockwise_expected(a, b, scale_a, scale_b):
    """sum over 128-k blocks of scale_a[m, kb] * scale_b[n // 128, kb] (or, with scale_b [N x ceil(K/128)],
    scale_b[n, kb]) * the block's exact FP8 product, in bf16."""
    m, k = a.shape
    n = b.shape[1]
    out = torch.zeros(m, n, dtype=torch.float64)
    for kb in range(-(-k // 128)):
        ks = slice(128 * kb, 128 * kb + 128)
        block = a[:, ks].double() @ b[ks, :].double()
        col_scale = scale_b[:, kb].double()
        if scale_b.shape[0] != n:
            col_scale = col_scale.repeat_interleave(128)[:n]
        out += block * scale_a[:, kb].double()[:, None] * col_scale[None, :]
    return out.to(torch.bfloat16)


def block_scales(m, n, k, device="cpu", seed=3):
    # Powers of two from 2^-3 to 2^3 per block: a scale applied to the wrong block is off by a factor of 2 or more.
    g = torch.Generator().manual_seed(seed)
    kb, nb = -(-k // 128), -(-n // 128)
    sa = 2.0 ** torch.randint(-3, 4, (m, kb), generator=g).float()
    sb = 2.0 ** torch.randint(-3, 4, (nb, kb), generator=g).float()
    return sa.to(device), sb.to(device)


@pytest.mark.parametrize("dtype, dtype_b", [(torch.float8_e4m3fn,) * 2] + MIXED[:1])
def test_blockwise_scales_match_the_exact_block_sums(dtype, dtype_b):
    # N = 260: three 128-column blocks of B's scales, the last of 4 columns; K = 300: three k-blocks, the last of 44.
    m, n, k = 12, 260, 300
    a, b = operands(dtype, m=m, n=n, k=k, dtype_b=dtype_b)
    sa, sb = block_scales(m, n, k)
    out = torch.ops.coda.scaled_mm(a, b, sa, sb, blockwise=True)
    torch.testing.assert_close(out, blockwise_expected(a, b, sa, sb), rtol=2 ** -8, atol=0)
    # Scales of the wrong blocks (rows of scale_b swapped) change the result: the test can tell blocks apart.
    swapped = sb.flip(0).contiguous()
    assert not torch.equal(torch.ops.coda.scaled_mm(a, b, sa, swapped, blockwise=True), out)


def row_scales(n, k, device="cpu", seed=4):
    # B's scales per row of the N x K B and 128 k (scale_b [N x ceil(K/128)]), powers of two as block_scales' are.
    g = torch.Generator().manual_seed(seed)
    return (2.0 ** torch.randint(-3, 4, (n, -(-k // 128)), generator=g).float()).to(device)


def test_blockwise_scales_per_row_of_b_match_the_exact_block_sums():
    # B's scales [N x ceil(K/128)]: each column of the output its own per k-block (a weight gradient's operands).
    m, n, k = 12, 260, 300
    a, b = operands(torch.float8_e4m3fn, m=m, n=n, k=k)
    sa, _ = block_scales(m, n, k)
    sb = row_scales(n, k)
    out = torch.ops.coda.scaled_mm(a, b, sa, sb, blockwise=True)
    torch.testing.assert_close(out, blockwise_expected(a, b, sa, sb), rtol=2 ** -8, atol=0)
    # Neighbouring columns' scales swapped change the result: the test can tell columns apart.
    swapped = sb.view(n // 2, 2, -1).flip(1).reshape(n, -1).contiguous()
    assert not torch.equal(torch.ops.coda.scaled_mm(a, b, sa, swapped, blockwise=True), out)


def test_blockwise_scales_of_the_wrong_shape_are_a_clear_error():
    a, b = operands(torch.float8_e4m3fn, m=12, n=260, k=300)
    sa, sb = block_scales(12, 260, 300)
    with pytest.raises(ValueError, match=re.escape("[M x ceil(K/128)] = [12 x 3]")):
        torch.ops.coda.scaled_mm(a, b, sa[:, :2], sb, blockwise=True)
    with pytest.raises(ValueError, match=re.escape("[ceil(N/128) x ceil(K/128)] = [3 x 3]")):
        torch.ops.coda.scaled_mm(a, b, sa, sb[:2], blockwise=True)
    with pytest.raises(ValueError, match=re.escape("[N x ceil(K/128)] = [260 x 3]")):
        torch.ops.coda.scaled_mm(a, b, sa, row_scales(259, 300), blockwise=True)
    with pytest.raises(ValueError, match="blockwise=True"):
        torch.ops.coda.scaled_mm(a, b, sa, sb)


@pytest.mark.gpu
@pytest.mark.hopper
def test_blockwise_scales_on_the_gpu_match_the_exact_block_sums():
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("coda's FP8 GEMM needs an sm_90a GPU")
    m, n, k = 1000, 1000, 1008
    a, b = operands(torch.float8_e4m3fn, "cuda", m, n, k)
    sa, sb = block_scales(m, n, k, "cuda")
    # B's scales per 128 x 128 block, then per row of B (scale_b [N x ceil(K/128)]).
    for sb in (sb, row_scales(n, k, "cuda")):
        out = torch.ops.coda.scaled_mm(a, b, sa, sb, blockwise=True)
        exact = blockwise_expected(a.cpu(), b.cpu(), sa.cpu(), sb.cpu()).double()
        # Promoted to f32 every 128 k: as close to the exact sums as the bf16 output allows.
        assert (out.cpu().double() - exact).norm() / exact.norm() < 4e-3
