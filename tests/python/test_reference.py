"""coda.reference (the CPU double-precision interpreter) against numpy on small shapes."""

import numpy as np
import pytest

import coda

rng = np.random.default_rng(15)


def exact(shape, scale=1.0):
    """Random values that bf16 holds exactly (k/8, |k| <= 16), so that the reference's rounding changes nothing."""
    return rng.integers(-16, 17, size=shape).astype(np.float64) / 8 * scale


def silu(x):
    return x / (1 + np.exp(-x))


def row_partials(x, bn, combine):
    """[ceil(N / bn) x M]: one value per (N-tile, row)."""
    return np.stack([combine(x[:, j:j + bn]) for j in range(0, x.shape[1], bn)])


def test_out_proj():
    m, n, k, bn = 5, 10, 6, 4
    a, w, residual, gamma = exact((m, k)), exact((n, k)), exact((m, n)), exact(n)
    out = coda.reference(coda.blocks.out_proj(), {"A": a, "B": w.T, "residual": residual, "gamma": gamma}, m, n, k,
                         tile=(128, bn))
    x1 = a @ w.T + residual
    assert set(out) == {"x1", "h", "x1_sumsq"}
    assert out["x1"].dtype == np.float64 and out["x1"].shape == (m, n)
    np.testing.assert_allclose(out["x1"], x1, rtol=1e-12)
    np.testing.assert_allclose(out["h"], x1 * gamma, rtol=1e-12)
    np.testing.assert_allclose(out["x1_sumsq"], row_partials(x1, bn, lambda t: (t * t).sum(1)), rtol=1e-12)
    assert out["x1_sumsq"].shape == (3, m)


def test_operands_are_rounded_to_the_gemm_input_dtype():
    m, n, k = 2, 4, 3
    a = np.full((m, k), 1 + 2.0**-10)  # not a bf16 value: the kernel reads 1.0
    w = np.ones((n, k))
    out = coda.reference(coda.blocks.out_proj(), {"A": a, "B": w.T, "residual": np.zeros((m, n)),
                                                  "gamma": np.ones(n)}, m, n, k)
    np.testing.assert_array_equal(out["x1"], np.full((m, n), 3.0))


def test_rms_finalize():
    t, length = 3, 7
    partials = np.abs(exact((t, length))) + 0.5
    out = coda.reference(coda.blocks.rms_finalize(), {"x1_sumsq": partials, "inv_d": 0.125, "eps": 1e-5}, length, 0)
    expected = 1 / np.sqrt(partials.sum(0) * 0.125 + 1e-5)
    np.testing.assert_allclose(out["rstd"], expected, rtol=1e-6)  # the scalars are f32


def test_gate_up_swiglu_with_torch_cpu_tensors():
    torch = pytest.importorskip("torch")
    m, f, k = 4, 6, 8
    a = torch.tensor(exact((m, k)), dtype=torch.bfloat16)
    w_gu = torch.tensor(exact((2 * f, k), 0.5), dtype=torch.bfloat16)  # interleaved rows: gate_j, up_j
    rstd = torch.tensor(np.abs(exact(m)) + 0.25, dtype=torch.float32)
    out = coda.reference(coda.blocks.gate_up_swiglu(), {"A": a, "B": w_gu.t(), "rstd": rstd}, m, 2 * f, k)
    z = rstd.double().numpy()[:, None] * (a.double().numpy() @ w_gu.double().numpy().T)
    np.testing.assert_allclose(out["z"], z, rtol=1e-12)
    np.testing.assert_allclose(out["y"], silu(z[:, 0::2]) * z[:, 1::2], rtol=1e-12)
    assert out["y"].shape == (m, f)


def test_lm_head_ce_and_ce_finalize():
    m, v, k, bn = 3, 12, 4, 8
    a, w, rstd = exact((m, k)), exact((v, k)), np.full(m, 0.5)
    labels = np.array([0, 11, 5], dtype=np.int32)
    head = coda.reference(coda.blocks.lm_head_ce(), {"A": a, "B": w.T, "rstd": rstd, "labels": labels}, m, v, k,
                          tile=(128, bn))
    logits = 0.5 * (a @ w.T)
    lse = row_partials(logits, bn, lambda t: np.log(np.exp(t).sum(1)))
    target = row_partials(np.where(np.arange(v)[None, :] == labels[:, None], logits, 0), bn, lambda t: t.sum(1))
    np.testing.assert_allclose(head["logits"], logits, rtol=1e-12)
    np.testing.assert_allclose(head["lse_partials"], lse, rtol=1e-9)
    np.testing.assert_allclose(head["target_partials"], target, rtol=1e-12, atol=1e-12)
    final = coda.reference(coda.blocks.ce_finalize(), {"lse_partials": head["lse_partials"],
                                                       "target_partials": head["target_partials"]}, m, 0)
    full_lse = np.log(np.exp(logits).sum(1))
    np.testing.assert_allclose(final["lse"], full_lse, rtol=1e-6)
    np.testing.assert_allclose(final["loss"], full_lse - logits[np.arange(m), labels], rtol=1e-5, atol=1e-6)


def test_tile_program_with_accumulate_and_column_partials():
    g = coda.Graph.tile("acc_cols")
    x = g.tile_input("x", coda.f32)
    y = g.row_input("y", coda.f32)
    prod = g.max(x * y, 0.0)
    g.accumulate(prod, "total", coda.f32)
    g.reduce_col(x, coda.ReduceOp.Min, "col_min")
    m, n, bm = 7, 4, 4
    xs, ys, initial = exact((m, n)), exact(m), exact((m, n))
    out = coda.reference(g, {"x": xs, "y": ys, "total": initial}, m, n, tile=(bm, 128))
    np.testing.assert_array_equal(out["total"], initial + np.maximum(xs * ys[:, None], 0))
    np.testing.assert_array_equal(out["col_min"], np.stack([xs[:4].min(0), xs[4:].min(0)]))


def test_reference_errors():
    g = coda.blocks.out_proj()
    m, n, k = 2, 4, 3
    good = {"A": np.zeros((m, k)), "B": np.zeros((k, n)), "residual": np.zeros((m, n)), "gamma": np.zeros(n)}
    with pytest.raises(coda.Error, match="'gamma'.*missing"):
        coda.reference(g, {key: v for key, v in good.items() if key != "gamma"}, m, n, k)
    with pytest.raises(coda.Error, match="'bogus' is not a binding"):
        coda.reference(g, {**good, "bogus": np.zeros(2)}, m, n, k)
    with pytest.raises(coda.Error, match="residual"):
        coda.reference(g, {**good, "residual": np.zeros((m, n + 2))}, m, n, k)
    with pytest.raises(coda.Error, match="'A'"):
        coda.reference(g, {key: v for key, v in good.items() if key != "A"}, m, n, k)
    with pytest.raises(coda.Error, match="scalar 'eps' needs a float"):
        coda.reference(coda.blocks.rms_finalize(), {"x1_sumsq": np.ones((1, 2)), "inv_d": 1.0, "eps": "x"}, 2, 0)
    with pytest.raises(coda.Error, match="'gamma'.*host array"):
        coda.reference(g, {**good, "gamma": [1.0, 2.0]}, m, n, k)
    # Outputs in the dict are ignored: one dict serves a launch and its reference.
    out = coda.reference(g, {**good, "x1": np.zeros((m, n)), "x1_sumsq": np.zeros((1, m))}, m, n, k)
    np.testing.assert_array_equal(out["x1"], 0)
