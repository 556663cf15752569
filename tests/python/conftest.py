"""Tests of the Python package. Tests marked gpu need a CUDA GPU and are skipped (reported, never passed) without."""

import pytest

import coda


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (skipped without one)")


def pytest_collection_modifyitems(config, items):
    if coda.device_available():
        return
    skip = pytest.mark.skip(reason=f"no GPU: {coda.device_unavailable_reason()}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def poison():
    """Every output a coda.torch launch writes is filled with NaN first, so a value a kernel failed to write shows."""
    from coda.torch import _kernels
    _kernels.POISON = True
    yield
    _kernels.POISON = False
