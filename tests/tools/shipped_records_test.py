#!/usr/bin/env python3
"""tools/shipped_records.py on `coda tune` output as cmd_tune.cpp prints it and a tuning file as it writes it. The
standard library only (ctest: tools_shipped_records)."""
import os
import sys
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import shipped_records  # noqa: E402
import tune_table  # noqa: E402

LOG = """device: NVIDIA H100 80GB HBM3 (sm_90a, 132 SMs)
each config timed alone, settled, twice in opposite orders (--solo)

gate_up  M=16384 N=28672 K=4096  (shape class m16384 n32768 k4096)
  config               ms   TFLOP/s
  h128x256         3.0923    1244.1
  hp128x128        3.7679    1021.0  (default)
  h256x128n2       3.0647    1255.3  <- fastest

qkv  M=16384 N=12288 K=4096  (shape class m16384 n16384 k4096)
  config               ms   TFLOP/s
  hp128x128        1.5000    1099.5  (default)
  h256x128n2       1.4400    1145.3  <- fastest

down  M=16384 N=4096 K=14336  (shape class m16384 n4096 k16384)
  config               ms   TFLOP/s
  hp128x128        1.6605    1158.8  (default)  <- fastest
  h128x256         1.6700    1152.2

lost  M=4096 N=14336 K=16384  (shape class m4096 n16384 k16384)
  config               ms   TFLOP/s
  hp128x128        2.0000    961.9  (default)
  h128x256         1.5000    1282.5  <- fastest
"""
GPU = "NVIDIA H100 80GB HBM3"
PAIRS = "hopper bm=256 bn=128 bk=64 stages=4 cooperative cluster=1 cluster_n=2"
TUNING = f"""# coda tuning database, written by `coda tune`.
{GPU}\tg1\tm16384 n32768 k4096\t{PAIRS}\t3.0647
{GPU}\tq1\tm16384 n16384 k4096\t{PAIRS}\t1.44
{GPU}\td1\tm16384 n4096 k16384\thopper bm=128 bn=128 bk=64 stages=6 pingpong cluster=1\t1.6605
"""
HASHES = {"gate_up": "g1", "qkv": "q1", "down": "d1", "lost": "l1"}


class ShippedRecords(unittest.TestCase):
    def test_shape_class_rounds_up_to_powers_of_two(self):
        self.assertEqual(shipped_records.shape_class(16384, 12288, 4096), "m16384 n16384 k4096")
        self.assertEqual(shipped_records.shape_class(28672, 4096, 14336), "m32768 n4096 k16384")

    def test_winners_beat_the_default_by_the_least_gain(self):
        tables = tune_table.parse(LOG)
        got = [(g, round(r, 3)) for g, _, r in shipped_records.winners(tables, 0.06)]
        self.assertEqual(got, [("gate_up", 0.813), ("lost", 0.75)])  # qkv saves 4%, down's default is the fastest
        self.assertEqual([g for g, _, _ in shipped_records.winners(tables, 0.03)], ["gate_up", "qkv", "lost"])

    def test_records_are_the_tuning_files_lines_of_the_winners(self):
        out = shipped_records.records(tune_table.parse(LOG), TUNING, HASHES.get, 0.06)
        self.assertEqual(out, [
            "# gate_up 16384 x 28672 x 4096: 0.813x the default's time",
            f"{GPU}\tg1\tm16384 n32768 k4096\t{PAIRS}\t3.0647",
            "# lost 4096 x 14336 x 16384: 0.750x the default's time, but no record in the tuning file",
        ])


if __name__ == "__main__":
    unittest.main()
