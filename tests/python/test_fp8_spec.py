"""GemmSpec.input_b: FP8 operands of two types (e5m2 gradients x e4m3 weights), printed as in_b= only where B's
type is not A's, read back, and refused for any pair but two FP8 types."""
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
