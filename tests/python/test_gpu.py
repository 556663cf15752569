"""compile and launch through the binding with torch tensors on the GPU (marked gpu: skipped without one).

Outputs start poisoned (NaN); results are checked against coda.reference (CPU, double precision) on the same random
inputs, and against torch in fp32.
"""

import math

import numpy as np
import pytest

import coda

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

# bf16 keeps 8 significant bits; the GEMM accumulates in fp32 (the C++ device checks use the same bounds).
TOLERANCE = {torch.bfloat16: (1e-2, 5e-2), torch.float32: (1e-3, 1e-2)}


def assert_close(name, out, expected):
    """Norm-wise relative error and the largest error relative to |expected| + rms(expected)."""
    out = out.detach().double().cpu().numpy() if torch.is_tensor(out) else np.asarray(out, np.float64)
    expected = np.asarray(expected, np.float64)
    assert out.shape == expected.shape, name
    assert not np.isnan(out).any(), f"{name}: unwritten (NaN) elements"
    rel_tol, max_tol = TOLERANCE[torch.float32 if name.endswith("_f32") else torch.bfloat16]
    rms = math.sqrt((expected ** 2).mean())
    rel = np.linalg.norm(out - expected) / max(np.linalg.norm(expected), 1e-30)
    worst = (np.abs(out - expected) / (np.abs(expected) + rms + 1e-30)).max()
    assert rel <= rel_tol and worst <= max_tol, f"{name}: rel {rel:.2e} (tol {rel_tol}), max {worst:.2e} (tol {max_tol})"


def poisoned(*shape, dtype=torch.bfloat16):
    return torch.full(shape, float("nan"), dtype=dtype, device="cuda")


def out_proj_bindings(kernel, m, n, k, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", generator=gen).bfloat16()
    w = (torch.randn(n, k, device="cuda", generator=gen) / math.sqrt(k)).bfloat16()
    residual = torch.randn(m, n, device="cuda", generator=gen).bfloat16()
    gamma = (torch.rand(n, device="cuda", generator=gen) + 0.5).bfloat16()
    parts = kernel.partials_shape("x1_sumsq", m, n)
    return {"A": a, "B": w.t(), "residual": residual, "gamma": gamma, "x1": poisoned(m, n), "h": poisoned(m, n),
            "x1_sumsq": poisoned(*parts, dtype=torch.float32)}


def host(bindings):
    return {name: t.cpu() if torch.is_tensor(t) else t for name, t in bindings.items()}


@pytest.fixture(scope="module")
def out_proj():
    return coda.compile(coda.blocks.out_proj())


def test_kernel_fields(out_proj):
    assert coda.device_arch().startswith("sm_")
    assert out_proj.graph == coda.blocks.out_proj()
    assert out_proj.report.arch == coda.device_arch()
    bm, bn = out_proj.tile
    assert bm > 0 and bn > 0
    assert out_proj.partials_shape("x1_sumsq", 1000, 300) == (math.ceil(300 / bn), 1000)
    assert "x1_sumsq" in out_proj.source
    if coda.device_arch() == "sm_90a":
        assert out_proj.config.mainloop == "hopper"
    with pytest.raises(coda.Error, match="nope"):
        out_proj.partials_shape("nope", 8, 8)


# Aligned shapes run the arch's mainloop; an odd K (A and B unaligned for TMA) runs the portable fallback.
@pytest.mark.parametrize("m,n,k", [(512, 384, 256), (300, 130, 72), (77, 258, 75)])
def test_out_proj_against_reference_and_torch(out_proj, m, n, k):
    b = out_proj_bindings(out_proj, m, n, k, seed=m + n + k)
    out_proj.launch(b)
    torch.cuda.synchronize()
    expected = coda.reference(out_proj.graph, host(b), m, n, k, tile=out_proj.tile)
    for name in ("x1", "h"):
        assert_close(name, b[name], expected[name])
    assert_close("x1_sumsq_f32", b["x1_sumsq"], expected["x1_sumsq"])
    x1 = b["A"].float() @ b["B"].float() + b["residual"].float()
    assert_close("x1", b["x1"], x1.cpu().numpy())
    assert_close("h", b["h"], (x1 * b["gamma"].float()).cpu().numpy())
    assert_close("x1_sumsq_f32", b["x1_sumsq"].sum(0), (x1 * x1).sum(1).cpu().numpy())


def test_out_proj_then_rms_finalize(out_proj):
    m, n, k = 256, 512, 128
    b = out_proj_bindings(out_proj, m, n, k, seed=1)
    finalize = coda.compile(coda.blocks.rms_finalize())
    rstd = poisoned(m, dtype=torch.float32)
    out_proj.launch(b)
    finalize.launch({"x1_sumsq": b["x1_sumsq"], "inv_d": 1.0 / n, "eps": 1e-5, "rstd": rstd})
    torch.cuda.synchronize()
    x1 = b["A"].float() @ b["B"].float() + b["residual"].float()
    assert_close("rstd_f32", rstd, torch.rsqrt((x1 * x1).mean(1) + 1e-5).cpu().numpy())


def test_streams(out_proj):
    m, n, k = 128, 256, 64
    side = torch.cuda.Stream()
    for how in ("explicit", "int", "current"):
        b = out_proj_bindings(out_proj, m, n, k, seed=7)
        torch.cuda.synchronize()
        if how == "explicit":
            out_proj.launch(b, stream=side)
        elif how == "int":
            out_proj.launch(b, stream=side.cuda_stream)
        else:
            with torch.cuda.stream(side):
                out_proj.launch(b)  # None: torch's current stream, here `side`
        side.synchronize()
        x1 = b["A"].float() @ b["B"].float() + b["residual"].float()
        assert_close("x1", b["x1"], x1.cpu().numpy())


class CudaArrayOnly:
    """A device tensor seen only through __cuda_array_interface__ (as numba or older cupy expose them)."""

    def __init__(self, tensor):
        self.tensor = tensor
        self.__cuda_array_interface__ = tensor.__cuda_array_interface__


def test_cuda_array_interface_tensors():
    g = coda.Graph.tile("scale_rows")
    x = g.tile_input("x", coda.f32)
    r = g.row_input("r", coda.f32)
    g.store(x * r + 1.0, "y", coda.f32)
    kernel = coda.compile(g)
    m, n = 70, 96
    xs, rs, y = torch.randn(m, n, device="cuda"), torch.randn(m, device="cuda"), poisoned(m, n, dtype=torch.float32)
    kernel.launch({"x": CudaArrayOnly(xs), "r": CudaArrayOnly(rs), "y": CudaArrayOnly(y)})
    torch.cuda.synchronize()
    assert_close("y_f32", y, (xs * rs[:, None] + 1).cpu().numpy())


def test_device_scalars():
    """A scalar bound to a one-element f32 GPU tensor is read when the kernel runs: the bytes a float gives, and in a
    captured CUDA graph each replay's value."""
    g = coda.Graph.tile("scale_shift")
    x = g.tile_input("x", coda.f32)
    g.store(x * g.scalar("alpha") + g.scalar("beta"), "y", coda.f32)
    kernel = coda.compile(g)
    m, n = 70, 96
    xs = torch.randn(m, n, device="cuda")
    by_value, on_device = poisoned(m, n, dtype=torch.float32), poisoned(m, n, dtype=torch.float32)
    alpha = torch.tensor(1.75, device="cuda")  # 0-d, as a loss gradient is
    kernel.launch({"x": xs, "alpha": 1.75, "beta": -0.25, "y": by_value})
    kernel.launch({"x": xs, "alpha": alpha, "beta": torch.full((1,), -0.25, device="cuda"), "y": on_device})
    torch.cuda.synchronize()
    assert torch.equal(by_value, on_device)

    captured = torch.cuda.CUDAGraph()
    with torch.cuda.graph(captured):
        kernel.launch({"x": xs, "alpha": alpha, "beta": -0.25, "y": on_device})
    alpha.fill_(-3.0)
    captured.replay()
    kernel.launch({"x": xs, "alpha": -3.0, "beta": -0.25, "y": by_value})
    torch.cuda.synchronize()
    assert torch.equal(by_value, on_device)

    for wrong in (alpha.bfloat16(), alpha.cpu(), torch.ones(2, device="cuda"), "1.0"):
        with pytest.raises(coda.Error, match="'alpha' needs a float, or a one-element f32 GPU tensor"):
            kernel.launch({"x": xs, "alpha": wrong, "beta": -0.25, "y": on_device})


def test_launch_errors_are_coda_errors(out_proj):
    m, n, k = 64, 128, 64
    b = out_proj_bindings(out_proj, m, n, k, seed=3)
    with pytest.raises(coda.Error, match="'residual'.*bf16"):
        out_proj.launch({**b, "residual": b["residual"].float()})
    with pytest.raises(coda.Error, match="'gamma'.*CUDA tensor"):
        out_proj.launch({**b, "gamma": b["gamma"].cpu()})
    with pytest.raises(coda.Error, match="'h'"):
        out_proj.launch({name: t for name, t in b.items() if name != "h"})
    with pytest.raises(coda.Error, match="'B'"):
        out_proj.launch({**b, "B": b["B"].contiguous()})  # N-major B for a K-major kernel
    with pytest.raises(coda.Error, match="'x1'.*requires grad|'x1'"):
        out_proj.launch({**b, "x1": b["x1"].requires_grad_(False).float().requires_grad_(True)})
    assert torch.isnan(b["x1"]).all(), "a refused launch must not run"
