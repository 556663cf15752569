"""The FP8 baselines' accumulation, named: torch._scaled_mm and torchao's float8 training each timed with fast
accumulation and with precise accumulation, the like-for-like one (fast) first.

coda's per-tensor FP8 mainloop never promotes its accumulator. cuBLAS does the same only with use_fast_accum=True;
torch's default (False) promotes it, which is more precise and slower, so a ratio against it alone is not like-for-like.
torchao's recipes choose per GEMM (Float8GemmConfig): its tensorwise recipe accumulates fast in the output GEMM only."""
import dataclasses

FAST, PRECISE = "fast-accum", "precise-accum"
# torch._scaled_mm's use_fast_accum for each label, the like-for-like one first.
ACCUMULATIONS = {FAST: True, PRECISE: False}
# The three GEMMs of a linear layer, as torchao's Float8LinearConfig names their gemm_config_* fields.
TORCHAO_GEMMS = ("output", "grad_input", "grad_weight")
TORCHAO_FAST = "fast accum"


def scaled_mm_variants(name, a, b, scale_a, scale_b):
    """{f"{name} {accumulation}": fn} of per-tensor torch._scaled_mm(a, b) -> bf16 in each accumulation, fast first."""
    import torch

    def call(fast):
        return lambda: torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16,
                                        use_fast_accum=fast)
    return {f"{name} {accum}": call(fast) for accum, fast in ACCUMULATIONS.items()}


def torchao_configs(recipe, float8=None):
    """{accumulation: config} of torchao's float8 training in `recipe`: the recipe's own config
    (Float8LinearConfig.from_recipe_name) and that config with fast accumulation in all three GEMMs, the latter first.
    One entry where the recipe's config accumulates fast in all three already, or where this torchao has no per-GEMM
    setting. `float8`: the torchao.float8 module (the tests pass a stand-in)."""
    if float8 is None:
        import torchao.float8 as float8
    default = float8.Float8LinearConfig.from_recipe_name(recipe)
    gemms = {g: getattr(default, f"gemm_config_{g}", None) for g in TORCHAO_GEMMS}
    if None in gemms.values() or not hasattr(float8, "Float8GemmConfig"):
        return {"default": default}
    precise = [g for g, config in gemms.items() if not config.use_fast_accum]
    if not precise:
        return {f"default: {TORCHAO_FAST}": default}
    fast = float8.Float8GemmConfig(use_fast_accum=True)
    return {TORCHAO_FAST: dataclasses.replace(default, **{f"gemm_config_{g}": fast for g in TORCHAO_GEMMS}),
            f"default: precise {', '.join(precise)}": default}


def speedups(ms, name, baselines):
    """'1.234x faster than B' for each baseline B (in the given order: the like-for-like one first) that ran beside
    `name` (ms: {system: ms})."""
    return [f"{ms[b] / ms[name]:.3f}x faster than {b}" for b in baselines if b in ms and name in ms]
