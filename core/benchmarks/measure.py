"""Run one benchmark case in a fresh subprocess and read its peak memory and times.

A case is a function `case(probe: Probe, **kwargs) -> dict` in an importable module. It sets up
(model, input), warms up, calls `probe.start()` right before what is measured, and returns a dict
of figures; the child adds `peak_bytes` (above the baseline at `probe.start()`). The child runs with
MALLOC_MMAP_THRESHOLD_=65536 so that freed tensors go back to the OS and RSS follows live bytes.
"""
from __future__ import annotations

import importlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

RESULT_MARKER = "@@leanseg-bench-result@@"


class Probe:
    """Peak memory above a baseline: VmHWM on the CPU, max_memory_allocated on CUDA."""

    def __init__(self, device: str = "cpu") -> None:
        self.device = torch.device(device)
        self.baseline = 0

    def start(self) -> None:
        """Forget the peak so far; the baseline is what is resident now."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.baseline = torch.cuda.memory_allocated(self.device)
            return
        before = _status_kb("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS at this moment
        # Pages can come and go between the reset and a read (other threads, the reads themselves): a run
        # that grows nothing read -88 KB once. The lower of the two reads is the baseline.
        self.baseline = min(before, _status_kb("VmRSS")) * 1024

    def peak_bytes(self) -> int:
        """Bytes above the baseline at the peak since start(); 0 when nothing grew."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            return int(torch.cuda.max_memory_allocated(self.device)) - self.baseline
        return max(0, _status_kb("VmHWM") * 1024 - self.baseline)


def _status_kb(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{key} not in /proc/self/status")


def median_seconds(fn: Callable[[], object], repeats: int = 3, warmup: int = 1) -> float:
    """Median wall time of `fn` over `repeats` runs after `warmup` untimed runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run_case(target: str, kwargs: dict[str, Any], threads: int = 2, timeout: float = 900.0, *,
             user_malloc: bool = False) -> dict[str, Any]:
    """Run `module:function` in a child process; returns its dict, or {'error': ...}.

    By default the child maps every allocation over 64 KB (MALLOC_MMAP_THRESHOLD_=65536), so freed
    tensors go back to the OS and its peak RSS follows live bytes: right for memory, but each large
    allocation then costs page faults. `user_malloc=True` runs the child with glibc's defaults, as a
    user's process runs: right for throughput (frames/s, images/s).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env["OMP_NUM_THREADS"] = str(threads)
    if not user_malloc:
        env["MALLOC_MMAP_THRESHOLD_"] = "65536"
    spec = json.dumps({"target": target, "kwargs": kwargs, "threads": threads})
    try:
        proc = subprocess.run([sys.executable, "-m", __name__, spec], capture_output=True, text=True,
                              env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_MARKER):
            result: dict[str, Any] = json.loads(line[len(RESULT_MARKER):])
            return result
    if proc.returncode < 0 or proc.returncode == 137:
        return {"error": f"killed (signal {-proc.returncode}; out of memory?)"}
    return {"error": child_error(proc.stderr or proc.stdout, proc.returncode)}


def child_error(output: str, returncode: int) -> str:
    """A failed child's error in one line: a traceback's last line, the exception with its class's own name
    ('BudgetTooSmallError: the memory budget ...'); else the output's last three lines; else the exit code."""
    lines = output.strip().splitlines()
    if any(line.startswith("Traceback (most recent call last)") for line in lines):
        return re.sub(r"^(?:\w+\.)+(?=\w+(?::|$))", "", lines[-1])
    return " | ".join(lines[-3:]) or f"exit code {returncode}"


def _child(spec_json: str) -> None:
    spec = json.loads(spec_json)
    torch.set_num_threads(int(spec["threads"]))
    module_name, function_name = spec["target"].split(":")
    case = getattr(importlib.import_module(module_name), function_name)
    kwargs = spec["kwargs"]
    probe = Probe(kwargs.get("device", "cpu"))
    result = dict(case(probe, **kwargs))
    result.setdefault("peak_bytes", probe.peak_bytes())
    print(RESULT_MARKER + json.dumps(result), flush=True)


if __name__ == "__main__":
    _child(sys.argv[1])
