"""The SASS instructions where a kernel's warps stalled most, from ncu's source page as csv (`ncu --import R.ncu-rep
--page source --csv --print-source sass > R.csv`; tools/device_fp8.sh ncublock): each of the top instructions with
its address, its share of all stall samples, and the stall reasons that make up most of it.

Usage: python3 tools/ncu_hotspots.py R.csv [--top N]
ncu names its columns by version; this reads the header row (the first with a "Source" column), takes the samples
from the column named "Warp Stall Sampling (All Samples)" (or the first "Warp Stall Sampling" one), and a reason from
every column named "stall_*" (ncu's per-reason sample counts, where the report has them). Standard library only.
"""
import argparse
import csv
import sys


def number(text):
    """A cell as a float: ncu writes thousands separators and leaves empty cells; anything else is 0."""
    try:
        return float(text.replace(",", "").strip() or 0)
    except ValueError:
        return 0.0


def parse(lines):
    """(rows as dicts, the samples column, the reason columns) of a source-page csv."""
    reader = csv.reader(lines)
    header = None
    rows = []
    for fields in reader:
        if header is None:
            if "Source" in fields:
                header = fields
            continue
        if len(fields) == len(header):
            rows.append(dict(zip(header, fields)))
    if header is None:
        raise ValueError("no header row with a 'Source' column: not ncu's source page as csv")
    sampling = [c for c in header if c.startswith("Warp Stall Sampling")]
    if not sampling:
        raise ValueError("no 'Warp Stall Sampling' column: was the report taken with the SourceCounters section?")
    samples = next((c for c in sampling if "All Samples" in c), sampling[0])
    reasons = [c for c in header if c.startswith("stall_") and "Not Issued" not in c]
    return rows, samples, reasons


def hotspots(rows, samples, reasons, top):
    """Markdown: the `top` instructions by stall samples, each with its share of the kernel's and its main reasons."""
    total = sum(number(r[samples]) for r in rows) or 1.0
    ranked = sorted(rows, key=lambda r: number(r[samples]), reverse=True)[:top]
    lines = [f"{len(rows)} instructions, {total:.0f} stall samples ({samples})", "",
             "| address | instruction | samples | share | main reasons |", "|---|---|---|---|---|"]
    for r in ranked:
        count = number(r[samples])
        if count == 0:
            break
        parts = sorted(((number(r[c]), c) for c in reasons), reverse=True)
        why = ", ".join(f"{c[len('stall_'):]} {v / count:.0%}" for v, c in parts[:3] if v > 0)
        address = r.get("# Address", r.get("Address", ""))
        lines.append(f"| {address} | `{r['Source'].strip()}` | {count:.0f} | {count / total:.1%} | {why} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    with open(args.csv, newline="") as f:
        try:
            rows, samples, reasons = parse(f)
        except ValueError as e:
            sys.exit(f"ncu_hotspots.py: {args.csv}: {e}")
    print(hotspots(rows, samples, reasons, args.top))


if __name__ == "__main__":
    main()
