"""Two builds of coda timed against each other in one GPU session: the A/B of a template or mainloop change.

For each shape, `coda bench gemm` or `coda tune` (the arguments after `--`) runs with build A's binary, then B's, B's, A's
(ABBA: a drift of clock or temperature within the pair cancels), each build with a kernel cache of its own. Every
row of the tables it prints (epilogue, M, N, K, ms, ...) is collected; the result is each row's mean time per build,
B / A, and the geometric mean of B / A per epilogue. B / A below 1: B is faster.

Usage:
  python3 tools/ab_builds.py carry/build_main carry/build_branch --shapes 4096x4096x4096 8192x4096x11008 \\
      -- bench gemm --fp8 e4m3 --block-scales --identity-only --iters 50
A template change to one epilogue at its shape (coda tune's table, its config pinned):
  python3 tools/ab_builds.py carry/build_main carry/build_branch --shapes 16384x14336x4096 \\
      -- tune tools/graphs/swiglu_backward_fp8_t.coda --iters 30 --config "hopper bm=128 bn=128 bk=64 stages=6 cooperative"
One build under two environments (stream-K wherever the kernel can take it against the default, docs/CLI.md,
"Environment variables"):
  python3 tools/ab_builds.py build build --b-env CODA_STREAM_K=1 --shapes ... -- bench gemm ...
Writes ab_builds.md (or --name's .md) to $OUT (or --out) and prints it.
"""
import argparse
import math
import os
import re
import subprocess
import sys
import tempfile


TUNE_SHAPE = re.compile(r"^(\S+)\s+M=(\d+) N=(\d+) K=(\d+)")
TUNE_ROW = re.compile(r"^\s+((?:hopper|portable)\b.*?)\s+(\d+\.\d+)\s+\d+\.\d+(\s.*)?$")


def parse_rows(text):
    """{(epilogue, M, N, K): ms} of the table rows in `text`: coda bench gemm's (name M N K ms TFLOP/s ...), and
    coda tune's (a "graph  M=.. N=.. K=.." line, then a row per config: config ms TFLOP/s), named by the graph, or
    "graph [config]" where the table has several configs."""
    rows = {}
    tune = {}  # (graph, M, N, K) -> {config: ms}
    shape = None
    for line in text.splitlines():
        head = TUNE_SHAPE.match(line)
        if head:
            shape = (head.group(1), int(head.group(2)), int(head.group(3)), int(head.group(4)))
            continue
        row = TUNE_ROW.match(line)
        if shape and row:
            tune.setdefault(shape, {})[row.group(1)] = float(row.group(2))
            continue
        fields = line.split()
        if len(fields) < 5 or not all(f.isdigit() for f in fields[1:4]):
            continue
        try:
            rows[(fields[0], int(fields[1]), int(fields[2]), int(fields[3]))] = float(fields[4])
        except ValueError:
            continue
    for (graph, m, n, k), configs in tune.items():
        for config, ms in configs.items():
            rows[(graph if len(configs) == 1 else f"{graph} [{config}]", m, n, k)] = ms
    return rows


def summarize(runs):
    """Markdown of the runs: [(build "A" or "B", {row: ms})] in the order they ran."""
    times = {}
    for build, rows in runs:
        for key, ms in rows.items():
            times.setdefault(key, {"A": [], "B": []})[build].append(ms)
    lines = ["| epilogue | M | N | K | A ms | B ms | B / A |", "|---|---|---|---|---|---|---|"]
    ratios = {}
    for key in sorted(times):
        a, b = times[key]["A"], times[key]["B"]
        if not a or not b:
            continue
        ma, mb = sum(a) / len(a), sum(b) / len(b)
        ratios.setdefault(key[0], []).append(mb / ma)
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {ma:.4f} | {mb:.4f} | {mb / ma:.3f} |")
    lines.append("")
    empty = sum(1 for _, rows in runs if not rows)
    if empty:
        lines.append(f"{empty} of {len(runs)} runs printed no table rows (failed or timed out: see the .log beside this report)")
    for name, r in sorted(ratios.items()):
        geomean = math.exp(sum(math.log(x) for x in r) / len(r))
        lines.append(f"{name}: B / A geometric mean {geomean:.3f} over {len(r)} shapes")
    return "\n".join(lines)


def parse_env(parser, pairs):
    """{VAR: VALUE} of ["VAR=VALUE", ...]; a pair without '=' or a name is a usage error."""
    env = {}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        if not eq or not name:
            parser.error(f"'{pair}' is not VAR=VALUE")
        env[name] = value
    return env


def main():
    argv = sys.argv[1:]
    coda_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("build_a", help="build directory A (its coda binary at BUILD/coda), the baseline")
    p.add_argument("build_b", help="build directory B, the change")
    p.add_argument("--shapes", nargs="+", required=True, metavar="MxNxK")
    p.add_argument("--timeout-s", type=int, default=120, help="each run's limit")
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument("--a-env", action="append", default=[], metavar="VAR=VALUE", help="set for A's runs (repeatable)")
    p.add_argument("--b-env", action="append", default=[], metavar="VAR=VALUE", help="set for B's runs (repeatable)")
    p.add_argument("--name", default="ab_builds", help="the report's file name, without .md (and its log's)")
    args = p.parse_args(argv)
    extra = {"A": parse_env(p, args.a_env), "B": parse_env(p, args.b_env)}
    if not coda_args:
        p.error("give the coda subcommand after --, e.g. -- bench gemm --identity-only")
    caches = {"A": tempfile.mkdtemp(prefix="coda-ab-a-"), "B": tempfile.mkdtemp(prefix="coda-ab-b-")}
    binaries = {"A": os.path.join(args.build_a, "coda"), "B": os.path.join(args.build_b, "coda")}
    runs, log = [], []
    for shape in args.shapes:
        m, n, k = shape.split("x")
        for build in "ABBA":
            cmd = [binaries[build], *coda_args, "--m", m, "--n", n, "--k", k]
            # --a-env / --b-env win, CODA_CACHE_DIR too (a cache warmed beforehand: `coda warm`).
            env = {**os.environ, "CODA_CACHE_DIR": caches[build], **extra[build]}
            try:
                done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout_s)
                text = done.stdout + done.stderr
            except subprocess.TimeoutExpired:
                text = f"(timed out after {args.timeout_s} s)"
            log.append(f"== {build} {shape}: {' '.join(cmd)}\n{text}")
            runs.append((build, parse_rows(text)))
    report = summarize(runs)
    os.makedirs(args.out, exist_ok=True)
    def label(build, env):
        return " ".join([build, *env])
    with open(os.path.join(args.out, args.name + ".md"), "w") as f:
        f.write(f"A = {label(args.build_a, args.a_env)}, B = {label(args.build_b, args.b_env)}; "
                f"coda {' '.join(coda_args)}\n\n{report}\n")
    with open(os.path.join(args.out, args.name + ".log"), "w") as f:
        f.write("\n".join(log))
    print(report)


if __name__ == "__main__":
    main()
