#!/usr/bin/env python3
"""tools/ab_builds.py without a GPU: its table parsing, the B / A summary, and the A/B of one build under two
environments, run end to end on a stand-in `coda` that prints a table whose time depends on an environment variable.
The standard library only (ctest: tools_ab_builds)."""
import os
import stat
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
sys.path.insert(0, TOOLS)
import ab_builds  # noqa: E402

# A stand-in for `coda bench gemm`: one table row, 2.0 ms, or 1.5 ms where FAKE_FASTER is set.
FAKE_CODA = """#!/bin/sh
ms=2.0
[ -n "$FAKE_FASTER" ] && ms=1.5
echo "epilogue M N K ms TFLOP/s"
echo "identity 64 64 64 $ms 1.0"
"""


class ParseAndSummarize(unittest.TestCase):
    def test_rows_and_geomean(self):
        rows = ab_builds.parse_rows("header\nidentity 64 64 64 2.0 1.0\nnoise 1 2\nidentity 8 8 x 1.0\n")
        self.assertEqual(rows, {("identity", 64, 64, 64): 2.0})
        report = ab_builds.summarize([("A", rows), ("B", {("identity", 64, 64, 64): 1.0}), ("B", {}),
                                      ("A", rows)])
        self.assertIn("| identity | 64 | 64 | 64 | 2.0000 | 1.0000 | 0.500 |", report)
        self.assertIn("identity: B / A geometric mean 0.500 over 1 shapes", report)
        self.assertIn("1 of 4 runs printed no table rows", report)


    def test_tune_tables(self):
        # coda tune's output: one graph and shape a table, a row per config (the fastest and the default marked).
        one = ("device: H100\nswiglu_backward_fp8_t  M=16384 N=14336 K=4096  (shape class m16384 n16384 k4096)\n"
               "  config               ms   TFLOP/s\n"
               "  hopper bm=128 bn=128 bk=64 stages=6 cooperative cluster=1     2.5053     768.0  <- fastest  (default)\n")
        self.assertEqual(ab_builds.parse_rows(one), {("swiglu_backward_fp8_t", 16384, 14336, 4096): 2.5053})
        two = ("g  M=64 N=32 K=16\n  config  ms  TFLOP/s\n  hopper bm=128 pingpong     1.5000     9.0  <- fastest\n"
               "  hopper bm=128 cooperative     2.0000     7.0  (default)\n  the default is 33% slower\n")
        self.assertEqual(ab_builds.parse_rows(two), {("g [hopper bm=128 pingpong]", 64, 32, 16): 1.5,
                                                     ("g [hopper bm=128 cooperative]", 64, 32, 16): 2.0})


class OneBuildTwoEnvironments(unittest.TestCase):
    def test_b_env_reaches_only_b(self):
        with tempfile.TemporaryDirectory() as d:
            build = os.path.join(d, "build")
            os.makedirs(build)
            coda = os.path.join(build, "coda")
            with open(coda, "w") as f:
                f.write(FAKE_CODA)
            os.chmod(coda, os.stat(coda).st_mode | stat.S_IXUSR)
            out = os.path.join(d, "out")
            done = subprocess.run(
                [sys.executable, os.path.join(TOOLS, "ab_builds.py"), build, build, "--b-env", "FAKE_FASTER=1",
                 "--shapes", "64x64x64", "--out", out, "--name", "fake", "--", "bench", "gemm"],
                capture_output=True, text=True, env=dict(os.environ, FAKE_FASTER=""))
            self.assertEqual(done.returncode, 0, done.stderr)
            with open(os.path.join(out, "fake.md")) as f:
                report = f.read()
            self.assertIn("B = " + build + " FAKE_FASTER=1", report)
            self.assertIn("| identity | 64 | 64 | 64 | 2.0000 | 1.5000 | 0.750 |", report)
            self.assertTrue(os.path.exists(os.path.join(out, "fake.log")))

    def test_a_cache_dir_given_with_b_env_replaces_bs_own(self):
        # The stand-in is faster where its cache dir is the warmed one given with --b-env (not ab_builds' temp dir).
        with tempfile.TemporaryDirectory() as d:
            build = os.path.join(d, "build")
            os.makedirs(build)
            coda = os.path.join(build, "coda")
            warmed = os.path.join(d, "warmed")
            with open(coda, "w") as f:
                f.write(FAKE_CODA.replace('[ -n "$FAKE_FASTER" ]', f'[ "$CODA_CACHE_DIR" = "{warmed}" ]'))
            os.chmod(coda, os.stat(coda).st_mode | stat.S_IXUSR)
            out = os.path.join(d, "out")
            done = subprocess.run(
                [sys.executable, os.path.join(TOOLS, "ab_builds.py"), build, build, "--b-env",
                 f"CODA_CACHE_DIR={warmed}", "--shapes", "64x64x64", "--out", out, "--name", "cache", "--", "bench"],
                capture_output=True, text=True)
            self.assertEqual(done.returncode, 0, done.stderr)
            with open(os.path.join(out, "cache.md")) as f:
                self.assertIn("| identity | 64 | 64 | 64 | 2.0000 | 1.5000 | 0.750 |", f.read())

    def test_env_without_a_value_is_a_usage_error(self):
        done = subprocess.run([sys.executable, os.path.join(TOOLS, "ab_builds.py"), "a", "b", "--b-env", "NOVALUE",
                               "--shapes", "1x1x1", "--", "bench"], capture_output=True, text=True)
        self.assertEqual(done.returncode, 2)
        self.assertIn("'NOVALUE' is not VAR=VALUE", done.stderr)


if __name__ == "__main__":
    unittest.main()
