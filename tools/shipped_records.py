"""The tuning records worth shipping (src/tune/builtin_tuning.cpp) from `coda tune --solo` runs over the named
candidates: for each table whose fastest config beats the default by at least --min-gain, the winner's record from
the tuning file those runs wrote (CODA_TUNING_FILE), in that file's format, after a comment with the measurement.
`tools/device_fp8.sh records` runs the tunes and this.

Usage: python3 tools/shipped_records.py --tuning FILE [--min-gain 0.06] [--coda BIN] [--graphs DIR] tune.log ...
Standard library only; the graphs' hashes come from `coda dump` (its "// hash:" line).
"""
import argparse
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tune_table  # noqa: E402


def shape_class(m, n, k):
    """As src/tune/tuning_db.cpp's shape_class: each dimension rounded up to a power of two."""
    return " ".join(f"{name}{1 << (v - 1).bit_length()}" for name, v in (("m", m), ("n", n), ("k", k)))


def winners(tables, min_gain):
    """[(graph, (m, n, k), fastest / default)] of the tables whose fastest config is not the default and takes at
    most 1 - min_gain of its time."""
    out = []
    for graph, shape, rows in tables:
        timed = [r for r in rows if r[1] is not None]
        default = next((r for r in timed if r[2]), None)
        if default is None or not timed:
            continue
        fastest = min(timed, key=lambda r: r[1])
        ratio = fastest[1] / default[1]
        if fastest[0] != default[0] and ratio <= 1 - min_gain:
            out.append((graph, shape, ratio))
    return out


def records(tables, tuning_text, hash_of, min_gain):
    """The tuning file's lines (with a comment line each) for the winners: matched by graph hash and shape class."""
    by_key = {}
    for line in tuning_text.splitlines():
        fields = line.split("\t")
        if line.startswith("#") or len(fields) != 5:
            continue
        by_key[(fields[1], fields[2])] = line
    out = []
    for graph, (m, n, k), ratio in winners(tables, min_gain):
        line = by_key.get((hash_of(graph), shape_class(m, n, k)))
        if line is None:
            out.append(f"# {graph} {m} x {n} x {k}: {ratio:.3f}x the default's time, but no record in the tuning file")
            continue
        out.append(f"# {graph} {m} x {n} x {k}: {ratio:.3f}x the default's time")
        out.append(line)
    return out


def coda_hash(coda, graphs_dir):
    def hash_of(graph):
        text = subprocess.run([coda, "dump", os.path.join(graphs_dir, graph + ".coda")], check=True,
                              capture_output=True, text=True).stdout
        return next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("// hash:"))
    return hash_of


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("logs", nargs="+", help="`coda tune --solo` output (the named candidates, not --config)")
    p.add_argument("--tuning", required=True, help="the tuning file those runs recorded into (CODA_TUNING_FILE)")
    p.add_argument("--min-gain", type=float, default=0.06, help="least saving over the default (default 0.06)")
    p.add_argument("--coda", default=os.path.join(root, "build", "coda"))
    p.add_argument("--graphs", default=os.path.join(root, "tools", "graphs"))
    args = p.parse_args()
    tables = []
    for path in args.logs:
        with open(path) as f:
            tables += tune_table.parse(f.read())
    with open(args.tuning) as f:
        tuning_text = f.read()
    print("\n".join(records(tables, tuning_text, coda_hash(args.coda, args.graphs), args.min_gain)))


if __name__ == "__main__":
    main()
