#!/usr/bin/env python3
"""tools/tune_table.py on `coda tune` output in the form cmd_tune.cpp prints it (progress lines and a skipped config
among the tables). The standard library only (ctest: tools_tune_table)."""
import os
import sys
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import tune_table  # noqa: E402

BASE = "hopper bm=128 bn=128 bk=64 stages=6 pingpong cluster=1"
LOG = f"""device: NVIDIA H100 80GB HBM3 (sm_90a, 132 SMs)
timing the 3 given configs; recording nothing
each config timed alone, settled, twice in opposite orders (--solo)

identity_fp8  M=16384 N=4096 K=14336  (shape class m16384_n4096_k16384)
  config               ms   TFLOP/s
  {BASE}     1.6000    1202.6  (default)
  {BASE} bn=256     1.4400    1336.2  <- fastest
  {BASE} cluster=2          -         -  SKIPPED: no cluster fits
  the default {BASE} is 11.1% slower than {BASE} bn=256

identity_fp8  M=4096 N=4096 K=4096  (shape class m4096_n4096_k4096)
  config               ms   TFLOP/s
  {BASE}     0.1000    1374.4  (default)  <- fastest
  {BASE} bn=256     0.1100    1249.5
  {BASE} cluster=2     0.1050    1309.0
"""


class TuneTable(unittest.TestCase):
    def test_parse(self):
        tables = tune_table.parse(LOG)
        self.assertEqual([t[1] for t in tables], [(16384, 4096, 14336), (4096, 4096, 4096)])
        rows = tables[0][2]
        self.assertEqual(rows[0], (BASE, 1.6, True))
        self.assertEqual(rows[1], (BASE + " bn=256", 1.44, False))
        self.assertEqual(rows[2], (BASE + " cluster=2", None, False))
        self.assertEqual(len(tables[1][2]), 3)

    def test_ratios_against_the_default_and_their_geomean(self):
        report = tune_table.summarize(tune_table.parse(LOG))
        self.assertIn(f"| identity_fp8 | 16384 | 4096 | 14336 | {BASE} bn=256 | 1.4400 | 0.900 |", report)
        self.assertIn(f"| {BASE} cluster=2 | — | did not run |", report)
        self.assertIn(f"| {BASE} (reference) | 0.1000 | 1.000 |", report)
        # bn=256: 0.9 and 1.1 -> sqrt(0.99); cluster=2 ran at one shape only.
        self.assertIn(f"| {BASE} bn=256 | 2 | 0.995 |", report)
        self.assertIn(f"| {BASE} cluster=2 | 1 | 1.050 |", report)


if __name__ == "__main__":
    unittest.main()
