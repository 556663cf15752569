"""The PyTorch benchmark tools' own logic on the CPU: bench_block's table printing (it once crashed on the rows
without a timing, after the whole run), its section choice and LLaMA-3.2-1B models (Hugging Face's and coda's from
the same weights), profile_block's matching of kernels to the coda launches that made them and its timeline of a
step, the order systems take their turns in, and the FP8 baselines in both accumulations (fp8_baselines)."""
import csv
import dataclasses
import os
import sys
import types

import pytest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

torch = pytest.importorskip("torch")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import bench_block  # noqa: E402
import fp8_baselines  # noqa: E402
import identity_table  # noqa: E402
import profile_block  # noqa: E402
from round_order import round_orders  # noqa: E402


def test_print_rows_takes_rows_without_timings(capsys):
    rows = [{"bench": "model step", "attention": "sdpa", "system": "coda (CUDA graph)", "ms": 117.741,
             "x_floor": 1.029, "tokens_per_s": 139153, "peak_GiB": "", "note": "memory held by the graph"},
            {"bench": "torch.compile of a coda model", "attention": "sdpa", "system": "coda + torch.compile",
             "ms": "", "x_floor": "", "tokens_per_s": "", "peak_GiB": "", "note": "FAILED: x"}]
    bench_block.print_rows(rows)
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and "117.741 ms" in out[0] and "FAILED: x" in out[1]


def test_print_rows_shows_a_hold_where_a_row_has_one(capsys):
    row = {"bench": "layer", "attention": "none", "system": "coda", "ms": 10.0, "x_floor": 1.1, "tokens_per_s": 1,
           "peak_GiB": 1.6, "note": ""}
    bench_block.print_rows([row, {**row, "alone_ms": 10.5, "MHz": 1755, "W": 690.4, "J": 7.249}])
    out = capsys.readouterr().out.splitlines()
    assert "alone" not in out[0]
    assert "alone 10.500 ms 1755 MHz 690 W 7.249 J" in out[1]


def test_hold_samples_are_taken_inside_each_window_after_the_settling_time():
    import power_hold
    # read_smi's samples: (time, MHz, W, reasons); system a held over [100, 103], b over [103, 106].
    samples = [(100.2, 1980, 300.0, ""), (101.0, 1800, 690.0, ""), (102.0, 1760, 700.0, ""),
               (103.4, 1500, 100.0, ""), (104.0, 1900, 500.0, ""), (105.0, 1910, 520.0, ""), (107.0, 1, 1.0, "")]
    stats = power_hold.summarize(samples, {"a": (100.0, 103.0), "b": (103.0, 106.0)}, skip=0.5)
    assert stats["a"] == (1780.0, 695.0, 2)  # 100.2 falls in the settling time
    assert stats["b"] == (1905.0, 510.0, 2)  # 103.4 too; 107 is after the hold
    assert power_hold.summarize([], {"a": (0.0, 1.0)})["a"] == (None, None, 0)


def gpu_event(name, start, end):
    span = types.SimpleNamespace(start=start, end=end, elapsed_us=lambda: end - start)
    return types.SimpleNamespace(name=name, device_type=torch.autograd.DeviceType.CUDA, time_range=span)


def test_kernels_are_matched_to_the_launch_whose_gpu_span_holds_them():
    launches = types.SimpleNamespace(records=[
        {"graph": "swiglu_backward", "m": 16384, "n": 8192, "k": 2048, "a_mn_major": False, "b_n_major": True,
         "fp8": False, "bytes": 0},
        {"graph": "rms_finalize", "m": 16384, "n": 0, "k": 0, "a_mn_major": False, "b_n_major": False,
         "fp8": False, "bytes": 4000},
        {"graph": "dgrad_fp8", "m": 16384, "n": 2048, "k": 8192, "a_mn_major": False, "b_n_major": False,
         "fp8": True, "bytes": 0}])
    # An FP8 GEMM's floor is torch._scaled_mm's (gemm_ms's last argument), a bf16 one torch.matmul's.
    floors = types.SimpleNamespace(copy_bytes_per_ms=1000.0, gemm_ms=lambda *shape: 0.25 if shape[-1] else 0.5)
    events = [gpu_event("coda.run#0", 0, 1000), gpu_event("void coda::hopper_gemm<...>", 10, 990),
              gpu_event("coda.run#1", 2000, 2100), gpu_event("void coda::finalize_program<...>", 2010, 2090),
              gpu_event("nvjet_sm90_tst_128x256", 3000, 3500), gpu_event("triton_poi_fused_add", 3600, 3700),
              gpu_event("coda.run#2", 4000, 4400), gpu_event("void coda::hopper_gemm<...>", 4010, 4390)]
    cpu = types.SimpleNamespace(name="aten::mm", device_type=torch.autograd.DeviceType.CPU, time_range=None)
    profiled = profile_block.Profiled(events + [cpu], 1, 0.0, 0.0)
    rows = {r[0]: r[1:] for r in profile_block.kernel_rows(profiled, launches, floors)}
    assert rows["coda swiglu_backward 16384x8192x2048"] == (1, 0.98, 0.5)
    assert rows["coda rms_finalize 16384x0"] == (1, 0.08, 4.0)
    assert rows["nvjet_sm90_tst_128x256"] == (1, 0.5, 0.5)  # a cuBLAS GEMM is its own floor
    assert rows["triton_poi_fused_add"] == (1, 0.1, None)
    assert rows["coda dgrad_fp8 16384x2048x8192"] == (1, 0.38, 0.25)


def test_timeline_counts_the_gpu_idle_between_kernels_once_per_step():
    # Two steps: kernels at [0, 100] and [50, 150] overlap (busy 150 once), then [200, 300]; the second step
    # [1000, 1100]. The annotations of coda's launches are not kernels.
    events = [gpu_event("coda.run#0", 0, 160), gpu_event("k1", 0, 100), gpu_event("k2", 50, 150),
              gpu_event("k3", 200, 300), gpu_event("ProfilerStep#1", 0, 1100), gpu_event("k4", 1000, 1100)]
    kernels, span, busy, idle, issue, wall = profile_block.timeline(profile_block.Profiled(events, 2, 0.25, 0.75))
    assert kernels == 2                       # 4 kernels in 2 steps
    assert span == pytest.approx(0.55)        # 1100 us over 2 steps, in ms
    assert busy == pytest.approx(0.175)       # (150 + 100 + 100) us / 2
    assert idle == pytest.approx(0.375)       # (50 + 700) us / 2
    assert (issue, wall) == (0.25, 0.75)


def test_gaps_are_grouped_by_the_kernels_around_them_and_counted_per_step():
    # k1 [0, 100] and k2 [50, 150] overlap: the gap after them (to k3 at 200) follows k2, the later end. Step two
    # repeats the pair k3 -> k1 with a longer gap; coda's annotations are neither kernels nor gaps.
    events = [gpu_event("k1", 0, 100), gpu_event("k2", 50, 150), gpu_event("coda.run#0", 150, 210),
              gpu_event("k3", 200, 300), gpu_event("k1", 340, 400), gpu_event("k3", 1000, 1100),
              gpu_event("k1", 1200, 1300)]
    rows = profile_block.gap_rows(profile_block.Profiled(events, 2, 0.0, 0.0), types.SimpleNamespace(records=[]))
    by_pair = {(before, after): tuple(rest) for before, after, *rest in rows}
    assert by_pair[("k3", "k1")] == (1.0, pytest.approx(0.07), 100)    # 40 + 100 us over 2 steps
    assert by_pair[("k1", "k3")] == (0.5, pytest.approx(0.3), 600)
    assert by_pair[("k2", "k3")] == (0.5, pytest.approx(0.025), 50)
    assert [r[:2] for r in rows] == [("k1", "k3"), ("k3", "k1"), ("k2", "k3")]  # the largest idle first


def test_only_selects_the_llama_section_by_its_name_and_model_does_not():
    sections = [(name, None) for name in ("layer d=2048 sdpa", "model step", "torch.compile fullgraph",
                                          "llama3.2-1b step")]
    assert [n for n, _ in bench_block.select_sections(sections, ["llama3.2-1b step"])] == ["llama3.2-1b step"]
    assert [n for n, _ in bench_block.select_sections(sections, ["model"])] == ["model step"]
    assert [n for n, _ in bench_block.select_sections(sections, ["step"])] == ["model step", "llama3.2-1b step"]
    assert bench_block.select_sections(sections, []) == sections


def test_systems_keeps_the_fp8_systems_named_by_a_part_of_their_name(monkeypatch):
    systems = {name: None for name in ("coda fp8", "coda fp8 wgrad", "coda fp8 rowwise wgrad", "coda bf16",
                                       "torchao tensorwise + compile", "FP8 GEMM floor")}
    monkeypatch.setattr(bench_block, "SYSTEMS", ["coda fp8 wgrad", "torchao tensorwise"])
    assert list(bench_block.kept_systems(systems)) == ["coda fp8 wgrad", "torchao tensorwise + compile"]
    monkeypatch.setattr(bench_block, "SYSTEMS", ["wgrad"])
    assert list(bench_block.kept_systems(systems)) == ["coda fp8 wgrad", "coda fp8 rowwise wgrad"]
    monkeypatch.setattr(bench_block, "SYSTEMS", [])
    assert bench_block.kept_systems(systems) == systems


def test_llama_rows_say_when_they_run_fewer_layers_than_the_model():
    full = bench_block.llama_label(bench_block.llama_fields(), 2, 8192)
    assert full.startswith("llama3.2-1b step 16 layers d=2048 V=128256 b=2x8192")
    shrunk = bench_block.llama_label(bench_block.llama_fields(8), 1, 8192)
    assert "8 (of 16) layers" in shrunk and "b=1x8192" in shrunk
    assert bench_block.LLAMA32_1B["num_hidden_layers"] == 16  # llama_fields copies, never changes it


def tiny_llama_fields():
    """LLaMA-3.2-1B's fields at toy widths: GQA, llama3 RoPE scaling and tied embeddings kept."""
    return bench_block.llama_fields(2, vocab_size=512, hidden_size=128, intermediate_size=256, num_attention_heads=4,
                                    num_key_value_heads=2, head_dim=32)


def test_hf_llama_is_llama32_1b_architecture():
    pytest.importorskip("transformers")
    hf, why = bench_block.hf_llama(bench_block.llama_fields(1, vocab_size=512), "meta")
    assert why == ""
    c = hf.config
    assert (c.hidden_size, c.intermediate_size, c.num_attention_heads, c.num_key_value_heads) == (2048, 8192, 32, 8)
    assert c.tie_word_embeddings and hf.lm_head.weight is hf.model.embed_tokens.weight
    assert c._attn_implementation == "sdpa" and not c.use_cache
    rope = dict(getattr(c, "rope_parameters", None) or c.rope_scaling)
    assert rope["rope_type"] == "llama3" and rope["factor"] == 32.0
    assert rope["original_max_position_embeddings"] == 8192
    assert {p.dtype for p in hf.parameters()} == {torch.bfloat16}
    assert torch.get_default_dtype() == torch.float32  # restored


def test_llama_models_compute_the_same_loss_from_the_same_weights():
    """The rows compare like with like: coda's model (CPU tensors run its reference) has Hugging Face's weights
    and its loss convention (labels = input ids, one position ahead), and keeps no logits."""
    pytest.importorskip("transformers")
    torch.manual_seed(0)
    hf, _, coda = bench_block.llama_models(tiny_llama_fields(), "cpu", torch.float32)
    assert not coda.head.store_logits and coda.tie_embeddings
    tokens = torch.randint(0, 512, (2, 64))
    expected = hf(input_ids=tokens, labels=tokens).loss.item()
    assert coda(tokens, tokens).item() == pytest.approx(expected, rel=1e-4)
    assert bench_block.ref.model_loss(coda, tokens, tokens).item() == pytest.approx(expected, rel=1e-4)


def test_llama_models_without_transformers_build_coda_from_the_fields(monkeypatch):
    monkeypatch.setattr(bench_block, "hf_llama", lambda fields, device, dtype: (None, "no transformers"))
    hf, why, coda = bench_block.llama_models(tiny_llama_fields(), "cpu", torch.float32)
    assert hf is None and why == "no transformers"
    assert coda.layers[0].n_kv_heads == 2 and coda.tie_embeddings and not coda.head.store_logits


def test_remember_first_loss_keeps_the_first_only():
    losses, values = {}, iter([torch.tensor(3.0), torch.tensor(2.0)])
    fwd = bench_block.remember_first_loss(lambda: next(values), losses, "coda")
    assert fwd().item() == 3.0 and fwd().item() == 2.0
    assert losses["coda"].item() == 3.0


def test_layer_sections_measure_grouped_query_layers_with_sdpa_only():
    sections = bench_block.layer_sections([(2048, 8192, 16, 16), (4096, 14336, 32, 8)])
    assert [s[0] for s in sections] == ["layer d=2048 none", "layer d=2048 sdpa", "layer d=4096 kv=8 sdpa"]
    assert sections[-1][1:] == (4096, 14336, 32, 8, "sdpa")
    assert bench_block.layer_label(4096, 14336, 32, 8) == "layer fwd+bwd d=4096 F=14336 GQA 32/8"
    assert bench_block.layer_label(2048, 8192, 16, 16) == "layer fwd+bwd d=2048 F=8192"


def test_split_swiglu_backward_is_set_only_while_its_system_runs():
    from coda.torch import ops
    seen = []
    run = bench_block.split_swiglu_backward(lambda: seen.append(ops.SWIGLU_BACKWARD))
    run()
    assert seen == ["split"] and ops.SWIGLU_BACKWARD == "fused"


def test_ab_builds_pairs_each_row_of_the_two_builds():
    import ab_builds
    table = ("epilogue        M      N      K         ms   TFLOP/s /identity  config\n"
             "identity     4096   4096   4096     {id:.4f}    1401.3         -  hopper bm=128 bn=128 pingpong\n"
             "blockwise    4096   4096   4096     {bw:.4f}     760.7     1.845  hopper bm=128 bn=128 cooperative\n")
    runs = [("A", ab_builds.parse_rows(table.format(id=0.1, bw=0.18))),
            ("B", ab_builds.parse_rows(table.format(id=0.1, bw=0.19))),
            ("B", ab_builds.parse_rows(table.format(id=0.1, bw=0.21))),
            ("A", ab_builds.parse_rows(table.format(id=0.1, bw=0.22)))]
    assert runs[0][1] == {("identity", 4096, 4096, 4096): 0.1, ("blockwise", 4096, 4096, 4096): 0.18}
    report = ab_builds.summarize(runs)
    assert "| blockwise | 4096 | 4096 | 4096 | 0.2000 | 0.2000 | 1.000 |" in report
    assert "identity: B / A geometric mean 1.000 over 1 shapes" in report
    # A row only one build printed (a failed run) has nothing to compare with.
    lonely = ab_builds.summarize([("A", {("x", 1, 1, 1): 1.0}), ("B", {})])
    assert "| x |" not in lonely and "1 of 2 runs printed no table rows" in lonely


def test_llama_fp8_model_takes_the_bf16_models_weights_and_trains():
    """The FP8 step's coda models: Hugging Face's weights (as the bf16 one), FP8 weight gradients but in block-wise, no
    logits stored; on the CPU their FP8 emulation's first loss is near bf16's."""
    pytest.importorskip("transformers")
    torch.manual_seed(0)
    hf, _, coda = bench_block.llama_models(tiny_llama_fields(), "cpu", torch.float32)
    models = {recipe: bench_block.llama_fp8_model(hf, recipe, "cpu", torch.float32)
              for recipe in bench_block.LLAMA_FP8_RECIPES}
    tokens = torch.randint(0, 512, (1, 64))
    expected = coda(tokens, tokens).item()
    for recipe, m in models.items():
        assert m.fp8_recipe == recipe
        assert all(layer.fp8_wgrad == (recipe != "blockwise") for layer in m.layers)
        assert not m.head.store_logits
        assert torch.equal(m.layers[1].w_down, coda.layers[1].w_down)
        loss = m(tokens, tokens)
        assert loss.item() == pytest.approx(expected, rel=0.05)
        loss.backward()
        assert m.layers[0].w_qkv.grad is not None


def test_round_orders_change_each_round_and_balance_positions_and_neighbours():
    names = ["a", "b", "c", "d"]
    orders = round_orders(names, 4)
    assert all(sorted(order) == names for order in orders)
    assert sorted(order[0] for order in orders) == names  # each system first once
    for position in range(4):  # and in every other position once
        assert sorted(order[position] for order in orders) == names
    pairs = [(o[i], o[i + 1]) for o in orders for i in range(3)]
    assert sorted(pairs) == sorted((x, y) for x in names for y in names if x != y)  # each follows each once
    # An odd count takes the mirrored rows too: over 2n rounds each system follows each other one twice.
    odd = round_orders(["a", "b", "c"], 6)
    odd_pairs = [(o[i], o[i + 1]) for o in odd for i in range(2)]
    assert all(odd_pairs.count((x, y)) == 2 for x in "abc" for y in "abc" if x != y)
    few = round_orders([f"s{i}" for i in range(13)], 3)  # fewer rounds than systems: still three orders
    assert len({tuple(o) for o in few}) == 3 and len({o[0] for o in few}) == 3
    assert round_orders([], 2) == [[], []]


def test_scaled_mm_variants_time_both_accumulations_fast_first(monkeypatch):
    calls = []
    monkeypatch.setattr(torch, "_scaled_mm", lambda a, b, **kw: calls.append(kw["use_fast_accum"]))
    variants = fp8_baselines.scaled_mm_variants("cublas", None, None, None, None)
    assert list(variants) == ["cublas fast-accum", "cublas precise-accum"]
    for fn in variants.values():
        fn()
    assert calls == [True, False]


@dataclasses.dataclass(frozen=True)
class FakeGemmConfig:
    use_fast_accum: bool = False


@dataclasses.dataclass(frozen=True)
class FakeLinearConfig:
    """torchao's Float8LinearConfig as far as fp8_baselines reads it: its tensorwise recipe accumulates fast in the
    output GEMM only; "fast" stands for a recipe whose config does so in all three."""
    gemm_config_output: FakeGemmConfig = FakeGemmConfig(use_fast_accum=True)
    gemm_config_grad_input: FakeGemmConfig = FakeGemmConfig()
    gemm_config_grad_weight: FakeGemmConfig = FakeGemmConfig()
    recipe: str = "tensorwise"

    @staticmethod
    def from_recipe_name(recipe):
        fast = FakeGemmConfig(use_fast_accum=True)
        if recipe == "fast":
            return FakeLinearConfig(fast, fast, fast, recipe)
        return FakeLinearConfig(recipe=recipe)


FAKE_FLOAT8 = types.SimpleNamespace(Float8LinearConfig=FakeLinearConfig, Float8GemmConfig=FakeGemmConfig)


def test_torchao_configs_add_fast_accumulation_in_all_three_gemms_first():
    configs = fp8_baselines.torchao_configs("tensorwise", FAKE_FLOAT8)
    assert list(configs) == ["fast accum", "default: precise grad_input, grad_weight"]
    fast, default = configs.values()
    assert default == FakeLinearConfig.from_recipe_name("tensorwise")  # the recipe's own config, untouched
    assert all(getattr(fast, f"gemm_config_{g}").use_fast_accum for g in fp8_baselines.TORCHAO_GEMMS)
    assert fast.recipe == "tensorwise"  # all else the recipe's
    # A recipe that accumulates fast in all three already is timed once, and says so.
    assert list(fp8_baselines.torchao_configs("fast", FAKE_FLOAT8)) == ["default: fast accum"]
    # A torchao without per-GEMM settings: its own config alone.
    bare = types.SimpleNamespace(Float8LinearConfig=types.SimpleNamespace(from_recipe_name=lambda recipe: "cfg"))
    assert fp8_baselines.torchao_configs("tensorwise", bare) == {"default": "cfg"}


def test_torchao_configs_of_the_installed_torchao():
    float8 = pytest.importorskip("torchao.float8")
    configs = fp8_baselines.torchao_configs("tensorwise", float8)
    assert list(configs)[0] == "fast accum" and len(configs) == 2
    fast = configs["fast accum"]
    assert all(getattr(fast, f"gemm_config_{g}").use_fast_accum for g in fp8_baselines.TORCHAO_GEMMS)


def test_torchao_systems_are_named_by_their_accumulation_and_kept_by_systems(monkeypatch):
    configs = fp8_baselines.torchao_configs
    monkeypatch.setattr(fp8_baselines, "torchao_configs", lambda recipe: configs(recipe, FAKE_FLOAT8))
    names = list(bench_block.torchao_systems("tensorwise"))
    assert names == ["torchao tensorwise + compile (fast accum)",
                     "torchao tensorwise + compile (default: precise grad_input, grad_weight)"]
    monkeypatch.setattr(bench_block, "SYSTEMS", ["torchao tensorwise"])
    assert list(bench_block.torchao_systems("tensorwise")) == names
    monkeypatch.setattr(bench_block, "SYSTEMS", ["fast accum"])
    assert list(bench_block.torchao_systems("tensorwise")) == names[:1]


def test_speedups_lead_with_the_like_for_like_baseline():
    ms = {"coda fp8 wgrad": 10.0, "torchao (fast accum)": 11.0, "torchao (default)": 12.5, "coda bf16": 13.0}
    gains = fp8_baselines.speedups(ms, "coda fp8 wgrad", ["torchao (fast accum)", "torchao (default)", "absent",
                                                          "coda bf16"])
    assert gains == ["1.100x faster than torchao (fast accum)", "1.250x faster than torchao (default)",
                     "1.300x faster than coda bf16"]
    assert fp8_baselines.speedups(ms, "not run", ["coda bf16"]) == []


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return str(path)


def test_identity_table_compares_fp8_with_the_fast_accum_rows_and_sets_the_precise_beside(tmp_path):
    shape = (16384, 4096, 4096)
    coda = write_csv(tmp_path / "coda.csv", identity_table.CODA_COLUMNS,
                     [["identity", *shape, 1.0, 1100.0, "hopper bm=128 bn=128"]])
    torch_csv = write_csv(tmp_path / "torch.csv", identity_table.TORCH_COLUMNS,
                          [["torch._scaled_mm fast-accum", *shape, 1.05, 1000.0],
                           ["torch._scaled_mm precise-accum", *shape, 1.2, 900.0]])
    assert identity_table.baseline_names(torch_csv, "torch._scaled_mm") == ["torch._scaled_mm fast-accum",
                                                                            "torch._scaled_mm precise-accum"]
    text = identity_table.table(coda, torch_csv, baseline="torch._scaled_mm")
    assert "| 16384 | 4096 | 4096 | 1000.0 | 1100.0 | 1.050 |" in text
    assert "Beside it, identity / torch._scaled_mm precise-accum: geometric mean 1.200 over the 12-shape set." in text
    assert "cuBLAS's (torch._scaled_mm fast-accum) time" in text
    # bf16's one row per shape is its own baseline, as before.
    plain = write_csv(tmp_path / "matmul.csv", identity_table.TORCH_COLUMNS, [["torch.matmul", *shape, 1.1, 1000.0]])
    assert identity_table.baseline_names(plain, "torch.matmul") == ["torch.matmul"]
    assert "Beside it" not in identity_table.table(coda, plain)


def test_liger_llama_loss_is_hugging_faces_loss(monkeypatch):
    """The Liger baseline scores what Hugging Face's loss scores (each position against the next token, the last
    one ignored), with a stand-in for Liger's fused loss: cross-entropy of x @ W^T, as its kernels compute it."""
    pytest.importorskip("transformers")

    class FusedLinearCrossEntropy:
        def __call__(self, weight, x, target):
            return torch.nn.functional.cross_entropy(x @ weight.t(), target, ignore_index=-100)

    module = types.ModuleType("liger_kernel.transformers.fused_linear_cross_entropy")
    module.LigerFusedLinearCrossEntropyLoss = FusedLinearCrossEntropy
    for name in ("liger_kernel", "liger_kernel.transformers"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, module.__name__, module)
    torch.manual_seed(0)
    hf, _ = bench_block.hf_llama(tiny_llama_fields(), "cpu", torch.float32)
    tokens = torch.randint(0, 512, (2, 64))
    loss = bench_block.liger_llama_loss(hf.model, hf.lm_head.weight)(tokens)
    assert loss.item() == pytest.approx(hf(input_ids=tokens, labels=tokens).loss.item(), rel=1e-5)


def test_llama_fp8_baselines_are_torchaos_accumulations_fast_first_and_built_only_if_kept(monkeypatch):
    configs = fp8_baselines.torchao_configs
    monkeypatch.setattr(fp8_baselines, "torchao_configs", lambda recipe: configs(recipe, FAKE_FLOAT8))
    monkeypatch.setattr(bench_block, "torchao_hf", lambda hf, config: config)
    monkeypatch.setattr(bench_block, "hf_compiled", lambda model: (model, None))
    baselines = bench_block.llama_fp8_baselines("hf", "rowwise")
    assert list(baselines) == ["HF Llama + torchao rowwise + compile (fast accum)",
                               "HF Llama + torchao rowwise + compile (default: precise grad_input, grad_weight)"]
    fast = baselines["HF Llama + torchao rowwise + compile (fast accum)"][0]
    assert fast.recipe == "rowwise" and fast.gemm_config_grad_weight.use_fast_accum
    monkeypatch.setattr(bench_block, "SYSTEMS", ["coda"])  # hf=None: building any of them would fail
    assert bench_block.llama_fp8_baselines(None, "blockwise") == {}
    assert bench_block.hf_liger(None) == {}


# --- tools/fp8_accumulation.py ----------------------------------------------------------------------------------------

def test_fp8_accumulation_quantizes_as_the_recipes_do_and_measures_against_the_same_operands(tmp_path):
    # On the CPU coda's GEMMs run the fp64 reference: their error against the exact product of the same quantized
    # operands is rounding to f32 alone, which tells the tool compares like with like (a wrong scale layout or operand
    # would be off by whole percent).
    import fp8_accumulation as acc

    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, 256, generator=g).bfloat16()
    b = torch.randn(256, 32, generator=g).bfloat16()
    for recipe in ("tensorwise", "rowwise", "blockwise"):
        a_q, a_s, b_q, b_s = acc.operands(recipe, a, b)
        assert a_q.dtype == (torch.float8_e5m2 if recipe == "tensorwise" else torch.float8_e4m3fn)
        step = 2 ** -2 if recipe == "tensorwise" else 2 ** -3  # one FP8 step of A's format, relative
        deq = acc.dequantized(recipe, a_q, a_s, 1)
        assert float((deq - a.double()).norm() / a.double().norm()) < step / 2
        expected_shape = {"tensorwise": (), "rowwise": (64, 1), "blockwise": (64, 2)}[recipe]
        assert tuple(a_s.shape) == expected_shape
        want = acc.exact(recipe, a_q, a_s, b_q, b_s, rows=16)
        assert acc.rel(acc.coda_product(recipe, a_q, a_s, b_q, b_s), want) < 1e-6
    assert acc.main(["--d", "128", "--tokens", "256", "--only", "wgrad o", "--out", str(tmp_path)]) == 0
    rows = (tmp_path / "fp8_accumulation.csv").read_text().splitlines()
    assert rows[0].startswith("recipe,gemm,m,k,n,coda") and len(rows) == 1 + 3


def test_ab_fp8_layer_times_the_tensorwise_wgrad_step_on_the_cpu(capsys):
    # The A/B tool uses only the API old wheels have too; its smoke run on the CPU's fp64 reference prints each round
    # and the median.
    import ab_fp8_layer
    assert ab_fp8_layer.main(["--cpu"]) == 0
    out = capsys.readouterr().out
    assert out.count("ms a step") == 3 and "median:" in out
