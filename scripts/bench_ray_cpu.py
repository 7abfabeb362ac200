"""Where the machine's CPU goes while `bench_ray.py` runs one configuration: per-process CPU time from
psutil, sampled 4 times a second with the number of finished images, grouped by role.

Roles: `actors` (the segmenting actors: inference, overlays, PNG writes), `driver` (the leanseg
driver: hands out chunks, journals, reports), `ray` (raylets, GCS, log monitor, agents, idle
workers: Ray's own cost), `other` (everything else on the machine: other users' work, the kernel,
this sampler). The window is the bench's: from the sample where `warmup` images were done to the
last sample before the run ended, so start-up and compilation are left out.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

ROLES = ("actors", "driver", "ray", "other")
DRIVER_MARK = "leanseg.core.benchmarks.measure"  # the case's child process (see run_case)
RAY_MARKS = ("raylet", "gcs_server", "log_monitor", "dashboard", "runtime_env", "monitor.py", "ray start",
             "default_worker.py", "ray::")


def role_of(cmdline: list[str]) -> str:
    text = " ".join(cmdline)
    if text.startswith("ray::SegmentingActor"):
        return "actors"
    if DRIVER_MARK in text:
        return "driver"
    if any(mark in text for mark in RAY_MARKS):
        return "ray"
    return "other"


@dataclass
class Sample:
    at: float  # perf_counter seconds
    done: int  # images finished so far
    cpu: dict[int, tuple[str, float]] = field(default_factory=dict)  # pid -> (role, user + system seconds)


class CpuSampler:
    """`with CpuSampler(out_dir) as sampler: run()`, then `sampler.breakdown(warmup)`."""

    def __init__(self, out_dir: Path, every_s: float = 0.25) -> None:
        self.out_dir = out_dir  # images finished so far: overlay PNGs there (each written atomically)
        self.every_s = every_s
        self.samples: list[Sample] = []
        self._roles: dict[int, str] = {}  # a process's role, looked up once (cmdline reads are not free) ...
        self._recheck: set[int] = set()  # ... except Ray workers not yet actors: they retitle themselves
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            done = len(list(self.out_dir.glob("*_overlay.png"))) if self.out_dir.is_dir() else 0
            sample = Sample(time.perf_counter(), done)
            for process in psutil.process_iter():
                try:
                    role = self._roles.get(process.pid)
                    if role is None or process.pid in self._recheck:
                        cmdline = process.cmdline()
                        role = self._roles[process.pid] = role_of(cmdline)
                        worker = bool(cmdline) and ("default_worker.py" in " ".join(cmdline)
                                                    or cmdline[0].startswith("ray::IDLE"))
                        (self._recheck.add if worker else self._recheck.discard)(process.pid)
                    times = process.cpu_times()
                    sample.cpu[process.pid] = (role, times.user + times.system)
                except psutil.Error:
                    continue
            self.samples.append(sample)
            self._stop.wait(self.every_s)

    def breakdown(self, warmup: int) -> dict[str, float]:
        """{'seconds', 'images', and per role: '<role> cores' (CPUs busy on average), '<role> ms/img'}."""
        total = max((s.done for s in self.samples), default=0)
        window = [s for s in self.samples if warmup <= s.done < total]  # the actors are alive throughout
        if len(window) < 2:
            return {}
        first, last = window[0], window[-1]
        seconds, images = last.at - first.at, last.done - first.done
        used = dict.fromkeys(ROLES, 0.0)
        for pid, (role, cpu) in last.cpu.items():
            before = first.cpu.get(pid, (role, 0.0))[1]  # a process started within the window: all of it
            used[role] += max(cpu - before, 0.0)
        result = {"seconds": seconds, "images": float(images)}
        for role in ROLES:
            result[f"{role} cores"] = used[role] / seconds if seconds > 0 else 0.0
            result[f"{role} ms/img"] = 1000 * used[role] / images if images else 0.0
        return result
