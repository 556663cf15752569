"""Tests of the Python package. Tests marked gpu need a CUDA GPU and are skipped (reported, never passed) without;
those also marked hopper need an sm_90 GPU (FP8 runs on the Hopper mainloop) and are skipped on another."""

import pytest

import coda


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (skipped without one)")
    config.addinivalue_line("markers", "hopper: needs an sm_90 GPU, with gpu (skipped on another GPU)")


def skipped_marker(available: bool, why: str, arch: str):
    """(the marker whose tests this machine skips, the reason), or None where every test can run."""
    if not available:
        return "gpu", f"no GPU: {why}"
    if not arch.startswith("sm_90"):
        return "hopper", f"needs Hopper (sm_90), this GPU is {arch}"
    return None


def pytest_collection_modifyitems(config, items):
    available = coda.device_available()
    skipped = skipped_marker(available, "" if available else coda.device_unavailable_reason(),
                             coda.device_arch() if available else "")
    if skipped is None:
        return
    marker, reason = skipped
    for item in items:
        if marker in item.keywords:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def poison():
    """Every output a coda.torch launch writes is filled with NaN first, so a value a kernel failed to write shows."""
    from coda.torch import _kernels
    _kernels.POISON = True
    yield
    _kernels.POISON = False
