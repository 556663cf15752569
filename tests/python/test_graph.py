"""The builder, its operators, validation and the text form, without a GPU."""

import pytest

import coda


def out_proj_by_hand():
    g = coda.Graph.gemm("out_proj", coda.GemmSpec(input=coda.bf16, a=coda.Major.K, b=coda.Major.K))
    acc = g.accumulator()
    r = g.tile_input("residual", coda.bf16)
    gamma = g.col_input("gamma", coda.bf16)
    x1 = acc + r
    g.store(x1, "x1", coda.bf16)
    g.store(x1 * gamma, "h", coda.bf16)
    g.reduce_row(x1, coda.ReduceOp.SumSq, "x1_sumsq")
    return g


def lines(g):
    return coda.to_text(g).splitlines()


def test_builder_records_nodes_in_call_order():
    g = out_proj_by_hand()
    assert g.name == "out_proj"
    assert g.domain == coda.Domain.Gemm
    assert g.spec == coda.GemmSpec()
    assert [n.op for n in g.nodes] == [
        "accumulator", "tile_input", "col_input", "add", "store", "mul", "store", "reduce_row"]
    assert g.nodes[3].args == [0, 1]
    assert g.nodes[7].reduce == coda.ReduceOp.SumSq
    assert lines(g)[0] == "graph out_proj gemm in=bf16 a=k b=k"
    assert "%x1_sumsq = reduce_row sumsq %_3" in lines(g)
    coda.check(g)
    assert coda.problems(g) == []


def test_operators_with_values_and_numbers_on_either_side():
    g = coda.Graph.tile("ops")
    x = g.tile_input("x", coda.f32)
    y = g.row_input("y", coda.f32)
    exprs = [x + y, x - y, x * y, x / y, -x, x + 2, 2 + x, x - 2, 2 - x, x * 0.5, 0.5 * x, x / 4, 4 / x, x + 3]
    assert all(isinstance(e, coda.Value) for e in exprs)
    text = lines(g)[3:]  # the header, x and y first
    assert text[0] == "%_2 = add %x %y"
    assert text[3] == "%_5 = div %x %y"
    assert text[4] == "%_6 = neg %x"
    # A number becomes a constant node before the operation; on the left it stays the left operand.
    assert text[5:7] == ["%_7 = const 2", "%_8 = add %x %_7"]
    assert text[11:13] == ["%_13 = const 2", "%_14 = sub %_13 %x"]
    assert text[-2:] == ["%_23 = const 3", "%_24 = add %x %_23"]
    with pytest.raises(TypeError):
        x + "a"
    with pytest.raises(TypeError):
        g.add(x, "a")


def test_every_named_method_builds_its_op():
    g = coda.Graph.tile("all_ops")
    x = g.tile_input("x", coda.f32)
    unary = ["neg", "abs", "exp", "exp2", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "silu", "gelu_erf",
             "gelu_tanh", "relu", "square"]
    binary = ["add", "sub", "mul", "div", "max", "min", "eq", "ne", "lt", "le", "gt", "ge"]
    used = []
    for name in unary:
        v = getattr(g, name)(x, name=f"u_{name}")
        assert g.nodes[v.id].op == name and g.nodes[v.id].name == f"u_{name}"
        used.append(v)
    for name in binary:
        v = getattr(g, name)(x, 1.5, name=f"b_{name}")
        node = g.nodes[v.id]
        assert node.op == name
        assert g.nodes[node.args[1]].op == "const" and g.nodes[node.args[1]].value == 1.5
        used.append(v)
    f = g.to_f32(g.row_input("i", coda.i32))
    assert g.nodes[f.id].op == "to_f32"
    r = g.round(x, coda.bf16, name="r")
    assert g.nodes[r.id].dtype == coda.bf16
    s = g.select(g.gt(x, 0.0), x, 0.0)
    assert g.nodes[s.id].op == "select"
    e, o = g.even(x), g.odd(x)
    j = g.join(e, o)
    assert [g.nodes[v.id].op for v in (e, o, j)] == ["even", "odd", "join"]
    total = f + g.to_f32(g.row_index()) + g.to_f32(g.col_index(coda.Width.Full)) + g.constant(1.0, name="one")
    for v in used:
        total = total + v
    g.store(total, "total", coda.f32)
    g.store(j, "j", coda.f32)
    g.accumulate(s, "acc_out", coda.f32)
    g.reduce_col(r, coda.ReduceOp.Max, "colmax")
    g.reduce_row(g.scalar("scale") * x, coda.ReduceOp.Lse, "rowlse")
    xt = g.tile_input_transposed("xt", coda.bf16)
    assert g.nodes[xt.id].op == "tile_input_transposed" and g.nodes[xt.id].dtype == coda.bf16
    g.store(xt, "xt_copy", coda.bf16)
    coda.check(g)
    assert coda.parse_graph(coda.to_text(g)) == g
    roles = {b.name: b.role for b in coda.bindings(g)}
    assert roles == {"x": "input", "i": "input", "scale": "scalar", "total": "output", "j": "output",
                     "acc_out": "accumulate", "colmax": "column partials", "rowlse": "row partials", "xt": "input",
                     "xt_copy": "output"}
    assert [b.name for b in coda.bindings(g) if b.transposed] == ["xt"]


def test_reduce_group_builds_its_op_in_gemm_graphs():
    # A block-wise FP8 quantization: each row group's amax gives the scale its elements are divided by.
    g = coda.Graph.gemm("group_quantize", coda.GemmSpec(input=coda.bf16, a=coda.Major.K, b=coda.Major.K))
    acc = g.accumulator()
    amax = g.reduce_group(g.abs(acc), coda.ReduceOp.Max, name="amax")
    assert g.nodes[amax.id].op == "reduce_group" and g.nodes[amax.id].reduce == coda.ReduceOp.Max
    scale = g.max(g.mul(amax, 1.0 / 448), 1e-12, name="scale")
    g.store(g.div(acc, scale), "q", coda.e4m3)
    g.reduce_row(scale, coda.ReduceOp.Max, "q_scale")
    coda.check(g)
    assert "%amax = reduce_group max %" in coda.to_text(g)
    assert coda.parse_graph(coda.to_text(g)) == g


def test_sources_keep_their_attributes():
    g = coda.Graph.gemm("src", coda.GemmSpec(input=coda.f16, a=coda.Major.MN, b=coda.Major.MN))
    assert lines(g)[0] == "graph src gemm in=f16 a=mn b=mn"
    acc = g.accumulator(name="total")
    z = g.tile_input("z", coda.bf16, width=coda.Width.Double)
    c = g.col_input("c", coda.f32, width=coda.Width.Half)
    assert g.nodes[z.id].width == coda.Width.Double and g.nodes[c.id].width == coda.Width.Half
    assert g.display_name(acc.id) == "total"
    f = coda.Graph.finalize("fin")
    p = f.partials("parts", coda.ReduceOp.Lse)
    f.store(p, "out", coda.f32)
    coda.check(f)
    assert f.domain == coda.Domain.Finalize


def test_fp8_operands_are_k_major_gemm_inputs():
    g = coda.Graph.gemm("fp8", coda.GemmSpec(input=coda.e4m3))
    assert lines(g)[0] == "graph fp8 gemm in=e4m3 a=k b=k"
    g.store(g.accumulator() * g.row_input("scale_a", coda.f32) * g.col_input("scale_b", coda.f32), "out", coda.bf16)
    coda.check(g)
    assert coda.size_of(coda.e5m2) == 1
    bad = coda.Graph.gemm("fp8_mn", coda.GemmSpec(input=coda.e5m2, b=coda.Major.MN))
    bad.store(bad.accumulator(), "out", coda.bf16)
    with pytest.raises(coda.Error, match="must both be K-major"):
        coda.check(bad)


def test_promoted_fp8_accumulation_is_a_spec_field():
    # Opt-in, printed only when set (every other graph's text, hash and kernel stay as they were).
    spec = coda.GemmSpec(input=coda.e5m2, input_b=coda.e4m3, accumulation=coda.Accumulation.Promoted)
    assert spec.accumulation == coda.Accumulation.Promoted and "Promoted" in repr(spec)
    assert coda.GemmSpec(input=coda.e4m3).accumulation == coda.Accumulation.Fast
    wgrad = coda.blocks.wgrad_fp8_accumulate(spec=spec)
    assert coda.to_text(wgrad).splitlines()[0].endswith("acc=promoted")
    assert coda.parse_graph(coda.to_text(wgrad)) == wgrad
    assert "acc=" not in coda.to_text(coda.blocks.wgrad_fp8_accumulate()).splitlines()[0]
    bf16 = coda.Graph.gemm("bf16", coda.GemmSpec(accumulation=coda.Accumulation.Promoted))
    bf16.store(bf16.accumulator(), "out", coda.bf16)
    with pytest.raises(coda.Error, match="acc=promoted"):
        coda.check(bf16)


def test_copies_share_nodes_and_clones_do_not():
    g = out_proj_by_hand()
    clone = g.clone()
    assert clone == g
    g.store(g.accumulator(name="again"), "more", coda.f32)
    assert clone != g
    assert len(clone.nodes) + 2 == len(g.nodes)


def test_values_of_another_graph_are_an_error():
    g1, g2 = coda.Graph.tile("a"), coda.Graph.tile("b")
    x = g1.tile_input("x", coda.f32)
    with pytest.raises(coda.Error, match="graph"):
        g2.store(x, "y", coda.f32)


def test_text_round_trip_of_every_block():
    graphs = coda.blocks.llama_block()
    assert [g.name for g in graphs] == [
        "rms_entry", "out_proj", "rms_finalize", "gate_up_swiglu", "qkv_rope", "lm_head_ce", "lm_head_ce_stats",
        "ce_finalize", "lm_head_ce_backward", "lm_head_ce_backward_row_scale", "swiglu_backward", "swiglu_backward_tile",
        "rms_backward_finalize", "rmsnorm_backward", "rmsnorm_backward_bf16", "rmsnorm_backward_residual",
        "dgamma_finalize", "rope_backward", "rope_backward_from_output", "cross_entropy_backward",
        "cross_entropy_backward_row_scale"]
    for g in graphs:
        coda.check(g)
        assert coda.parse_graph(coda.to_text(g)) == g
        assert str(g) == coda.to_text(g)
    both = coda.parse_graphs("".join(coda.to_text(g) for g in graphs[:2]), source_name="two.coda")
    assert both == graphs[:2]
    from coda.blocks import out_proj

    assert out_proj() == graphs[1]
    assert coda.blocks.swiglu_backward().spec == coda.GemmSpec(b=coda.Major.MN)
    assert coda.blocks.out_proj(coda.GemmSpec(input=coda.f16)).spec.input == coda.f16


def test_parse_errors_are_coda_errors_with_the_line():
    with pytest.raises(coda.Error, match=r"broken\.coda:2"):
        coda.parse_graphs("graph g tile\n%x = frobnicate 1\n", source_name="broken.coda")
    with pytest.raises(coda.Error):
        coda.parse_graph("")


def test_invalid_graphs_raise_coda_error_naming_the_problem():
    g = coda.Graph.tile("bad")
    g.accumulator()  # a tile program has no accumulator
    g.store(g.tile_input("x", coda.f32), "x", coda.f32)  # an output named like an input
    problems = coda.problems(g)
    assert len(problems) >= 2
    with pytest.raises(coda.Error) as err:
        coda.check(g)
    message = str(err.value)
    for _, problem in problems:
        assert problem in message
    assert "bad" in message
    with pytest.raises(coda.Error):
        coda.bindings(g)


def test_bindings_of_out_proj():
    bindings = {b.name: b for b in coda.bindings(coda.blocks.out_proj())}
    assert set(bindings) == {"residual", "gamma", "x1", "h", "x1_sumsq"}
    assert (bindings["gamma"].role, bindings["gamma"].kind) == ("input", "col")
    assert (bindings["x1"].role, bindings["x1"].kind, bindings["x1"].dtype) == ("output", "tile", coda.bf16)
    assert bindings["x1_sumsq"].role == "row partials"


def test_enums_and_spec():
    assert coda.bf16 is coda.DType.BF16
    assert coda.size_of(coda.bf16) == 2 and coda.size_of(coda.f32) == 4
    spec = coda.GemmSpec(input=coda.f16, b=coda.Major.MN)
    assert (spec.input, spec.a, spec.b) == (coda.f16, coda.Major.K, coda.Major.MN)
    assert spec != coda.GemmSpec()
    assert "f16" in repr(spec)
    assert isinstance(coda.__version__, str) and coda.__version__.count(".") == 2


def test_store_transposed_builds_an_n_by_m_output():
    # The weight gradient's K-major operand: the tile written column by column, in FP8 here.
    np = pytest.importorskip("numpy")
    g = coda.Graph.gemm("transposed", coda.GemmSpec(input=coda.bf16, a=coda.Major.K, b=coda.Major.K))
    acc = g.accumulator()
    g.store(acc, "d", coda.bf16)
    g.store_transposed(g.mul(acc, g.scalar("inv_scale")), "d_t", coda.e4m3)
    coda.check(g)
    assert "= store_transposed e4m3 %" in coda.to_text(g)
    assert coda.parse_graph(coda.to_text(g)) == g
    binding = next(b for b in coda.bindings(g) if b.name == "d_t")
    assert binding.role == "output" and binding.transposed
    assert not next(b for b in coda.bindings(g) if b.name == "d").transposed
    a = np.arange(6, dtype=np.float64).reshape(3, 2) / 4  # exact in bf16
    b = np.array([[1.0, 0.5, 0.0, -1.0], [2.0, 0.0, 1.0, 0.25]])  # K x N
    out = coda.reference(g, {"A": a, "B": b, "inv_scale": 2.0}, 3, 4, 2)
    assert np.asarray(out["d_t"]).shape == (4, 3)
    np.testing.assert_allclose(np.asarray(out["d_t"]), 2.0 * (a @ b).T)
