"""Every kernel of a training step compiled before the step, in parallel: one dry run of the step records the
(graph, shape) of each coda launch without making it, then NVRTC builds them all at once into the kernel cache on a
thread pool (coda.warm releases the GIL; NVRTC is thread-safe and the cache locks per key), and the process loads
them from the disk cache. Without it the first step compiles each kernel when its op first runs, one after another."""
import concurrent.futures
import os
from typing import Callable, Optional

import torch

import coda
from coda.torch import _kernels


def warm_step(step: Callable[[], object], jobs: Optional[int] = None, arch: Optional[str] = None,
              load: bool = True) -> list[tuple[str, int, int, int]]:
    """Compiles every coda kernel `step()` launches, `jobs` at a time (default: one per CPU core), for `arch`
    (default: the current GPU's). With `load` (and a GPU), also loads them into this process, so the first real step
    compiles and loads nothing. Returns the launches as (graph, m, n, k), sorted. `step` runs once as a dry run: coda's
    launches are recorded, not made, and attention returns unwritten tensors; the .grad it leaves behind is the
    caller's to clear (the f32 buffers of fp32_grad_accumulation get nothing, nor do delayed FP8 scales)."""
    launches = sorted(_kernels.record_launches(step))
    target = arch or coda.device_arch()
    for name, *_ in launches:  # graphs built once, before the threads share them
        _kernels.graph(name)

    def build(launch):
        name, m, n, k = launch
        coda.warm(_kernels.graph(name), arch=target, shape=(m, n, k) if k else None)

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        list(pool.map(build, launches))
    if load and arch is None:
        for launch in launches:  # disk-cache hits, in this thread (the CUDA context's)
            _kernels.kernel(*launch)
    return launches


def warm(model: torch.nn.Module, batch: int, seq: int, jobs: Optional[int] = None,
         arch: Optional[str] = None) -> list[tuple[str, int, int, int]]:
    """warm_step for a training step of a coda.torch.LlamaModel on [batch x seq] tokens: its forward, loss and
    backward. Its gradients are cleared after the dry run."""
    device = next(model.parameters()).device
    tokens = torch.zeros(batch, seq, dtype=torch.long, device=device)
    try:
        return warm_step(lambda: model(tokens, tokens).backward(), jobs, arch)
    finally:
        model.zero_grad(set_to_none=True)
