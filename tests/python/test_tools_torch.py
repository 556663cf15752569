"""The PyTorch benchmark tools' own logic on the CPU: bench_block's table printing (it once crashed on the rows
without a timing, after the whole run) and profile_block's matching of kernels to the coda launches that made them."""
import os
import sys
import types

import pytest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

torch = pytest.importorskip("torch")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import bench_block  # noqa: E402
import profile_block  # noqa: E402


def test_print_rows_takes_rows_without_timings(capsys):
    rows = [{"bench": "model step", "attention": "sdpa", "system": "coda (CUDA graph)", "ms": 117.741,
             "x_floor": 1.029, "tokens_per_s": 139153, "peak_GiB": "", "note": "memory held by the graph"},
            {"bench": "torch.compile of a coda model", "attention": "sdpa", "system": "coda + torch.compile",
             "ms": "", "x_floor": "", "tokens_per_s": "", "peak_GiB": "", "note": "FAILED: x"}]
    bench_block.print_rows(rows)
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and "117.741 ms" in out[0] and "FAILED: x" in out[1]


def gpu_event(name, start, end):
    span = types.SimpleNamespace(start=start, end=end, elapsed_us=lambda: end - start)
    return types.SimpleNamespace(name=name, device_type=torch.autograd.DeviceType.CUDA, time_range=span)


def test_kernels_are_matched_to_the_launch_whose_gpu_span_holds_them():
    launches = types.SimpleNamespace(records=[
        {"graph": "swiglu_backward", "m": 16384, "n": 8192, "k": 2048, "a_mn_major": False, "b_n_major": True,
         "bytes": 0},
        {"graph": "rms_finalize", "m": 16384, "n": 0, "k": 0, "a_mn_major": False, "b_n_major": False,
         "bytes": 4000}])
    floors = types.SimpleNamespace(copy_bytes_per_ms=1000.0, gemm_ms=lambda *shape: 0.5)
    events = [gpu_event("coda.run#0", 0, 1000), gpu_event("void coda::hopper_gemm<...>", 10, 990),
              gpu_event("coda.run#1", 2000, 2100), gpu_event("void coda::finalize_program<...>", 2010, 2090),
              gpu_event("nvjet_sm90_tst_128x256", 3000, 3500), gpu_event("triton_poi_fused_add", 3600, 3700)]
    cpu = types.SimpleNamespace(name="aten::mm", device_type=torch.autograd.DeviceType.CPU, time_range=None)
    rows = {r[0]: r[1:] for r in profile_block.kernel_rows(events + [cpu], 1, launches, floors)}
    assert rows["coda swiglu_backward 16384x8192x2048"] == (1, 0.98, 0.5)
    assert rows["coda rms_finalize 16384x0"] == (1, 0.08, 4.0)
    assert rows["nvjet_sm90_tst_128x256"] == (1, 0.5, 0.5)  # a cuBLAS GEMM is its own floor
    assert rows["triton_poi_fused_add"] == (1, 0.1, None)
