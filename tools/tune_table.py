"""The tables of `coda tune` runs as one A/B table: each config's time over the default's per shape, and its geometric
mean over the shapes. For `coda tune --solo --config A --config B ...` runs (tools/device_fp8.sh ab, abblock), whose
rows name each config by its whole text.

Usage: python3 tools/tune_table.py tune.log [more.log ...] > table.md
The reference of a shape is the row `coda tune` marks "(default)", else the shape's first row. Standard library only.
"""
import math
import re
import sys

SHAPE = re.compile(r"^(\S+)\s+M=(\d+) N=(\d+) K=(\d+)\s+\(shape class")
ROW = re.compile(r"^  (.+?)\s+(-|\d+\.\d+)\s+(-|\d+\.\d+)(.*)$")


def parse(text):
    """[(graph, (m, n, k), [(config, ms or None, is_default)])] in the order the tables come."""
    tables = []
    for line in text.splitlines():
        shape = SHAPE.match(line)
        if shape:
            tables.append((shape.group(1), tuple(int(shape.group(i)) for i in (2, 3, 4)), []))
            continue
        row = ROW.match(line)
        if not row or not tables or row.group(1).strip() == "config":
            continue
        ms = None if row.group(2) == "-" else float(row.group(2))
        tables[-1][2].append((row.group(1).strip(), ms, "(default)" in row.group(4)))
    return tables


def summarize(tables):
    """Markdown: one row per (shape, config) with its ms and ratio to the shape's reference; then the geometric mean
    of each config's ratios over the shapes where both ran."""
    lines = ["| graph | M | N | K | config | ms | / reference |", "|---|---|---|---|---|---|---|"]
    ratios = {}
    for graph, (m, n, k), rows in tables:
        if not rows:
            continue
        reference = next((r for r in rows if r[2]), rows[0])
        for config, ms, _ in rows:
            if ms is None:
                lines.append(f"| {graph} | {m} | {n} | {k} | {config} | — | did not run |")
                continue
            if reference[1] is None:
                lines.append(f"| {graph} | {m} | {n} | {k} | {config} | {ms:.4f} | (no reference) |")
                continue
            ratio = ms / reference[1]
            mark = " (reference)" if config == reference[0] else ""
            lines.append(f"| {graph} | {m} | {n} | {k} | {config}{mark} | {ms:.4f} | {ratio:.3f} |")
            ratios.setdefault(config, []).append(ratio)
    lines += ["", "| config | shapes | geometric mean / reference |", "|---|---|---|"]
    for config, r in ratios.items():
        geomean = math.exp(sum(math.log(x) for x in r) / len(r))
        lines.append(f"| {config} | {len(r)} | {geomean:.3f} |")
    return "\n".join(lines)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    tables = []
    for path in sys.argv[1:]:
        with open(path) as f:
            tables += parse(f.read())
    print(summarize(tables))


if __name__ == "__main__":
    main()
