"""Memory measurement shared by the CLI, jobs and GUI (no Qt)."""
from __future__ import annotations

from pathlib import Path

import psutil
import torch

_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


def reset_peak(device: torch.device) -> None:
    """Start a new peak window: CUDA's max_memory_allocated, or the process's VmHWM."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        pass  # not Linux, or not permitted: the peak then covers the process lifetime


def peak_bytes(device: torch.device) -> int:
    """Peak since `reset_peak`: CUDA allocated bytes, or the process's resident high-water mark."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(psutil.Process().memory_info().rss)


def format_bytes(n: float) -> str:
    """1536 -> '1.5 KB'; decimal units, as people read them."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def parse_bytes(text: str) -> int:
    """'512MB', '1.5GB', '800k', '1048576' -> bytes (decimal units; KiB/MiB/GiB binary)."""
    units = {"": 1, "B": 1, "K": 10**3, "KB": 10**3, "M": 10**6, "MB": 10**6, "G": 10**9, "GB": 10**9,
             "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}
    cleaned = text.strip().upper().replace(" ", "")
    number = cleaned.rstrip("KMGIB")
    unit = cleaned[len(number):]
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"cannot read {text!r} as a size; write e.g. 512MB, 1.5GB or 800000000") from None
    if unit not in units or value <= 0:
        raise ValueError(f"cannot read {text!r} as a size; units: {', '.join(u for u in units if u)}")
    return int(value * units[unit])


class LiveBytesGauge:
    """The engine's exact count of bytes in live tensors; sampled by the memory monitor.

    The executor calls `set` after each step; readers see the latest value and the peak.
    """

    def __init__(self) -> None:
        self.value = 0  # bytes live now (int writes are atomic under the GIL)
        self.peak = 0  # highest value since `reset_peak`

    def set(self, live_bytes: int) -> None:
        self.value = live_bytes
        if live_bytes > self.peak:
            self.peak = live_bytes

    def reset_peak(self) -> None:
        self.peak = self.value


engine_live_bytes = LiveBytesGauge()
