"""The order in which interleaved systems take their turns, round by round (tools/bench_block.py,
tools/bench_scaled_mm.py): a different order each round, so that no system always runs first, or always right after
the same other system, whose heat, clock and cache state it would inherit."""


def round_orders(names, rounds):
    """`rounds` orders of `names`: the rows of a balanced Latin square (Williams' design) in turn. Row r starts with
    names[r mod n]; over n rounds (2n for an odd n, whose square needs its rows mirrored too) every system takes every
    position equally often and follows every other system equally often."""
    n = len(names)
    first = [0] + [(i + 1) // 2 if i % 2 else n - i // 2 for i in range(1, n)]  # 0, 1, n-1, 2, n-2, ...
    rows = [[names[(j + r) % n] for j in first] for r in range(n)]
    if n % 2:
        rows += [row[::-1] for row in rows]
    return [rows[r % len(rows)] if rows else [] for r in range(rounds)]
