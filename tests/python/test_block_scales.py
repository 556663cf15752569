"""coda.block_scale_operands and coda.block_scale_names: the tensors a block-scaled GEMM binds beside A and B, as its
mainloop declares them (the names coda.torch binds the scales under), and a reference bound through them."""
import numpy as np

import coda


def fp8(scales):
    return coda.GemmSpec(input=coda.e4m3, scales=scales)


def test_names_and_shapes_follow_the_scale_mode():
    assert coda.block_scale_names(coda.GemmSpec()) == ()
    assert coda.block_scale_operands(fp8(coda.ScaleMode.Off)) == []
    for mode, b_shape in ((coda.ScaleMode.Block128x128, (3, 3)), (coda.ScaleMode.Block1x128, (3, 260))):
        assert coda.block_scale_names(fp8(mode)) == ("A_scale", "B_scale")
        a, b = coda.block_scale_operands(fp8(mode))
        assert (a.operand, b.operand) == ("A", "B")
        assert a.dtype == coda.f32 and b.dtype == coda.f32
        assert a.shape(3, 260, 300) == (3, 3) and b.shape(3, 260, 300) == b_shape
        assert "per row of A" in a.layout and a.what == "block scales of A"
        assert "A_scale" in repr(a)


def test_a_reference_binds_the_scales_by_the_declared_names():
    spec = fp8(coda.ScaleMode.Block1x128)
    g = coda.Graph.gemm("scaled", spec)
    g.store(g.accumulator(), "D", coda.f32)
    m, n, k = 2, 4, 256
    bindings = {"A": np.ones((m, k)), "B": np.ones((k, n))}
    for i, operand in enumerate(coda.block_scale_operands(spec)):
        bindings[operand.name] = np.full(operand.shape(m, n, k), 2.0 ** i, dtype=np.float32)
    # Two k-blocks of 128 ones, each scaled by 1 * 2.
    np.testing.assert_array_equal(coda.reference(g, bindings, m, n, k)["D"], np.full((m, n), 512.0))
