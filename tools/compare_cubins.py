#!/usr/bin/env python3
"""Compares the kernels of two coda cache directories built from the same graphs and configs (e.g. before and after
a refactor): for each kernel, its SASS (instruction count, whether it is identical, how the opcode counts moved) and
what it reports in coda_kernel_info (stages, shared memory, tensor maps). Needs cuobjdump (the nvidia-cuda-cuobjdump
wheel has one). Usage: tools/compare_cubins.py BEFORE_CACHE AFTER_CACHE [--cuobjdump PATH]"""
import argparse, collections, os, re, struct, subprocess, sys


def entries(cache):
    """description -> cubin bytes, from <key>.kernel files (src/cache/kernel_file.cpp: magic, version, 6 lengths,
    then key, kernel name, description, source, cubin, resources)."""
    out = {}
    for name in sorted(os.listdir(cache)):
        if not name.endswith(".kernel"):
            continue
        data = open(os.path.join(cache, name), "rb").read()
        if data[:8] != b"CODAKERN":
            continue
        lengths = struct.unpack_from("<6Q", data, 12)
        at, fields = 60, []
        for n in lengths:
            fields.append(data[at:at + n])
            at += n
        description = re.sub(r"-[0-9a-f]{16} ", " ", fields[2].decode())
        out[description] = fields[4]
    return out


def section(elf, wanted):
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    entsize, count, names = struct.unpack_from("<HHH", elf, 0x3A)
    header = lambda i: struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * entsize)
    strings = header(names)[4]
    for i in range(count):
        h = header(i)
        if elf[strings + h[0]:elf.index(b"\0", strings + h[0])].decode() == wanted:
            return elf[h[4]:h[4] + h[5]]
    return b""


def kernel_info(cubin):
    """templates/coda/kernel_abi.cuh's KernelInfo: version, kind, threads, smem, tile (m, n), cluster (m, n), stages,
    then TmaTileInfo (maps, inputs_by_tma, chunk_columns, input_rows, outputs, output_rows, transposed)."""
    raw = section(cubin, ".nv.constant3")
    if len(raw) < 64:
        return None
    v = struct.unpack_from("<16i", raw)
    return {"smem": v[3], "tile": f"{v[4]}x{v[5]}", "cluster": f"{v[6]}x{v[7]}", "stages": v[8], "maps": v[9],
            "inputs_by_tma": v[10], "staged_outputs": v[13], "staged_transposed": v[15]}


def sass(cuobjdump, cubin, scratch):
    with open(scratch, "wb") as f:
        f.write(cubin)
    text = subprocess.run([cuobjdump, "-sass", scratch], capture_output=True, text=True, check=True).stdout
    return [m.group(1).strip() for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(.*?);", text)]


def opcodes(instructions):
    counts = collections.Counter()
    for ins in instructions:
        words = ins.split()
        if words[0].startswith("@"):
            words = words[1:]
        counts[words[0].split(".")[0]] += 1
    return counts


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--cuobjdump", default="cuobjdump")
    args = parser.parse_args()
    before, after = entries(args.before), entries(args.after)
    scratch = "/tmp/compare_cubins.cubin"
    print("| kernel | instructions before -> after | identical | opcodes that moved | stages | smem bytes |")
    print("|---|---|---|---|---|---|")
    for description in sorted(set(before) & set(after)):
        a, b = sass(args.cuobjdump, before[description], scratch), sass(args.cuobjdump, after[description], scratch)
        ca, cb = opcodes(a), opcodes(b)
        moved = {k: cb[k] - ca[k] for k in set(ca) | set(cb) if cb[k] != ca[k]}
        top = ", ".join(f"{k} {d:+d}" for k, d in sorted(moved.items(), key=lambda x: -abs(x[1]))[:4])
        ia, ib = kernel_info(before[description]), kernel_info(after[description])
        stages = f"{ia['stages']} -> {ib['stages']}" if ia and ib else "?"
        smem = f"{ia['smem']} -> {ib['smem']}" if ia and ib else "?"
        print(f"| {description} | {len(a)} -> {len(b)} | {'yes' if a == b else 'no'} | {top} | {stages} | {smem} |")
    for description in sorted(set(before) ^ set(after)):
        print(f"| {description} | only in {'before' if description in before else 'after'} | | | | |")


if __name__ == "__main__":
    sys.exit(main())
