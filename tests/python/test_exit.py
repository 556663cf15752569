"""A process that uses coda exits cleanly: nanobind reports no leaked instance, type or function at interpreter exit.
Each check runs a fresh interpreter, since the report comes only at its exit."""
import os
import subprocess
import sys
import textwrap

import pytest

# A model step through coda.torch's ops (kernels compiled and cached on the GPU, the reference on the CPU), then
# torch.compile of the same model, then a plain coda kernel and graph held in the script's globals.
_SCRIPT = textwrap.dedent("""
    import sys
    import torch
    import coda
    import coda.torch as ct

    device = sys.argv[1]
    torch.manual_seed(0)
    model = ct.LlamaModel(vocab=512, d=256, n_layers=1, n_heads=2, ffn=512).to(device)
    if device == "cuda":
        model = model.bfloat16()
    tokens = torch.randint(0, 512, (2, 64), device=device)
    model(tokens, tokens).backward()
    if sys.argv[2] == "compile":
        torch.compile(model, fullgraph=True, backend="inductor" if device == "cuda" else "aot_eager")(
            tokens, tokens).backward()
    graph = coda.blocks.out_proj()
    kernel = coda.compile(graph) if device == "cuda" else None
    print("done")
""")


def _run(device: str, compiled: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.setdefault("CODA_LOG_LEVEL", "warn")
    return subprocess.run([sys.executable, "-c", _SCRIPT, device, compiled], env=env, capture_output=True, text=True,
                          timeout=900)


def _check(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.strip().endswith("done")
    leaks = [line for line in proc.stderr.splitlines() if "leaked" in line]
    assert not leaks, "\n".join(leaks[:20])


@pytest.mark.parametrize("compiled", ["eager", "compile"])
def test_cpu_process_exits_without_leaks(compiled):
    pytest.importorskip("torch")
    _check(_run("cpu", compiled))


@pytest.mark.gpu
@pytest.mark.parametrize("compiled", ["eager", "compile"])
def test_gpu_process_exits_without_leaks(compiled):
    pytest.importorskip("torch")
    _check(_run("cuda", compiled))
