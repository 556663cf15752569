"""tools/fp8_loss_curve.py as a check: its loss gap and tolerances on synthetic curves (a recipe outside its tolerance
fails and is named), its fp32 master weights, tiny runs of main on the CPU's float64 reference path (passing a
generous tolerance and failing an impossible one; passing the defaults, and failing them with every FP8 value off by a
factor of two), and (marked gpu) a short run of every recipe."""
import csv
import importlib.util
import math
import os
import sys

import pytest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

torch = pytest.importorskip("torch")

_TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "fp8_loss_curve.py")
_spec = importlib.util.spec_from_file_location("fp8_loss_curve", _TOOL)
tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tool)

# The tensorwise recipe's delayed scales saturate in the first steps of a tiny model, which coda.torch.fp8 warns of;
# the exit status is what these runs are read for.
pytestmark = pytest.mark.filterwarnings("ignore:coda.torch. FP8 tensors of")

# The CPU runs' model: small enough for seconds on the float64 reference (16 tokens a batch: FP8 weight gradients
# need a multiple of 16).
TINY = ["--vocab", "32", "--d", "32", "--layers", "1", "--heads", "2", "--ffn", "40", "--seq", "8", "--batch", "2"]


def falling(first, last, steps=30):
    return [first + (last - first) * i / (steps - 1) for i in range(steps)]


def test_the_gap_is_the_mean_over_the_last_third_relative_to_bf16s_loss():
    bf16 = [2.0] * 30
    curve = [9.0] * 20 + [2.1] * 10  # far off until the last third
    assert tool.tail_gap(curve, bf16) == pytest.approx(0.1)
    assert tool.relative_gap(curve, bf16) == pytest.approx(0.05)


def test_a_curve_within_its_tolerance_passes_and_one_outside_fails():
    bf16 = falling(6.0, 2.0)
    curves = {"bf16": bf16, "tensorwise": [x + 0.01 for x in bf16], "rowwise+wgrad": [x * 1.05 for x in bf16],
              "blockwise": [math.nan] * 30}
    failed = tool.failures(curves, {"tensorwise": 0.02, "rowwise+wgrad": 0.03, "blockwise": 0.02})
    assert len(failed) == 2
    assert failed[0].startswith("fp8 rowwise+wgrad:") and "5.00%" in failed[0] and "3.00%" in failed[0]
    assert failed[1].startswith("fp8 blockwise:")  # a NaN loss fails
    assert tool.failures(curves, {"tensorwise": 0.02, "rowwise+wgrad": 0.06}) == []


def test_tolerances_come_from_the_table_max_gap_and_per_recipe_overrides():
    assert tool.tolerances_of(["rowwise", "rowwise+wgrad"], None, []) == {"rowwise": 0.02, "rowwise+wgrad": 0.03}
    assert tool.tolerances_of(["rowwise", "blockwise"], 0.1, ["blockwise=0.5"]) == {"rowwise": 0.1, "blockwise": 0.5}
    for overrides in (["tensorwise=0.1"], ["rowwise"], ["rowwise=x"]):
        with pytest.raises(ValueError, match="RECIPE=FRACTION with RECIPE one of --recipes"):
            tool.tolerances_of(["rowwise"], None, overrides)
    with pytest.raises(ValueError, match="no default tolerance for rowwise-new"):
        tool.tolerances_of(["rowwise-new"], None, [])
    assert tool.tolerances_of(["rowwise-new"], None, ["rowwise-new=0.1"]) == {"rowwise-new": 0.1}


def test_master_weights_are_fp32_and_the_bf16_parameters_their_rounding():
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 8, dtype=torch.bfloat16)
    optimizer = tool.MasterWeights(model.parameters(), lr=1e-3)
    stepped = [p for group in optimizer.optimizer.param_groups for p in group["params"]]
    assert stepped == optimizer.masters and all(m.dtype == torch.float32 for m in stepped)
    first = [m.clone() for m in optimizer.masters]
    x = torch.randn(4, 16, dtype=torch.bfloat16)
    for _ in range(3):
        optimizer.zero_grad()
        model(x).square().mean().backward()
        optimizer.step()
    for p, master, start in zip(model.parameters(), optimizer.masters, first):
        assert p.dtype == torch.bfloat16
        assert torch.equal(p, master.to(torch.bfloat16))
        # Three Adam steps of about 1e-3 each: below bf16's resolution in places, which the masters keep.
        assert (master - start).abs().max() > 1e-3
        assert not torch.equal(master, master.to(torch.bfloat16).float())


cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU's float64 reference path")


@cpu_only
def test_a_tiny_cpu_run_passes_a_generous_tolerance_and_fails_an_impossible_one(tmp_path, capsys):
    argv = TINY + ["--steps", "6", "--out", str(tmp_path), "--max-gap", "1"]
    assert tool.main(argv) == 0
    with open(tmp_path / "fp8_loss_curve.csv") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["step", "fp32", "bf16"] + [f"fp8 {recipe}" for recipe in tool.TOLERANCES]
    assert len(rows) == 1 + 6
    capsys.readouterr()
    assert tool.main(argv + ["--recipes", "blockwise,rowwise+wgrad", "--tolerance", "rowwise+wgrad=1e-12"]) == 1
    out = capsys.readouterr().out
    assert "FAILED fp8 rowwise+wgrad: loss gap to bf16" in out and "FAILED fp8 blockwise" not in out
    assert "1 of 2 FP8 recipes within their tolerance" in out


def double_fp8_stores(monkeypatch):
    """Makes every FP8 value coda.torch's kernels store twice what its scale says, as a wrong scale would."""
    from coda.torch import _kernels
    run = _kernels.run

    def doubled(name, inputs, outputs, *args, **kwargs):
        made = run(name, inputs, outputs, *args, **kwargs)
        for out in outputs.values():
            if out.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
                largest = torch.finfo(out.dtype).max
                out.copy_((out.double() * 2).clamp(-largest, largest))
        return made

    # The modules bind run by name at import.
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("coda.torch") and getattr(module, "run", None) is run:
            monkeypatch.setattr(module, "run", doubled)


@cpu_only
def test_recipes_with_a_wrong_scale_fail_the_default_tolerances_that_they_pass(tmp_path, capsys, monkeypatch):
    recipes = ["tensorwise", "rowwise+wgrad", "blockwise"]
    argv = TINY + ["--steps", "30", "--out", str(tmp_path), "--recipes", ",".join(recipes)]
    assert tool.main(argv) == 0
    capsys.readouterr()
    double_fp8_stores(monkeypatch)
    assert tool.main(argv) == 1
    out = capsys.readouterr().out
    for recipe in recipes:
        assert f"FAILED fp8 {recipe}: loss gap to bf16" in out


@pytest.mark.gpu
@pytest.mark.hopper
def test_every_recipe_tracks_bf16_over_a_short_run_on_the_gpu(tmp_path):
    argv = ["--vocab", "512", "--d", "256", "--layers", "2", "--heads", "4", "--ffn", "688", "--seq", "256",
            "--batch", "4", "--steps", "60", "--out", str(tmp_path)]
    assert tool.main(argv) == 0
    with open(tmp_path / "fp8_loss_curve.csv") as f:
        rows = list(csv.DictReader(f))
    for recipe in tool.TOLERANCES:
        curve = [float(row[f"fp8 {recipe}"]) for row in rows]
        assert curve[-1] < curve[0] - 1.0, (recipe, curve[0], curve[-1])
