#!/usr/bin/env python3
"""tools/ncu_hotspots.py without ncu: a source-page csv in the shape ncu writes it (a preamble line, quoted cells,
thousands separators, per-reason columns), its ranking and the reasons of each row, and the errors for files that are
not such a page. The standard library only (ctest: tools_ncu_hotspots)."""
import io
import os
import sys
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
sys.path.insert(0, TOOLS)
import ncu_hotspots  # noqa: E402

PAGE = '''==PROF== Connected to process 1
"# Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)","stall_long_sb","stall_long_sb (Not Issued)","stall_wait"
"0x2e70","SYNCS.PHASECHK.TRANS64.TRYWAIT P4, [UR35+0x34010], R10","1,200","900","1,000","800","200"
"0x3300","WARPGROUP.DEPBAR.LE gsb0, 0x0","3,000","2,000","0","0","3,000"
"0x3330","FFMA R89, R24, R172, R89","100","","","",""
"0x3340","ISETP.LE.AND P6, PT, R167, UR20, PT","0","0","0","0","0"
'''


class Hotspots(unittest.TestCase):
    def test_ranks_instructions_by_samples_with_their_reasons(self):
        rows, samples, reasons = ncu_hotspots.parse(io.StringIO(PAGE))
        self.assertEqual(len(rows), 4)
        self.assertEqual(samples, "Warp Stall Sampling (All Samples)")
        self.assertEqual(reasons, ["stall_long_sb", "stall_wait"])
        table = ncu_hotspots.hotspots(rows, samples, reasons, top=10)
        lines = table.splitlines()
        self.assertIn("4 instructions, 4300 stall samples", lines[0])
        body = [l for l in lines if l.startswith("| 0x")]
        # Most samples first; rows without samples are left out.
        self.assertEqual([l.split(" | ")[0] for l in body], ["| 0x3300", "| 0x2e70", "| 0x3330"])
        self.assertIn("| 3000 | 69.8% | wait 100% |", body[0])
        self.assertIn("long_sb 83%, wait 17%", body[1])
        self.assertTrue(body[2].endswith("| 100 | 2.3% |  |"))

    def test_top_limits_the_rows(self):
        rows, samples, reasons = ncu_hotspots.parse(io.StringIO(PAGE))
        body = [l for l in ncu_hotspots.hotspots(rows, samples, reasons, top=1).splitlines() if l.startswith("| 0x")]
        self.assertEqual(len(body), 1)

    def test_files_that_are_not_a_source_page_are_errors(self):
        with self.assertRaisesRegex(ValueError, "no header row"):
            ncu_hotspots.parse(io.StringIO('"ID","Kernel Name"\n"0","hopper_gemm"\n'))
        with self.assertRaisesRegex(ValueError, "SourceCounters"):
            ncu_hotspots.parse(io.StringIO('"# Address","Source"\n"0x0","NOP"\n'))


if __name__ == "__main__":
    unittest.main()
