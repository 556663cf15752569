#!/usr/bin/env python3
"""tools/identity_table.py on synthetic files of one bench_identity.sh run: the CSVs, HOLD lines among other
output, nvidia-smi samples (with the first 200 ms of each hold to be dropped) and ncu exports. The standard
library only: no torch, no GPU (ctest: tools_identity_table)."""
import datetime
import os
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import identity_table  # noqa: E402
from gemm_shapes import shape_set  # noqa: E402

T0 = 1_800_000_000.0  # Unix seconds of the first hold


def smi_time(at):
    """`at` as nvidia-smi prints it: local time, milliseconds."""
    return datetime.datetime.fromtimestamp(at).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]


def smi_line(at, mhz, watts, reasons="0x0000000000000004"):
    return f"{smi_time(at)}, {mhz} MHz, {watts:.2f} W, 55, {reasons}"


class Run:
    """Files of one synthetic run: coda identity 10% faster than cuBLAS at every set shape but 4096x2048x2048
    (cuBLAS 4% faster), and at every LLaMA shape but 8192x128256x4096 (equal)."""

    def __init__(self, directory):
        self.dir = directory
        coda = ["epilogue,m,n,k,ms,tflops,config"]
        torch = ["name,m,n,k,ms,tflops"]
        for m, n, k in shape_set("all"):
            cublas_ms = 2.0 * m * n * k / 600e9  # 600 TFLOP/s
            coda_ms = cublas_ms / 1.10
            if (m, n, k) == (4096, 2048, 2048):
                coda_ms = cublas_ms * 1.04
            if (m, n, k) == (8192, 128256, 4096):
                coda_ms = cublas_ms
            config = "hopper bm=128 bn=256 bk=64 stages=4" if n >= 8192 else "hopper bm=128 bn=128 bk=64 stages=6 pingpong"
            coda.append(f"identity,{m},{n},{k},{coda_ms:.5f},{2 * m * n * k / coda_ms / 1e9:.2f},{config}")
            coda.append(f"out_proj,{m},{n},{k},{coda_ms * 1.1:.5f},1.0,{config}")
            torch.append(f"torch.matmul,{m},{n},{k},{cublas_ms:.5f},{2 * m * n * k / cublas_ms / 1e9:.2f}")
            torch.append(f"eager_out_proj_chain,{m},{n},{k},{cublas_ms * 2:.5f},1.0")
        self.coda = self.write("coda.csv", coda)
        self.torch = self.write("torch.csv", torch)

        # One hold per side at 16384x4096x4096: cuBLAS from T0 for 1.5 s, coda from T0 + 2 s. Inside each, a
        # sample at +0.1 s (dropped: the first 200 ms) at a clock and power that would move the medians.
        coda_log = ["epilogue M N K ms", "identity 16384 4096 4096 0.9 1200 - hopper",
                    f"HOLD coda 16384 4096 4096 start {T0 + 2:.3f}", f"HOLD coda 16384 4096 4096 stop {T0 + 3.5:.3f}",
                    f"HOLD coda 4096 4096 4096 start {T0 + 9:.3f}"]  # no stop: dropped
        torch_log = ["torch.matmul 16384 4096 4096 0.87 1580.0",
                     f"HOLD cublas 16384 4096 4096 start {T0:.3f}", f"HOLD cublas 16384 4096 4096 stop {T0 + 1.5:.3f}"]
        self.holds = [self.write("coda.log", coda_log), self.write("torch.log", torch_log)]
        smi = ["timestamp,clocks.sm,power.draw.instant,temperature.gpu,clocks_event_reasons.active"]  # the fields
        smi += [smi_line(T0 - 0.5, 1980, 120.0), smi_line(T0 + 0.1, 1980, 300.0)]
        smi += [smi_line(T0 + 0.3 + 0.1 * i, 1400 + 10 * i, 690.0 + i) for i in range(5)]  # median 1420, 692
        smi += [smi_line(T0 + 2.1, 1900, 400.0)]
        smi += [smi_line(T0 + 2.3 + 0.1 * i, 1300 + 10 * i, 680.0 + i, "0x0000000000000000") for i in range(3)]
        smi += ["timestamp, clocks.sm [MHz], power.draw [W]", "garbage, line", smi_line(T0 + 4, 1980, 100.0)]
        self.smi = self.write("smi.csv", smi)

    def write(self, name, lines):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path


NCU_HEADER = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",' \
             '"Device","CC","sm__cycles_elapsed.max","smsp__cycles_active.avg","smsp__inst_executed.sum",' \
             '"sm__inst_executed_pipe_tensor_op_gmma.sum"'
NCU_UNITS = '"","","","","","","","","","","","cycle","cycle","inst","inst"'


def ncu_export(kernel, cycles, instructions, gmma, units=NCU_UNITS):
    return ["==PROF== Connected to process 1234", NCU_HEADER, units,
            f'"0","1234","python3","host","{kernel}","1","7","(384, 1, 1)","(132, 1, 1)","0","9.0",'
            f'"{cycles}","{cycles}","{instructions}","{gmma}"']


class IdentityTableTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.run = Run(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def row(self, text, shape):
        prefix = "| " + " | ".join(map(str, shape)) + " |"
        rows = [line for line in text.splitlines() if line.startswith(prefix)]
        self.assertEqual(len(rows), 1, text)
        return [cell.strip() for cell in rows[0].strip("|").split("|")]

    def test_holds_pair_starts_with_stops_and_skip_other_lines(self):
        with open(self.run.holds[0]) as f:
            holds = identity_table.read_holds(f.read().splitlines())
        self.assertEqual(holds, {("coda", (16384, 4096, 4096)): [(T0 + 2, T0 + 3.5)]})

    def test_smi_samples_parse_local_time_and_units(self):
        with open(self.run.smi) as f:
            samples = identity_table.read_smi(f.read().splitlines())
        self.assertEqual(len(samples), 12)
        at, mhz, watts, reasons = samples[0]
        self.assertAlmostEqual(at, T0 - 0.5, places=3)
        self.assertEqual((mhz, watts, reasons), (1980.0, 120.0, "0x0000000000000004"))
        self.assertIsNone(identity_table.first_number("[N/A]"))

    def test_table_medians_skip_the_start_of_each_hold(self):
        text = identity_table.table(self.run.coda, self.run.torch, self.run.smi, self.run.holds)
        cells = self.row(text, (16384, 4096, 4096))
        # M N K, cuBLAS TFLOP/s, identity TFLOP/s, ratio, config, cuBLAS MHz, coda MHz, cuBLAS W, coda W, mJ, mJ
        self.assertEqual(cells[3:6], ["600.0", "660.0", "1.100"])
        self.assertEqual(cells[6], "`hopper bm=128 bn=128 bk=64 stages=6 pingpong`")
        self.assertEqual(cells[7:11], ["1420", "1310", "692", "681"])
        cublas_ms = 2.0 * 16384 * 4096 * 4096 / 600e9
        self.assertEqual(cells[11], f"{692 * cublas_ms:.1f}")
        self.assertEqual(cells[12], f"{681 * cublas_ms / 1.1:.1f}")
        # A shape without a hold has no clock or power.
        self.assertEqual(self.row(text, (4096, 4096, 4096))[7:], ["—"] * 6)
        self.assertIn("nvidia-smi samples of clocks.sm, power.draw.instant, temperature.gpu, "
                      "clocks_event_reasons.active per hold: 3 to 5.", text)
        self.assertIn("0x0000000000000004: 5", text)
        self.assertIn("0x0000000000000000: 3", text)

    def test_summaries_per_group_against_the_targets(self):
        text = identity_table.table(self.run.coda, self.run.torch)
        expected_set = (1.1 ** 11 / 1.04) ** (1 / 12)
        self.assertIn(f"12-shape set, identity / cuBLAS over 12 of 12 shapes: geometric mean **{expected_set:.3f}** "
                      "(target >= 1.03: met); minimum **0.962** at 4096x2048x2048 (target >= 0.97: NOT met).", text)
        expected_llama = (1.1 ** 4) ** (1 / 5)
        self.assertIn(f"LLaMA shapes (M=8192), identity / cuBLAS over 5 of 5 shapes: geometric mean "
                      f"**{expected_llama:.3f}** (target >= 1.03: met); minimum **1.000** at 8192x128256x4096 "
                      "(target >= 0.97: met).", text)
        self.assertIn("No HOLD lines given", text)

    def test_the_baseline_rows_are_chosen_by_name(self):
        # bench_torch.py --fp8 writes torch._scaled_mm rows: with --baseline they are what coda is compared with.
        with open(self.run.torch) as f:
            scaled = [line.replace("torch.matmul,", "torch._scaled_mm,") for line in f]
        with open(self.run.torch, "w") as f:
            f.writelines(scaled)
        self.assertIn("12-shape set: no shape measured by both.", identity_table.table(self.run.coda, self.run.torch))
        text = identity_table.table(self.run.coda, self.run.torch, baseline="torch._scaled_mm")
        self.assertIn("over 12 of 12 shapes", text)

    def test_missing_shapes_are_named(self):
        with open(self.run.torch) as f:
            kept = [line for line in f if not line.startswith("torch.matmul,4096,6144,4096,")]
        with open(self.run.torch, "w") as f:
            f.writelines(kept)
        text = identity_table.table(self.run.coda, self.run.torch)
        self.assertIn("over 11 of 12 shapes", text)
        self.assertIn("12-shape set: not measured by both: 4096x6144x4096.", text)
        self.assertEqual(self.row(text, (4096, 6144, 4096))[3:6], ["—", "660.0", "—"])

    def test_block_scaled_holds_split_its_time_into_clock_and_cycles(self):
        # coda bench gemm --block-scales --hold-ms: blockwise rows beside the identity's, and a coda_blockwise hold
        # after the coda one (T0 + 5 to 6.5 s: a dropped first sample, then three at 1250 MHz and 695 W medians).
        coda_ms = 2.0 * 16384 * 4096 * 4096 / 600e9 / 1.10
        config = "hopper bm=128 bn=256 bk=64 stages=4 cooperative"
        with open(self.run.coda, "a") as f:
            f.write(f"blockwise,16384,4096,4096,{coda_ms * 1.15:.5f},1.0,{config}\n")
            f.write(f"blockwise,4096,4096,4096,0.12000,1.0,{config}\n")
        with open(self.run.holds[0], "a") as f:
            f.write(f"HOLD coda_blockwise 16384 4096 4096 start {T0 + 5:.3f}\n"
                    f"HOLD coda_blockwise 16384 4096 4096 stop {T0 + 6.5:.3f}\n")
        with open(self.run.smi, "a") as f:
            f.write("\n".join([smi_line(T0 + 5.1, 1900, 300.0)] +
                              [smi_line(T0 + 5.3 + 0.1 * i, 1240 + 10 * i, 694.0 + i) for i in range(3)]) + "\n")
        text = identity_table.table(self.run.coda, self.run.torch, self.run.smi, self.run.holds)
        section = text[text.index("Block-scaled against per-tensor"):]
        cells = self.row(section, (16384, 4096, 4096))
        # M N K, ms, ms, time ratio, MHz, MHz, cycles ratio, W, W, mJ, mJ, energy ratio
        self.assertEqual(cells[5], "1.150")
        self.assertEqual(cells[6:8], ["1310", "1250"])
        self.assertEqual(cells[8], f"{1.15 * 1250 / 1310:.3f}")
        self.assertEqual(cells[9:11], ["681", "695"])
        self.assertEqual(cells[13], f"{695 * 1.15 / 681:.3f}")
        # A shape without holds: its time ratio, no clock, power or energy.
        no_hold = self.row(section, (4096, 4096, 4096))
        self.assertEqual(no_hold[5], f"{0.12 / (2.0 * 4096 ** 3 / 600e9 / 1.10):.3f}")
        self.assertEqual(no_hold[6:], ["—"] * 8)
        self.assertIn(f"cycles {1.15 * 1250 / 1310:.3f} (1 shape)", section)
        # Without a coda_blockwise hold, no such section.
        self.assertNotIn("Block-scaled", identity_table.table(self.run.coda, self.run.torch))

    def test_tiles_from_kernel_names(self):
        self.assertEqual(identity_table.cublas_tile("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"), (256, 128))
        self.assertEqual(identity_table.cublas_tile("nvjet_hsh_320x128_64x3_1x2_v_bz_coopB_NTN"), (320, 128))
        self.assertEqual(identity_table.cublas_tile("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_"
                                                    "warpgroupsize2x1x1_execute_segment_k_off_kernel"), (128, 256))
        self.assertIsNone(identity_table.cublas_tile("ampere_bf16_s16816gemm_bf16"))
        self.assertEqual(identity_table.coda_tile("hopper bm=128 bn=256 bk=64 stages=4", ""), (128, 256))
        self.assertEqual(identity_table.coda_tile(
            "fixed tile", "void coda::hopper_gemm<coda::bf16, true, true, 128, 64, 6, true, coda_gen::Epilogue>"
                          "(coda::GemmProblem)"), (128, 64))

    def test_ncu_instructions_per_tile(self):
        coda_ncu = self.run.write("ncu_coda_16384x4096x4096.csv", ncu_export(
            "void coda::hopper_gemm<coda::bf16, true, true, 128, 128, 6, true, coda_gen::Epilogue>(coda::GemmProblem)",
            "1,111,572", "81,200,000", "1,048,576"))
        cublas_ncu = self.run.write("ncu_cublas_16384x4096x4096.csv", ncu_export(
            "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_TNT", "1140155", "92.6", "0.5",
            units='"","","","","","","","","","","","cycle","cycle","Minst","Minst"'))
        unknown = self.run.write("ncu_cublas_4096x2048x2048.csv", ncu_export("some_gemm_kernel", "10", "1000", "0"))
        empty = self.run.write("ncu_coda_4096x2048x2048.csv", ["==PROF== No kernels were profiled."])
        text = identity_table.table(self.run.coda, self.run.torch, ncu_paths=[coda_ncu, cublas_ncu, unknown, empty])
        lines = {line.split("|")[4].strip() + " " + line.split("|")[1].strip() + "x" + line.split("|")[2].strip(): line
                 for line in text.splitlines() if line.startswith("| ") and ("coda" in line or "cublas" in line)}
        coda_cells = [c.strip() for c in lines["coda 16384x4096"].strip("|").split("|")]
        self.assertEqual(coda_cells[5:], ["128x128", "4096", "81.2", "1.05", "1111572", "19824", "—", "—"])
        cublas_cells = [c.strip() for c in lines["cublas 16384x4096"].strip("|").split("|")]
        tiles = 52 * 32  # ceil(16384 / 320) x 4096 / 128
        self.assertEqual(cublas_cells[5:], ["320x128", str(tiles), "92.6", "0.50", "1140155", f"{92.6e6 / tiles:.0f}",
                                           "—", "—"])
        unknown_cells = [c.strip() for c in lines["cublas 4096x2048"].strip("|").split("|")]
        self.assertEqual(unknown_cells[5:], ["—", "—", "0.0", "0.00", "10", "—", "—", "—"])
        self.assertIn("(no kernel in ncu_coda_4096x2048x2048.csv)", lines["coda 4096x2048"])

    def test_ncu_sm_activity_and_dram_bytes(self):
        # The SM-activity and DRAM metrics beside the usual ones, in ncu's prefixed units (Mcycle, Gbyte).
        header = NCU_HEADER + ',"sm__cycles_active.min","sm__cycles_active.avg","sm__cycles_active.max",' \
                              '"dram__bytes_read.sum","dram__bytes_write.sum"'
        units = NCU_UNITS + ',"Mcycle","Mcycle","Mcycle","Gbyte","Mbyte"'
        export = ncu_export("nvjet_sm90_qqtst_128x160_128x5_2x1_v_bz_coopA_algo2_TNT", "2,000,000", "1,000", "10")
        export[1], export[2] = header, units
        export[3] += ',"1.5","1.8","1.99","2.5","134"'
        path = self.run.write("ncu_cublas_16384x4096x4096.csv", export)
        text = identity_table.table(self.run.coda, self.run.torch, ncu_paths=[path])
        line = next(line for line in text.splitlines() if "nvjet" in line)
        cells = [c.strip() for c in line.strip("|").split("|")]
        self.assertEqual(cells[-2:], ["0.750 / 0.900 / 0.995", "2.63"])


if __name__ == "__main__":
    unittest.main()
