"""GemmSpec.input_b: FP8 operands of two types (e5m2 gradients x e4m3 weights), printed as in_b= only where B's
type is not A's, read back, and refused for any pair but two FP8 types; GemmSpec.scales (coda.ScaleMode, spelled
block_scales= / b_scales_1x128= before): scales=block and scales=block_1x128, and the reference of a block-scaled GEMM
against numpy."""
import pytest

import coda

# The extension's enum; coda/__init__.py does not re-export it yet (coda.ScaleMode once it does).
ScaleMode = coda.ScaleMode


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


# Block scales (GemmSpec.scales): DeepSeek-V3's recipe, A_scale [ceil(K / 128) x M] and
# B_scale [ceil(N / 128) x ceil(K / 128)] bound beside A and B.
def block_scaled(input=coda.e4m3, input_b=None):
    return scaled(coda.GemmSpec(input=input, input_b=input_b, scales=ScaleMode.Block128x128))


def test_scales_default_off_and_are_a_property():
    spec = coda.GemmSpec(input=coda.e4m3)
    assert spec.scales == ScaleMode.Off
    assert spec.block_scales is False and spec.b_scales_1x128 is False
    assert "scales" not in repr(spec)
    spec.scales = ScaleMode.Block128x128
    assert spec.block_scales is True and spec.b_scales_1x128 is False
    assert repr(spec) == ("coda.GemmSpec(input=coda.e4m3, a=coda.Major.K, b=coda.Major.K, "
                          "scales=coda.ScaleMode.Block128x128)")
    assert spec != coda.GemmSpec(input=coda.e4m3)
    assert spec == coda.GemmSpec(input=coda.e4m3, scales=ScaleMode.Block128x128)
    assert repr(coda.GemmSpec(input=coda.e5m2, input_b=coda.e4m3, scales=ScaleMode.Block1x128)).endswith(
        "input_b=coda.e4m3, scales=coda.ScaleMode.Block1x128)")
    assert eval(repr(spec), {"coda": coda._coda}) == spec


@pytest.mark.parametrize("mode, text", [("Off", None), ("Block128x128", "block"), ("Block1x128", "block_1x128")])
def test_every_scale_mode_round_trips_through_the_text_form(mode, text):
    g = scaled(coda.GemmSpec(input=coda.e4m3, scales=getattr(ScaleMode, mode)))
    header = coda.to_text(g).splitlines()[0]
    assert header == "graph mixed gemm in=e4m3 a=k b=k" + (f" scales={text}" if text else "")
    back = coda.parse_graph(coda.to_text(g))
    assert back == g and back.spec.scales == getattr(ScaleMode, mode)
    coda.check(g)


def test_the_older_keywords_still_make_the_same_specs_and_read_back():
    Mode = ScaleMode
    assert coda.GemmSpec(input=coda.e4m3, block_scales=True).scales == Mode.Block128x128
    assert coda.GemmSpec(input=coda.e4m3, block_scales=True, b_scales_1x128=True).scales == Mode.Block1x128
    assert coda.GemmSpec(input=coda.e4m3, block_scales=False).scales == Mode.Off
    assert coda.GemmSpec(input=coda.e4m3, block_scales=False, b_scales_1x128=False).scales == Mode.Off
    # Both spellings at once must agree.
    assert coda.GemmSpec(input=coda.e4m3, scales=Mode.Block128x128, block_scales=True).scales == Mode.Block128x128
    with pytest.raises(coda.Error, match=r"scales=coda.ScaleMode.Block1x128 and block_scales=True, "
                                         r"b_scales_1x128=False name different scales"):
        coda.GemmSpec(input=coda.e4m3, scales=Mode.Block1x128, block_scales=True)
    with pytest.raises(coda.Error, match=r"b_scales_1x128=True .* set block_scales=True too"):
        coda.GemmSpec(input=coda.e4m3, b_scales_1x128=True)
    # The older names are read-only views of scales.
    spec = coda.GemmSpec(input=coda.e4m3, block_scales=True, b_scales_1x128=True)
    assert spec.block_scales and spec.b_scales_1x128
    with pytest.raises(AttributeError):
        spec.block_scales = False
    assert coda.to_text(scaled(spec)).splitlines()[0] == "graph mixed gemm in=e4m3 a=k b=k scales=block_1x128"
    assert coda.parse_graph(coda.to_text(scaled(spec))).spec.b_scales_1x128


def test_b_scales_1x128_print_read_back():
    spec = coda.GemmSpec(input=coda.e4m3, scales=ScaleMode.Block1x128)
    assert spec != coda.GemmSpec(input=coda.e4m3, scales=ScaleMode.Block128x128)
    g = scaled(spec)
    text = coda.to_text(g)
    assert text.splitlines()[0] == "graph mixed gemm in=e4m3 a=k b=k scales=block_1x128"
    back = coda.parse_graph(text)
    assert back == g and back.spec.scales == ScaleMode.Block1x128
    coda.check(g)


def test_block_scales_print_read_back_and_check():
    g = block_scaled(input_b=coda.e5m2)
    text = coda.to_text(g)
    assert text.splitlines()[0] == "graph mixed gemm in=e4m3 a=k b=k in_b=e5m2 scales=block"
    back = coda.parse_graph(text)
    assert back == g and coda.to_text(back) == text and back.spec.scales == ScaleMode.Block128x128
    coda.check(g)
    # Without them the text is as before.
    assert coda.to_text(scaled(coda.GemmSpec(input=coda.e4m3))).splitlines()[0] == "graph mixed gemm in=e4m3 a=k b=k"
    with pytest.raises(coda.Error, match=r"block scales \(scales=block\) are for FP8 operands.*got in=bf16 for A"):
        coda.check(block_scaled(input=coda.bf16))
    with pytest.raises(coda.Error, match=r"block scales \(scales=block_1x128\) are for FP8 operands.*got in=f16 for A"):
        coda.check(scaled(coda.GemmSpec(input=coda.f16, scales=ScaleMode.Block1x128)))


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
