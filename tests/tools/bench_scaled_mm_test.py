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
    def test_abba_runs_each_round_forward_then_backward_in_that_rounds_order(self):
        order = []
        systems = {"cublas fast-accum": "A", "coda": "B", "coda blockwise": "C"}
        times = bench_scaled_mm.abba(systems, 2, lambda fn: order.append(fn) or float(len(order)))
        # Round two starts one system on (tools/round_order.py): no system always runs first.
        self.assertEqual("".join(order), "ABCCBA" + "BCAACB")
        # Each system's turns, in the order they ran: A ran 1st, 6th, 9th and 10th.
        self.assertEqual(times["cublas fast-accum"], [1.0, 6.0, 9.0, 10.0])
        self.assertEqual(times["coda blockwise"], [3.0, 4.0, 8.0, 11.0])

    def test_summary_reads_the_targets_on_the_fast_accum_cublas_and_sets_the_precise_beside(self):
        rows = [((4096, 4096, 4096), {"cublas fast-accum": 0.13, "cublas precise-accum": 0.15, "coda": 0.10}),
                ((16384, 4096, 14336), {"cublas fast-accum": 1.50, "cublas precise-accum": 1.80, "coda": 1.80})]
        text = bench_scaled_mm.summarize(rows, blockwise=False)
        self.assertIn("| M | N | K | cuBLAS fast-accum TFLOP/s | cuBLAS precise-accum TFLOP/s | coda TFLOP/s | "
                      "coda / cuBLAS fast-accum | coda / cuBLAS precise-accum |", text)
        self.assertIn("| 4096 | 4096 | 4096 | 1057.2 | 916.3 | 1374.4 | 1.300 | 1.500 |", text)
        self.assertIn("| 16384 | 4096 | 14336 | 1282.8 | 1069.0 | 1069.0 | 0.833 | 1.000 |", text)
        lead = [line for line in text.splitlines() if line.startswith("coda / cublas")]
        self.assertEqual(len(lead), 1)
        self.assertIn("coda / cublas fast-accum (like-for-like", lead[0])
        self.assertIn("geometric mean **1.041** (target >= 1.0: met)", lead[0])  # sqrt(1.3 x 0.8333)
        self.assertIn("minimum **0.833** at 16384x4096x14336 (target >= 0.95: NOT met)", lead[0])
        self.assertIn("Beside it, coda / cublas precise-accum: geometric mean 1.225, minimum 1.000 at "
                      "16384x4096x14336.", text)

    def test_summary_block_scaled_columns_and_missing_torch_form(self):
        rows = [((4096, 4096, 4096), {"cublas fast-accum": 0.1, "cublas precise-accum": 0.12, "coda": 0.1,
                                      "coda blockwise": 0.15}),
                ((8192, 4096, 4096), {"cublas fast-accum": 0.2, "cublas precise-accum": 0.24, "coda": 0.2,
                                      "coda blockwise": 0.24, "cublas blockwise": 0.3})]
        text = bench_scaled_mm.summarize(rows, blockwise=True)
        self.assertIn("| 4096 | 4096 | 4096 | 1374.4 | 1145.3 | 1374.4 | 1.000 | 1.200 | 1.500 | — |", text)
        self.assertIn("| 8192 | 4096 | 4096 | 1374.4 | 1145.3 | 1374.4 | 1.000 | 1.200 | 1.200 | 1.500 |", text)
        # sqrt(1.5 x 1.2) = 1.342: 0.745x the per-tensor speed.
        self.assertIn("geometric mean over 2 shapes: **1.342**, 0.745x the per-tensor speed (target >= 0.95: NOT met)",
                      text)
        # Over cuBLAS's per-tensor time: the fast-accum one first, sqrt(1.25 x 1.0) against the precise one.
        self.assertIn("**1.342** against cublas fast-accum, 0.745x its speed; 1.118 against cublas precise-accum, "
                      "0.894x.", text)


if __name__ == "__main__":
    unittest.main()
