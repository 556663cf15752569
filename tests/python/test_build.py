"""Configs, generated source and warm (NVRTC, no GPU) through the binding."""

import pytest

import coda


def test_kernel_config_text_both_ways():
    c = coda.KernelConfig.parse("hopper bm=128 bn=256 cooperative")
    assert str(c) == "hopper bm=128 bn=256 bk=64 stages=6 cooperative cluster=1"
    assert (c.mainloop, c.bm, c.bn) == ("hopper", 128, 256)
    assert coda.KernelConfig.parse(str(c)) == c
    p = coda.KernelConfig.parse("bm=64")
    assert p.mainloop == "portable" and p.bm == 64 and p != c
    assert str(p).startswith("portable bm=64 bn=128")
    with pytest.raises(coda.Error, match="frob"):
        coda.KernelConfig.parse("hopper frob=3")


def test_default_config():
    g = coda.blocks.out_proj()
    assert str(coda.default_config(g, "sm_90a")) == "hopper bm=128 bn=128 bk=64 stages=6 pingpong cluster=1"
    assert coda.default_config(g, "sm_80").mainloop == "portable"
    assert coda.default_config(g, "sm_90a", shape=(4096, 2048, 2048)) is not None
    assert coda.default_config(coda.blocks.rms_finalize(), "sm_90a") is None


@pytest.mark.parametrize("graph", coda.blocks.llama_block(), ids=lambda g: g.name)
def test_source_and_warm_of_every_block_without_a_gpu(graph):
    source = coda.source(graph, arch="sm_90a")
    assert "extern \"C\"" in source or "__global__" in source
    for binding in coda.bindings(graph):
        assert binding.name in source
    report = coda.warm(graph, arch="sm_90a")
    assert isinstance(report, coda.BuildReport)
    assert report.arch == "sm_90a"
    assert report.kernel_name.startswith(graph.name + "-")
    assert report.origin in ("memory", "disk", "compiled")
    assert report.seconds >= 0
    again = coda.warm(graph, arch="sm_90a")
    assert again.origin == "memory" and again.cache_key == report.cache_key


def test_config_and_shape_reach_the_source():
    g = coda.blocks.out_proj()
    hopper = coda.source(g, arch="sm_90a", config="hopper bm=128 bn=256 cooperative")
    portable = coda.source(g, arch="sm_90a", config=coda.KernelConfig.parse("portable"))
    assert hopper != portable
    assert coda.source(g, arch="sm_90a", shape=(256, 256, 64)) == coda.source(g, arch="sm_90a")
    report = coda.warm(g, arch="sm_80")
    assert report.arch == "sm_80" and report.registers != 0


def test_build_errors_are_coda_errors():
    with pytest.raises(coda.Error, match="config"):
        coda.source(coda.blocks.rms_finalize(), arch="sm_90a", config="portable")
    with pytest.raises(coda.Error, match="sm_90a"):
        coda.warm(coda.blocks.out_proj(), arch="sm_80", config="hopper")
    with pytest.raises(coda.Error, match="sm_"):
        coda.warm(coda.blocks.out_proj(), arch="sm_70")
    with pytest.raises(TypeError):
        coda.warm(coda.blocks.out_proj(), arch="sm_90a", config=3)
    bad = coda.Graph.tile("bad")
    bad.accumulator()
    with pytest.raises(coda.Error, match="bad"):
        coda.warm(bad, arch="sm_90a")


@pytest.mark.skipif(coda.device_available(), reason="a GPU is present")
def test_without_a_gpu_compile_says_why():
    assert coda.device_unavailable_reason()
    with pytest.raises(coda.Error, match="driver|GPU|device"):
        coda.compile(coda.blocks.rms_finalize())


def test_gpu_tests_skip_where_their_gpu_is_missing():
    from conftest import skipped_marker
    assert skipped_marker(False, "no driver", "") == ("gpu", "no GPU: no driver")
    assert skipped_marker(True, "", "sm_80") == ("hopper", "needs Hopper (sm_90), this GPU is sm_80")
    assert skipped_marker(True, "", "sm_90a") is None
