"""GemmSpec.input_b: FP8 operands of two types (e5m2 gradients x e4m3 weights), printed as in_b= only where B's
type is not A's, read back, and refused for any pair but two FP8 types; GemmSpec.block_scales: scales=block, and the
reference of a block-scaled GEMM against numpy."""
import pytest

import coda


def scaled(spec):
    g = coda.Graph.gemm("mixed", spec)
    g.store(g.accumulator() * g.scalar("scale"), "D", coda.bf16)
    return g


def test_input_b_defaults_to_none_and_is_a_property():
    spec = coda.GemmSpec(input=coda.e5m2)
    assert spec.input_b is None
    assert "input_b" not in repr(spec)
    spec.input_b = coda.e4m3
    assert spec.input_b == coda.e4m3
    assert repr(spec) == "coda.GemmSpec(input=coda.e5m2, a=coda.Major.K, b=coda.Major.K, input_b=coda.e4m3)"
    assert spec != coda.GemmSpec(input=coda.e5m2)
    spec.input_b = None
    assert spec == coda.GemmSpec(input=coda.e5m2)
    # B's type spelled out as A's is the same spec.
    assert coda.GemmSpec(input=coda.e4m3, input_b=coda.e4m3) == coda.GemmSpec(input=coda.e4m3)


@pytest.mark.parametrize("a, b", [("e5m2", "e4m3"), ("e4m3", "e5m2")])
def test_two_fp8_types_print_read_back_and_check(a, b):
    g = scaled(coda.GemmSpec(input=getattr(coda, a), a=coda.Major.K, b=coda.Major.K, input_b=getattr(coda, b)))
    text = coda.to_text(g)
    assert text.splitlines()[0] == f"graph mixed gemm in={a} a=k b=k in_b={b}"
    back = coda.parse_graph(text)
    assert back == g and coda.to_text(back) == text
    assert (back.spec.input, back.spec.input_b) == (getattr(coda, a), getattr(coda, b))
    coda.check(g)


def test_the_same_type_twice_prints_as_before():
    g = scaled(coda.GemmSpec(input=coda.e4m3, input_b=coda.e4m3))
    assert coda.to_text(g).splitlines()[0] == "graph mixed gemm in=e4m3 a=k b=k"
    assert coda.to_text(g) == coda.to_text(scaled(coda.GemmSpec(input=coda.e4m3)))


def test_two_types_are_fp8_and_k_major():
    with pytest.raises(coda.Error, match="in=bf16 for A and in_b=e4m3 for B"):
        coda.check(scaled(coda.GemmSpec(input=coda.bf16, input_b=coda.e4m3)))
    with pytest.raises(coda.Error, match="e5m2 x e4m3 operands must both be K-major"):
        coda.check(scaled(coda.GemmSpec(input=coda.e5m2, b=coda.Major.MN, input_b=coda.e4m3)))


# Block scales (GemmSpec.block_scales): DeepSeek-V3's recipe, A_scale [ceil(K / 128) x M] and
# B_scale [ceil(N / 128) x ceil(K / 128)] bound beside A and B.
def block_scaled(input=coda.e4m3, input_b=None):
    return scaled(coda.GemmSpec(input=input, input_b=input_b, block_scales=True))


def test_block_scales_default_off_and_are_a_property():
    spec = coda.GemmSpec(input=coda.e4m3)
    assert spec.block_scales is False
    assert "block_scales" not in repr(spec)
    spec.block_scales = True
    assert repr(spec) == "coda.GemmSpec(input=coda.e4m3, a=coda.Major.K, b=coda.Major.K, block_scales=True)"
    assert spec != coda.GemmSpec(input=coda.e4m3)
    assert spec == coda.GemmSpec(input=coda.e4m3, block_scales=True)
    assert repr(coda.GemmSpec(input=coda.e5m2, input_b=coda.e4m3, block_scales=True)).endswith(
        "input_b=coda.e4m3, block_scales=True)")


def test_b_scales_1x128_print_read_back_and_need_block_scales():
    spec = coda.GemmSpec(input=coda.e4m3, block_scales=True, b_scales_1x128=True)
    assert repr(spec) == ("coda.GemmSpec(input=coda.e4m3, a=coda.Major.K, b=coda.Major.K, block_scales=True, "
                          "b_scales_1x128=True)")
    assert spec != coda.GemmSpec(input=coda.e4m3, block_scales=True)
    g = scaled(spec)
    text = coda.to_text(g)
    assert text.splitlines()[0] == "graph mixed gemm in=e4m3 a=k b=k scales=block_1x128"
    back = coda.parse_graph(text)
    assert back == g and back.spec.b_scales_1x128
    coda.check(g)
    with pytest.raises(coda.Error, match=r"b_scales_1x128 .* set block_scales too"):
        coda.check(scaled(coda.GemmSpec(input=coda.e4m3, b_scales_1x128=True)))


def test_block_scales_print_read_back_and_check():
    g = block_scaled(input_b=coda.e5m2)
    text = coda.to_text(g)
    assert text.splitlines()[0] == "graph mixed gemm in=e4m3 a=k b=k in_b=e5m2 scales=block"
    back = coda.parse_graph(text)
    assert back == g and coda.to_text(back) == text and back.spec.block_scales
    coda.check(g)
    # Without them the text is as before.
    assert coda.to_text(scaled(coda.GemmSpec(input=coda.e4m3))).splitlines()[0] == "graph mixed gemm in=e4m3 a=k b=k"
    with pytest.raises(coda.Error, match=r"block scales \(scales=block\) are for FP8 operands.*got in=bf16 for A"):
        coda.check(block_scaled(input=coda.bf16))


def test_reference_of_a_block_scaled_gemm_matches_numpy():
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(7)
    m, n, k = 3, 260, 300  # three n-blocks and three k-blocks, the last ones partial
    kb, nb = -(-k // 128), -(-n // 128)
    # Multiples of 1/4 up to 2: exact in e4m3, so the reference's rounding to the operand type changes nothing.
    a = rng.integers(-8, 9, size=(m, k)) / 4.0
    b = rng.integers(-8, 9, size=(k, n)) / 4.0
    a_scale = (2.0 ** rng.integers(-4, 5, size=(kb, m)) * rng.uniform(0.5, 1, size=(kb, m))).astype(np.float32)
    b_scale = (2.0 ** rng.integers(-4, 5, size=(nb, kb)) * rng.uniform(0.5, 1, size=(nb, kb))).astype(np.float32)

    def numpy_reference(b_scale):
        out = np.zeros((m, n))
        for blk in range(kb):
            part = a[:, blk * 128:(blk + 1) * 128] @ b[blk * 128:(blk + 1) * 128, :]
            col_scale = np.repeat(b_scale[:, blk].astype(np.float64), 128)[:n]
            out += a_scale[blk].astype(np.float64)[:, None] * col_scale[None, :] * part
        return out

    out = coda.reference(block_scaled(), {"A": a, "B": b, "A_scale": a_scale, "B_scale": b_scale, "scale": 0.5},
                         m, n, k)
    np.testing.assert_allclose(out["D"], 0.5 * numpy_reference(b_scale), rtol=1e-12, atol=1e-12)
    # B_scale is square here: read the wrong way round it would pass any shape check, but not this one.
    assert not np.allclose(out["D"], 0.5 * numpy_reference(b_scale.T))

    with pytest.raises(coda.Error, match=r"needs the block scales 'A_scale', f32 .* = \[3 x 3\].*'B_scale' is missing"):
        coda.reference(block_scaled(), {"A": a, "B": b, "A_scale": a_scale, "scale": 0.5}, m, n, k)
    with pytest.raises(coda.Error, match=r"'B_scale'.*expected shape \[3 x 3\]"):
        coda.reference(block_scaled(), {"A": a, "B": b, "A_scale": a_scale, "B_scale": b_scale[:2], "scale": 0.5},
                       m, n, k)
    # Graphs without block scales have no such binding.
    with pytest.raises(coda.Error, match="'A_scale' is not a binding of the graph"):
        coda.reference(scaled(coda.GemmSpec(input=coda.e4m3)), {"A": a, "B": b, "A_scale": a_scale, "scale": 0.5},
                       m, n, k)
