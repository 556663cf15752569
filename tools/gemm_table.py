#!/usr/bin/env python3
"""Merges `coda bench gemm --csv` and `tools/bench_torch.py --csv` output of one device run into the markdown
table of docs/PERFORMANCE.md: per shape cuBLAS against coda's identity epilogue, the fused out-proj epilogue
against the identity one and against the unfused chain (eager and torch.compile); then the geometric mean of
coda/cuBLAS and how many shapes are below 0.9 of cuBLAS.

Usage: python3 tools/gemm_table.py CODA_CSV TORCH_CSV"""
import csv
import math
import os
import sys

BELOW = 0.9  # a shape under this fraction of cuBLAS's throughput counts as slow


def read_rows(path, name_column, expected):
    """{(name, m, n, k): row} of a CSV file; a missing column is an error that names the file (and the script that
    read it: tools/identity_table.py reads its CSVs with this too)."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in expected if c not in (reader.fieldnames or [])]
        if missing:
            script = os.path.splitext(os.path.basename(sys.argv[0]))[0]
            sys.exit(f"{script}: {path} lacks the column(s) {', '.join(missing)}; "
                     f"expected a header with {', '.join(expected)}")
        rows = {}
        for row in reader:
            key = (row[name_column], int(row["m"]), int(row["n"]), int(row["k"]))
            rows[key] = row
        return rows


def fmt(value, digits):
    return "—" if value is None else f"{value:.{digits}f}"


def ratio(numerator, denominator):
    return None if numerator is None or denominator is None else numerator / denominator


def speedup(chain_ms, fused_ms):
    """How many times faster the fused kernel is than a chain."""
    r = ratio(chain_ms, fused_ms)
    return "—" if r is None else f"{r:.2f}x"


def table(coda_path, torch_path):
    coda = read_rows(coda_path, "epilogue", ["epilogue", "m", "n", "k", "ms", "tflops", "config"])
    torch = read_rows(torch_path, "name", ["name", "m", "n", "k", "ms", "tflops"])
    shapes = list(dict.fromkeys(key[1:] for key in coda))  # in the order coda ran them

    def value(rows, name, shape, column):
        row = rows.get((name,) + shape)
        return None if row is None else float(row[column])

    lines = [
        "| M | N | K | cuBLAS TFLOP/s | coda identity TFLOP/s | identity / cuBLAS | coda out-proj ms "
        "| out-proj / identity | eager chain ms | compiled chain ms | fused vs eager | fused vs compiled |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    identity_ratios = []
    configs = set()
    for shape in shapes:
        cublas = value(torch, "torch.matmul", shape, "tflops")
        identity = value(coda, "identity", shape, "tflops")
        identity_ms = value(coda, "identity", shape, "ms")
        fused_ms = value(coda, "out_proj", shape, "ms")
        eager_ms = value(torch, "eager_out_proj_chain", shape, "ms")
        compiled_ms = value(torch, "compiled_out_proj_chain", shape, "ms")
        vs_cublas = ratio(identity, cublas)
        if vs_cublas is not None:
            identity_ratios.append(vs_cublas)
        for name in ("identity", "out_proj"):
            row = coda.get((name,) + shape)
            if row is not None:
                configs.add(row["config"])
        cells = [str(shape[0]), str(shape[1]), str(shape[2]), fmt(cublas, 1), fmt(identity, 1), fmt(vs_cublas, 3),
                 fmt(fused_ms, 4), fmt(ratio(fused_ms, identity_ms), 3), fmt(eager_ms, 4), fmt(compiled_ms, 4),
                 speedup(eager_ms, fused_ms), speedup(compiled_ms, fused_ms)]
        lines.append("| " + " | ".join(cells) + " |")

    lines.append("")
    if identity_ratios:
        geomean = math.exp(sum(math.log(r) for r in identity_ratios) / len(identity_ratios))
        below = sum(1 for r in identity_ratios if r < BELOW)
        lines.append(f"Identity epilogue / cuBLAS, geometric mean over {len(identity_ratios)} shapes: "
                     f"**{geomean:.3f}**; shapes below {BELOW}: **{below}**.")
    else:
        lines.append("No shape has both a coda identity row and a torch.matmul row: no ratio to report.")
    incomplete = [s for s in shapes if any(
        (name,) + s not in rows for rows, name in [(coda, "identity"), (coda, "out_proj"), (torch, "torch.matmul"),
                                                   (torch, "eager_out_proj_chain"), (torch, "compiled_out_proj_chain")])]
    if incomplete:
        lines.append("Shapes with a measurement missing (— in the table): " +
                     ", ".join("x".join(map(str, s)) for s in incomplete) + ".")
    lines.append("Configs (coda's choice per shape, see the CSV): " + "; ".join(f"`{c}`" for c in sorted(configs)) + ".")
    return "\n".join(lines)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    print(table(sys.argv[1], sys.argv[2]))


if __name__ == "__main__":
    main()
