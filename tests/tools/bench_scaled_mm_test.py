#!/usr/bin/env python3
"""tools/bench_scaled_mm.py's turn order and table, with a fake timer: the standard library only, no torch, no GPU
(ctest: tools_bench_scaled_mm)."""
import os
import sys
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import bench_scaled_mm  # noqa: E402


class BenchScaledMmTest(unittest.TestCase):
    def test_abba_runs_each_round_forward_then_backward(self):
        order = []
        systems = {"cublas": "A", "coda": "B", "coda blockwise": "C"}
        times = bench_scaled_mm.abba(systems, 2, lambda fn: order.append(fn) or float(len(order)))
        self.assertEqual("".join(order), "ABCCBA" * 2)
        # Each system's turns, in the order they ran: A ran 1st, 6th, 7th and 12th.
        self.assertEqual(times["cublas"], [1.0, 6.0, 7.0, 12.0])
        self.assertEqual(times["coda blockwise"], [3.0, 4.0, 9.0, 10.0])

    def test_summary_ratios_geometric_mean_minimum_and_targets(self):
        rows = [((4096, 4096, 4096), {"cublas": 0.13, "coda": 0.10}),       # coda 1.3x faster
                ((16384, 4096, 14336), {"cublas": 1.50, "coda": 1.80})]     # coda at 0.833
        text = bench_scaled_mm.summarize(rows, blockwise=False)
        self.assertIn("| 4096 | 4096 | 4096 | 1057.2 | 1374.4 | 1.300 |", text)
        self.assertIn("| 16384 | 4096 | 14336 | 1282.8 | 1069.0 | 0.833 |", text)
        self.assertIn("geometric mean **1.041** (target >= 1.0: met)", text)  # sqrt(1.3 x 0.8333)
        self.assertIn("minimum **0.833** at 16384x4096x14336 (target >= 0.95: NOT met)", text)

    def test_summary_block_scaled_columns_and_missing_torch_form(self):
        rows = [((4096, 4096, 4096), {"cublas": 0.1, "coda": 0.1, "coda blockwise": 0.15}),
                ((8192, 4096, 4096), {"cublas": 0.2, "coda": 0.2, "coda blockwise": 0.24, "cublas blockwise": 0.3})]
        text = bench_scaled_mm.summarize(rows, blockwise=True)
        self.assertIn("| 4096 | 4096 | 4096 | 1374.4 | 1374.4 | 1.000 | 1.500 | — |", text)
        self.assertIn("| 8192 | 4096 | 4096 | 1374.4 | 1374.4 | 1.000 | 1.200 | 1.500 |", text)
        # sqrt(1.5 x 1.2) = 1.342: 0.745x the per-tensor speed.
        self.assertIn("geometric mean over 2 shapes: **1.342**, 0.745x the per-tensor speed (target >= 0.95: NOT met)",
                      text)


if __name__ == "__main__":
    unittest.main()
