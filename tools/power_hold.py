"""Each system run alone for a while at its sustained clock, with nvidia-smi sampling the SM clock and power: its time
per call there, the median power and clock, and the energy of one call. At the H200's 700 W cap, interleaved timing
shares the power budget between systems of different energy per call; run alone, each gets the clock its own energy
allows, as a training loop that runs only it does. (tools/bench_identity.sh does the same for single GEMMs.)

Used by tools/bench_block.py --hold-s. The first HOLD_SKIP_S of each hold are left out while the clock settles."""
import contextlib
import datetime
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from identity_table import median, read_smi  # noqa: E402

HOLD_SKIP_S = 0.5
SAMPLE_MS = 50
# The power field: the instantaneous reading where the driver has it (power.draw is a one-second average on recent
# GPUs, too slow for holds of a few seconds).
POWER_FIELDS = ("power.draw.instant", "power.draw")


def smi_fields(gpu):
    """The first query nvidia-smi accepts, timestamp,clocks.sm,<power>; None without nvidia-smi or a power field."""
    for power in POWER_FIELDS:
        fields = f"timestamp,clocks.sm,{power}"
        try:
            probe = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader", "-i", str(gpu)],
                                   capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if probe.returncode == 0 and "not a valid field" not in probe.stdout.lower():
            return fields
    return None


@contextlib.contextmanager
def sampling(gpu):
    """Samples nvidia-smi every SAMPLE_MS while the block runs; yields a list that holds the sample lines after it
    (empty where nvidia-smi cannot sample)."""
    lines = []
    fields = smi_fields(gpu)
    if fields is None:
        yield lines
        return
    with tempfile.TemporaryFile(mode="w+") as sink:
        proc = subprocess.Popen(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader",
                                 "-lms", str(SAMPLE_MS), "-i", str(gpu)], stdout=sink, stderr=subprocess.DEVNULL,
                                text=True)
        try:
            yield lines
        finally:
            time.sleep(2 * SAMPLE_MS / 1000)  # the last hold's last samples
            proc.terminate()
            proc.wait(timeout=30)
            sink.seek(0)
            lines += sink.read().splitlines()


def summarize(samples, windows, skip=HOLD_SKIP_S):
    """{name: (median MHz, median W, samples)} of the samples inside each system's (start, stop) window, its first
    `skip` seconds left out; samples are read_smi's (time, MHz, W, reasons)."""
    out = {}
    for name, (start, stop) in windows.items():
        inside = [s for s in samples if start + skip <= s[0] <= stop]
        out[name] = (median(s[1] for s in inside), median(s[2] for s in inside), len(inside))
    return out


def smi_gpu():
    """The GPU the benchmarks run on, as nvidia-smi -i takes it: $CODA_SMI_GPU, else CUDA's first visible device."""
    gpu = os.environ.get("CODA_SMI_GPU") or os.environ.get("CUDA_VISIBLE_DEVICES") or "0"
    return gpu.split(",")[0]


def hold(systems, seconds, gpu=None):
    """Runs each of `systems` (name -> fn, one call = one step) alone for `seconds`, one after the other, and returns
    {name: {"alone_ms", "MHz", "W", "J"}}: GPU time per call over the whole hold (CUDA events), the median clock and
    power of the samples inside it, and the energy of one call (median W x alone_ms). MHz, W and J are None where
    nothing was sampled."""
    import torch
    windows, per_call = {}, {}
    with sampling(smi_gpu() if gpu is None else gpu) as lines:
        for name, fn in systems.items():
            torch.cuda.synchronize()
            start_ev, end_ev = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            # Wall time as nvidia-smi stamps its samples (local time, seconds since the epoch).
            start = datetime.datetime.now().timestamp()
            start_ev.record()
            calls, queued = 0, None
            while datetime.datetime.now().timestamp() - start < seconds:
                fn()
                calls += 1
                # One call queued ahead at most: the host neither starves the GPU nor runs seconds ahead of it.
                done = torch.cuda.Event()
                done.record()
                if queued is not None:
                    queued.synchronize()
                queued = done
            end_ev.record()
            end_ev.synchronize()
            windows[name] = (start, datetime.datetime.now().timestamp())
            per_call[name] = start_ev.elapsed_time(end_ev) / calls
    stats = summarize(read_smi(lines), windows)
    out = {}
    for name, ms in per_call.items():
        mhz, watts, _ = stats[name]
        out[name] = {"alone_ms": round(ms, 3), "MHz": round(mhz) if mhz is not None else None,
                     "W": round(watts, 1) if watts is not None else None,
                     "J": round(watts * ms / 1000, 3) if watts is not None else None}
    return out
