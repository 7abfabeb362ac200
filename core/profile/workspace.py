"""Step runners that measure a step's hidden temporaries (what the process held beyond its output).

CPU: the resident high-water mark (VmHWM) after resetting it, minus the resident size before;
meaningful when large allocations are mapped and returned on free (MALLOC_MMAP_THRESHOLD_=65536,
as in benchmark subprocesses). CUDA: max_memory_allocated minus allocated before.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from .walker import StepRunner, run_plainly

MMAP_THRESHOLD_ENV = "MALLOC_MMAP_THRESHOLD_"


class _ProcStatus:
    """VmRSS / VmHWM of this process, read from a kept-open /proc/self/status."""

    def __init__(self) -> None:
        self._status = open("/proc/self/status", "rb", buffering=0)  # noqa: SIM115 (kept open on purpose)

    def read_kb(self) -> dict[str, int]:
        self._status.seek(0)
        values = {}
        for line in self._status.read().splitlines():
            if line.startswith((b"VmRSS:", b"VmHWM:")):
                key, number = line.split()[:2]
                values[key[:-1].decode()] = int(number)
        return values

    def close(self) -> None:
        self._status.close()


def cpu_runner_available() -> bool:
    return Path("/proc/self/clear_refs").exists() and Path("/proc/self/status").exists()


def high_water_runner() -> tuple[StepRunner, Callable[[], None]]:
    """(runner, close): each step's rise of the resident high-water mark, in bytes."""
    status = _ProcStatus()
    clear_refs = open("/proc/self/clear_refs", "w")  # noqa: SIM115

    def run(call: Callable[[], Any]) -> tuple[Any, int | None]:
        clear_refs.write("5")
        clear_refs.flush()
        before = status.read_kb()["VmRSS"]
        value = call()
        return value, (status.read_kb()["VmHWM"] - before) * 1024

    def close() -> None:
        status.close()
        clear_refs.close()

    return run, close


def cuda_runner(device: torch.device) -> StepRunner:
    """Each step's rise of CUDA allocated bytes above the level before it."""

    def run(call: Callable[[], Any]) -> tuple[Any, int | None]:
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        value = call()
        torch.cuda.synchronize(device)
        return value, int(torch.cuda.max_memory_allocated(device)) - before

    return run


def measuring_runner(device: torch.device) -> tuple[StepRunner, Callable[[], None], str]:
    """The best step runner for a device: (runner, close, a note on what it measures)."""
    if device.type == "cuda":
        return cuda_runner(device), lambda: None, "hidden bytes: CUDA max_memory_allocated per step"
    if device.type == "cpu" and cpu_runner_available():
        run, close = high_water_runner()
        note = "hidden bytes: rise of VmHWM per step"
        if os.environ.get(MMAP_THRESHOLD_ENV) is None:
            note += f" ({MMAP_THRESHOLD_ENV} unset: the heap may hide or inflate them)"
        return run, close, note
    return run_plainly, lambda: None, "hidden bytes not measured on this device"


class StepHighWater:
    """Brackets consecutive steps from a per-step callback: `mark()` after one step, `rise()` after the next
    returns the highest memory reached since that mark, above the level at the first mark (VmHWM on the
    CPU, max allocated on CUDA). Memory a step keeps that no tensor holds shows in every later rise."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._base: int | None = None
        self._status = _ProcStatus() if device.type == "cpu" else None
        self._clear_refs = open("/proc/self/clear_refs", "w") if device.type == "cpu" else None  # noqa: SIM115

    def mark(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            level = int(torch.cuda.memory_allocated(self.device))
        else:
            assert self._status is not None and self._clear_refs is not None
            self._clear_refs.write("5")
            self._clear_refs.flush()
            level = self._status.read_kb()["VmRSS"] * 1024
        self._base = level if self._base is None else self._base

    def rise(self) -> int:
        assert self._base is not None, "mark() first"
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            return int(torch.cuda.max_memory_allocated(self.device)) - self._base
        assert self._status is not None
        return self._status.read_kb()["VmHWM"] * 1024 - self._base

    def close(self) -> None:
        if self._status is not None and self._clear_refs is not None:
            self._status.close()
            self._clear_refs.close()


def step_high_water(device: torch.device) -> StepHighWater | None:
    """A StepHighWater for the device, or None where nothing can be measured (meta, no /proc)."""
    if device.type == "cuda" or (device.type == "cpu" and cpu_runner_available()):
        return StepHighWater(device)
    return None
