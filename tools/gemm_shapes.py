"""The GEMM shape sets of `coda bench gemm --shapes`, for the Python side: tools/bench_torch.py times them and
tools/identity_table.py groups its summary by them. No torch import, so the table and its test run anywhere.
Keep the lists equal to gemm_shape_set and llama_shape_set in tools/coda/kernel_timing.cpp."""

# The shape set of docs/PERFORMANCE.md: M in {4096, 16384} x these (N, K).
SET_NK = [(4096, 4096), (6144, 4096), (14336, 4096), (4096, 14336), (2048, 2048), (8192, 8192)]
SET_M = [4096, 16384]
# --shapes llama: M = 8192 x the LLaMA-2-7B MLP, the TinyLlama-1.1B MLP and the LLaMA-3 LM head (N, K).
LLAMA_NK = [(11008, 4096), (4096, 11008), (5632, 2048), (2048, 5632), (128256, 4096)]
LLAMA_M = 8192

NAMES = ["set", "llama", "all"]


def shape_set(name):
    """The (M, N, K) of --shapes set, llama or all, in the order `coda bench gemm` runs them."""
    if name not in NAMES:
        raise ValueError(f"unknown shape set '{name}': expected one of {', '.join(NAMES)}")
    shapes = []
    if name in ("set", "all"):
        shapes += [(m, n, k) for m in SET_M for n, k in SET_NK]
    if name in ("llama", "all"):
        shapes += [(LLAMA_M, n, k) for n, k in LLAMA_NK]
    return shapes
