#!/usr/bin/env python3
"""Merges one device run of tools/bench_identity.sh into a markdown table: per shape cuBLAS (torch.matmul; with FP8,
torch._scaled_mm with fast accumulation, as coda's, and its precise accumulation's means beside) against coda's
identity epilogue, and what the GPU did while each ran alone: the median SM clock and power of the nvidia-smi samples
inside its HOLD interval (`coda bench gemm --hold-ms`, `tools/bench_torch.py --hold-ms`), the first HOLD_SKIP_S of
each interval dropped while the clock settles, and the energy of one GEMM (median power x its time). Then the
geometric mean and minimum of identity / cuBLAS over the 12-shape set and over the LLaMA shapes (tools/gemm_shapes.py),
against the targets. With --ncu, per shape the instructions of each kernel per output tile.

nvidia-smi's timestamps are in local time: run this on the machine that sampled (as bench_identity.sh does), or
with TZ set to its zone. The power column is whichever the sampler asked for (bench_identity.sh: power.draw.instant
where the driver has it, else power.draw, a one-second average on recent GPUs).

Usage: python3 tools/identity_table.py CODA_CSV TORCH_CSV [--smi SMI_CSV] [--holds LOG ...] [--ncu NCU_CSV ...]"""
import argparse
import csv
import datetime
import math
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fp8_baselines import ACCUMULATIONS  # noqa: E402
from gemm_shapes import shape_set  # noqa: E402
from gemm_table import read_rows  # noqa: E402

HOLD_SKIP_S = 0.2  # the clock is still falling toward its power-limited level at the start of a hold
TARGET_GEOMEAN = 1.03  # identity / cuBLAS over a shape group
TARGET_MIN = 0.97  # no shape below this

CODA_COLUMNS = ["epilogue", "m", "n", "k", "ms", "tflops", "config"]  # coda bench gemm --csv
TORCH_COLUMNS = ["name", "m", "n", "k", "ms", "tflops"]  # tools/bench_torch.py --csv
HOLD_LINE = re.compile(r"^HOLD (\w+) (\d+) (\d+) (\d+) (start|stop) (\d+(?:\.\d*)?)$")
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
NCU_NAME = re.compile(r"ncu_(\w+?)_(\d+)x(\d+)x(\d+)\.csv$")
NCU_METRICS = {
    "instructions": "smsp__inst_executed.sum",
    "cycles": "sm__cycles_elapsed.max",
    "active_cycles": "smsp__cycles_active.avg",
    "gmma": "sm__inst_executed_pipe_tensor_op_gmma.sum",  # wgmma (Hopper)
    "hmma": "sm__inst_executed_pipe_tensor_op_hmma.sum",  # mma.sync
    # Each SM's cycles with a CTA resident: an SM idle at the start or the tail shows as min (or mean) below elapsed.
    "sm_active_min": "sm__cycles_active.min",
    "sm_active_avg": "sm__cycles_active.avg",
    "sm_active_max": "sm__cycles_active.max",
    "dram_read": "dram__bytes_read.sum",
    "dram_write": "dram__bytes_write.sum",
}


def read_csv(path, name_column, name, expected):
    """{(m, n, k): row} of the rows of a benchmark CSV whose `name_column` is `name`."""
    return {key[1:]: row for key, row in read_rows(path, name_column, expected).items() if key[0] == name}


def read_holds(lines):
    """{(who, (m, n, k)): [(start, stop), ...]} from HOLD lines among any other lines; a start without its stop
    (a run that died) is dropped."""
    holds, open_starts = {}, {}
    for line in lines:
        match = HOLD_LINE.match(line.strip())
        if not match:
            continue
        who, m, n, k, edge, at = match.groups()
        key = (who, (int(m), int(n), int(k)))
        if edge == "start":
            open_starts[key] = float(at)
        elif key in open_starts:
            holds.setdefault(key, []).append((open_starts.pop(key), float(at)))
    return holds


def parse_smi_time(text):
    """nvidia-smi's timestamp ("2026/12/04 11:31:02.123", local time) as Unix seconds."""
    return datetime.datetime.strptime(text.strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()


def first_number(text):
    """The number in a field like "1410 MHz" or "695.12 W"; None for "[N/A]" and the like."""
    match = NUMBER.search(text)
    return float(match.group()) if match else None


def smi_fields(lines):
    """The field names of the samples, from a first line like "timestamp,clocks.sm,power.draw.instant,..."
    (bench_identity.sh writes it); None without one."""
    first = lines[0].strip() if lines else ""
    return first.split(",") if first.startswith("timestamp,") else None


def read_smi(lines):
    """Samples of `nvidia-smi --query-gpu=timestamp,clocks.sm,<power>,temperature.gpu,<reasons>
    --format=csv,noheader` as (time, MHz, W, reasons); lines that are not samples (a header, a message) are skipped."""
    samples = []
    for fields in csv.reader(lines):
        if len(fields) < 3:
            continue
        try:
            at = parse_smi_time(fields[0])
        except ValueError:
            continue
        reasons = fields[4].strip() if len(fields) > 4 else ""
        samples.append((at, first_number(fields[1]), first_number(fields[2]), reasons))
    return samples


def in_holds(samples, intervals, skip=HOLD_SKIP_S):
    """The samples inside any of the intervals, each interval's first `skip` seconds left out."""
    return [s for s in samples if any(start + skip <= s[0] <= stop for start, stop in intervals)]


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def hold_stats(samples, holds, who, shape):
    """(median MHz, median W, sample count) of one side's hold at a shape; Nones when nothing was sampled."""
    inside = in_holds(samples, holds.get((who, shape), []))
    return median(s[1] for s in inside), median(s[2] for s in inside), len(inside)


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def shape_text(shape):
    return "x".join(map(str, shape))


def fmt(value, digits):
    return "—" if value is None else f"{value:.{digits}f}"


def summary(label, ratios, expected):
    """Geometric mean and minimum of identity / cuBLAS over the shapes of `expected` that were measured."""
    measured = [(s, ratios[s]) for s in expected if s in ratios]
    if not measured:
        return [f"{label}: no shape measured by both."]
    values = [r for _, r in measured]
    mean = geomean(values)
    worst_shape, worst = min(measured, key=lambda item: item[1])
    missing = [s for s in expected if s not in ratios]
    lines = [f"{label}, identity / cuBLAS over {len(measured)} of {len(expected)} shapes: geometric mean "
             f"**{mean:.3f}** (target >= {TARGET_GEOMEAN}: {'met' if mean >= TARGET_GEOMEAN else 'NOT met'}); "
             f"minimum **{worst:.3f}** at {shape_text(worst_shape)} "
             f"(target >= {TARGET_MIN}: {'met' if worst >= TARGET_MIN else 'NOT met'})."]
    if missing:
        lines.append(f"{label}: not measured by both: {', '.join(map(shape_text, missing))}.")
    return lines


def coda_tile(config, kernel_name):
    """coda's CTA tile (bm, bn): from its config text (`hopper bm=128 bn=256 ...`), else from the kernel's
    template arguments (coda::hopper_gemm<T, a_k_major, b_k_major, BM, BN, ...>)."""
    bm, bn = re.search(r"\bbm=(\d+)", config or ""), re.search(r"\bbn=(\d+)", config or "")
    if bm and bn:
        return int(bm.group(1)), int(bn.group(1))
    match = re.search(r"hopper_gemm(?:_pair)?<[^,>]+,[^,>]+,[^,>]+,\s*(\d+),\s*(\d+)", kernel_name)
    return (int(match.group(1)), int(match.group(2))) if match else None


def cublas_tile(kernel_name):
    """The output tile in a cuBLAS kernel's name: nvjet_sm90_tst_256x128_64x4_... -> (256, 128);
    sm90_xmma_gemm_..._tilesize128x256x64... and CUTLASS's ..._256x128x64_... -> the first two. None if absent."""
    for pattern in (r"nvjet_\w*?_(\d+)x(\d+)_\d+x\d+", r"tilesize(\d+)x(\d+)x\d+", r"_(\d+)x(\d+)x\d+_"):
        match = re.search(pattern, kernel_name)
        if match:
            return int(match.group(1)), int(match.group(2))
    return None


UNIT_SCALE = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def ncu_value(text, unit):
    """A metric of ncu's raw CSV page ("151,234,567"), scaled if its unit carries a prefix ("Minst")."""
    value = first_number(text.replace(",", ""))
    if value is not None and unit[:1] in UNIT_SCALE and unit[1:] in ("inst", "cycle", "byte"):
        value *= UNIT_SCALE[unit[:1]]
    return value


def read_ncu(lines):
    """The first kernel of `ncu --import REPORT --csv --page raw` output: {"kernel": name, metric key: value}.
    Lines before the header (ncu's own messages) are skipped, and the row of units after it is read as units."""
    rows = list(csv.reader(lines))
    header_at = next((i for i, r in enumerate(rows) if "ID" in r and "Kernel Name" in r), None)
    if header_at is None:
        return None
    header = rows[header_at]
    units = {}
    for row in rows[header_at + 1:]:
        record = dict(zip(header, row))
        if not record.get("ID", "").strip().isdigit():
            units = record  # the units row
            continue
        result = {"kernel": record.get("Kernel Name", "")}
        for key, metric in NCU_METRICS.items():
            if metric in record:
                result[key] = ncu_value(record[metric], units.get(metric, ""))
        return result
    return None


def active_share(kernel):
    """Each SM's resident cycles over the kernel's elapsed cycles, "min / mean / max" (— without the metrics)."""
    cycles = kernel.get("cycles")
    shares = [kernel.get(f"sm_active_{s}") for s in ("min", "avg", "max")]
    if not cycles or any(v is None for v in shares):
        return "—"
    return " / ".join(f"{v / cycles:.3f}" for v in shares)


def dram_gb(kernel):
    read, write = kernel.get("dram_read"), kernel.get("dram_write")
    return "—" if read is None or write is None else f"{(read + write) / 1e9:.2f}"


def ncu_table(paths, coda):
    """Instructions per output tile per kernel, from files named ncu_<coda|cublas>_<M>x<N>x<K>.csv."""
    lines = ["| M | N | K | side | kernel | tile | tiles | instructions (M) | tensor-pipe instructions (M) "
             "| elapsed cycles | instructions per tile | SM active / elapsed (min, mean, max) | DRAM GB (read + write) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    named = []
    for path in paths:
        match = NCU_NAME.search(os.path.basename(path))
        if not match:
            lines.append(f"(skipped {path}: not named ncu_<side>_<M>x<N>x<K>.csv)")
            continue
        named.append((tuple(int(g) for g in match.group(2, 3, 4)), match.group(1), path))
    for shape, side, path in sorted(named):  # by shape, then side
        with open(path, newline="", errors="replace") as f:
            kernel = read_ncu(f.read().splitlines())
        if kernel is None:
            lines.append(f"| {shape[0]} | {shape[1]} | {shape[2]} | {side} | (no kernel in {os.path.basename(path)}) "
                         "| — | — | — | — | — | — | — | — |")
            continue
        name = kernel["kernel"].split("(")[0].removeprefix("void ")
        if side == "coda":
            row = coda.get(shape)
            tile = coda_tile(row["config"] if row else "", kernel["kernel"])
        else:
            tile = cublas_tile(name)
        # The tile's first number taken along M: cuBLAS's names may mean N (it sees the transposed problem),
        # which changes the count only where M or N is not a multiple of both numbers.
        tiles = math.ceil(shape[0] / tile[0]) * math.ceil(shape[1] / tile[1]) if tile else None
        instructions = kernel.get("instructions")
        # wgmma counts on the gmma pipe; a kernel of mma.sync on hmma.
        tensor = kernel.get("gmma") if kernel.get("gmma") else kernel.get("hmma", kernel.get("gmma"))
        per_tile = instructions / tiles if instructions is not None and tiles else None
        short = name if len(name) <= 70 else name[:67] + "..."
        lines.append(f"| {shape[0]} | {shape[1]} | {shape[2]} | {side} | `{short}` | "
                     f"{'x'.join(map(str, tile)) if tile else '—'} | {tiles if tiles else '—'} | "
                     f"{fmt(instructions / 1e6 if instructions is not None else None, 1)} | "
                     f"{fmt(tensor / 1e6 if tensor is not None else None, 2)} | "
                     f"{fmt(kernel.get('cycles'), 0)} | {fmt(per_tile, 0)} | {active_share(kernel)} | "
                     f"{dram_gb(kernel)} |")
    return lines


def blockwise_table(coda_path, identity, samples, holds):
    """With `coda bench gemm --block-scales --hold-ms`: per shape the block-scaled identity against the per-tensor one,
    each timed in the same interleaved rounds and held alone: the time ratio split into clock and cycles (time =
    cycles / clock, so cycles ratio = time ratio x clock ratio) and each one's energy per GEMM. Empty without a
    coda_blockwise hold."""
    if not any(who == "coda_blockwise" for who, _ in holds):
        return []
    blockwise = read_csv(coda_path, "epilogue", "blockwise", CODA_COLUMNS)
    lines = ["", "Block-scaled against per-tensor (coda's identity), each held alone:", "",
             "| M | N | K | per-tensor ms | block-scaled ms | time ratio | per-tensor MHz | block-scaled MHz "
             "| cycles ratio | per-tensor W | block-scaled W | per-tensor mJ/GEMM | block-scaled mJ/GEMM | energy ratio |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    times, cycles, energies = [], [], []
    for shape in blockwise:
        p, b = identity.get(shape), blockwise[shape]
        p_ms, b_ms = (float(p["ms"]) if p else None), float(b["ms"])
        p_mhz, p_w, _ = hold_stats(samples, holds, "coda", shape)
        b_mhz, b_w, _ = hold_stats(samples, holds, "coda_blockwise", shape)
        time_ratio = b_ms / p_ms if p_ms else None
        cycle_ratio = time_ratio * b_mhz / p_mhz if time_ratio and b_mhz and p_mhz else None
        p_mj = p_w * p_ms if p_w is not None and p_ms else None
        b_mj = b_w * b_ms if b_w is not None else None
        energy_ratio = b_mj / p_mj if b_mj and p_mj else None
        for values, v in ((times, time_ratio), (cycles, cycle_ratio), (energies, energy_ratio)):
            if v:
                values.append(v)
        lines.append(f"| {shape[0]} | {shape[1]} | {shape[2]} | {fmt(p_ms, 4)} | {fmt(b_ms, 4)} | "
                     f"{fmt(time_ratio, 3)} | {fmt(p_mhz, 0)} | {fmt(b_mhz, 0)} | {fmt(cycle_ratio, 3)} | "
                     f"{fmt(p_w, 0)} | {fmt(b_w, 0)} | {fmt(p_mj, 1)} | {fmt(b_mj, 1)} | {fmt(energy_ratio, 3)} |")
    lines.append("")
    means = [f"{label} {geomean(values):.3f} ({len(values)} shape{'' if len(values) == 1 else 's'})"
             for label, values in (("time", times), ("cycles", cycles), ("energy", energies)) if values]
    lines.append("Block-scaled over per-tensor, geometric means: " + (", ".join(means) if means else "—") + ". "
                 "Times from the interleaved rounds; MHz and W from the holds; cycles ratio = time ratio x the "
                 "block-scaled clock / the per-tensor clock (below the time ratio: the block-scaled kernel ran at a "
                 "lower clock).")
    return lines


def baseline_names(torch_path, baseline):
    """The torch CSV's row names that stand for `baseline`: the name itself, or where bench_torch.py wrote it once per
    accumulation (torch._scaled_mm), each of those, the like-for-like one (fast) first."""
    names = {key[0] for key in read_rows(torch_path, "name", TORCH_COLUMNS)}
    return [n for n in (f"{baseline} {accum}" for accum in ACCUMULATIONS) if n in names] or [baseline]


def beside_line(name, ratios):
    """The geometric means of identity / `name` (a baseline beside the table's) over each shape group it measured."""
    means = [f"{geomean([ratios[s] for s in shape_set(group) if s in ratios]):.3f} over the {label}"
             for group, label in (("set", "12-shape set"), ("llama", "LLaMA shapes"))
             if any(s in ratios for s in shape_set(group))]
    return f"Beside it, identity / {name}: geometric mean " + (", ".join(means) if means else "— (no shape)") + "."


def table(coda_path, torch_path, smi_path=None, hold_paths=(), ncu_paths=(), baseline="torch.matmul"):
    coda = read_csv(coda_path, "epilogue", "identity", CODA_COLUMNS)
    baselines = baseline_names(torch_path, baseline)
    cublas = read_csv(torch_path, "name", baselines[0], TORCH_COLUMNS)
    hold_lines = []
    for path in hold_paths:
        with open(path, errors="replace") as f:
            hold_lines += f.read().splitlines()
    holds = read_holds(hold_lines)
    samples, fields = [], None
    if smi_path:
        with open(smi_path, errors="replace") as f:
            smi_lines = f.read().splitlines()
        samples, fields = read_smi(smi_lines), smi_fields(smi_lines)
    shapes = list(coda) + [s for s in cublas if s not in coda]  # in the order coda ran them

    lines = ["| M | N | K | cuBLAS TFLOP/s | coda identity TFLOP/s | identity / cuBLAS | coda config "
             "| cuBLAS MHz | coda MHz | cuBLAS W | coda W | cuBLAS mJ/GEMM | coda mJ/GEMM |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    ratios, counts, held_samples = {}, [], []
    for shape in shapes:
        c, b = coda.get(shape), cublas.get(shape)
        c_ms = float(c["ms"]) if c else None
        b_ms = float(b["ms"]) if b else None
        if c_ms and b_ms:
            ratios[shape] = b_ms / c_ms  # speed ratio: above 1, coda is faster
        cells = [str(shape[0]), str(shape[1]), str(shape[2]), fmt(float(b["tflops"]) if b else None, 1),
                 fmt(float(c["tflops"]) if c else None, 1), fmt(ratios.get(shape), 3),
                 f"`{c['config']}`" if c else "—"]
        stats = {}
        for who in ("cublas", "coda"):
            stats[who] = hold_stats(samples, holds, who, shape)
            if (who, shape) in holds:
                counts.append(stats[who][2])
                held_samples += in_holds(samples, holds[(who, shape)])
        cells += [fmt(stats["cublas"][0], 0), fmt(stats["coda"][0], 0), fmt(stats["cublas"][1], 0),
                  fmt(stats["coda"][1], 0)]
        for who, ms in (("cublas", b_ms), ("coda", c_ms)):
            watts = stats[who][1]
            cells.append(fmt(watts * ms if watts is not None and ms is not None else None, 1))  # W x ms = mJ
        lines.append("| " + " | ".join(cells) + " |")

    lines.append("")
    lines += summary("12-shape set", ratios, shape_set("set"))
    lines += summary("LLaMA shapes (M=8192)", ratios, shape_set("llama"))
    others = [s for s in ratios if s not in shape_set("all")]
    if others:
        lines.append(f"Other shapes, geometric mean of identity / cuBLAS: {geomean([ratios[s] for s in others]):.3f}.")
    for name in baselines[1:]:
        other = read_csv(torch_path, "name", name, TORCH_COLUMNS)
        lines.append(beside_line(name, {s: float(other[s]["ms"]) / float(coda[s]["ms"]) for s in coda if s in other}))
    lines.append(f"identity / cuBLAS is cuBLAS's ({baselines[0]}) time over coda's (above 1: coda is faster). MHz and "
                 "W: medians of the nvidia-smi samples while each kernel ran alone (HOLD), the first "
                 f"{HOLD_SKIP_S * 1000:.0f} ms of each hold left out; mJ/GEMM: that power x the GEMM's time.")
    if not holds:
        lines.append("No HOLD lines given (--holds): no clock or power columns.")
    elif not samples:
        lines.append("No nvidia-smi samples (--smi): no clock or power columns.")
    elif not counts:
        lines.append("No HOLD line names a shape of the CSVs: no clock or power columns.")
    else:
        sampled = f" of {', '.join(fields[1:])}" if fields else ""
        lines.append(f"nvidia-smi samples{sampled} per hold: {min(counts)} to {max(counts)}.")
        if min(counts) == 0:
            lines.append("Some holds have no samples: check that nvidia-smi ran, and that this runs in the time "
                         "zone of the machine that sampled (TZ).")
        reasons = {}
        for s in held_samples:
            reasons[s[3]] = reasons.get(s[3], 0) + 1
        if reasons:
            lines.append("Clock event (throttle) reasons in the holds, samples: " +
                         ", ".join(f"{r or '—'}: {n}" for r, n in sorted(reasons.items())) + ".")
    lines += blockwise_table(coda_path, coda, samples, holds)
    if ncu_paths:
        lines += ["", "Instructions per output tile (ncu, one launch each; tiles = ceil(M/tile0) x ceil(N/tile1)):",
                  ""]
        lines += ncu_table(ncu_paths, coda)
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("coda_csv", help="coda bench gemm --csv output")
    parser.add_argument("torch_csv", help="tools/bench_torch.py --csv output")
    parser.add_argument("--smi", help="nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,... samples")
    parser.add_argument("--holds", nargs="+", default=[], metavar="LOG",
                        help="logs with the HOLD lines of coda bench gemm and bench_torch.py")
    parser.add_argument("--ncu", nargs="+", default=[], metavar="NCU_CSV",
                        help="ncu --csv --page raw exports named ncu_<coda|cublas>_<M>x<N>x<K>.csv")
    parser.add_argument("--baseline", default="torch.matmul",
                        help="the torch_csv rows to compare with: torch.matmul (default) or torch._scaled_mm "
                             "(bench_torch.py --fp8: its fast-accum rows in the table, its precise-accum ones beside)")
    args = parser.parse_args()
    print(table(args.coda_csv, args.torch_csv, args.smi, args.holds, args.ncu, args.baseline))


if __name__ == "__main__":
    main()
