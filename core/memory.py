"""Memory measurement shared by the CLI, jobs and GUI (no Qt).

Telemetry lives in `memory_system` (glibc, /proc), `memory_sources` (MemorySample, per-device
readers), `memory_monitor` (MemoryMonitor), `memory_cache` (register_cache, empty_cache) and
`memory_log` (CSV); the public names are re-exported here (`from leanseg.core.memory import MemoryMonitor`).
"""
from __future__ import annotations

import torch

from .memory_cache import empty_cache, register_cache, release_caches
from .memory_log import MemoryLog, read_memory_csv, write_memory_csv
from .memory_monitor import MemoryMonitor, event_mark_label
from .memory_sources import (
    RESIDENT_HIGH_WATER,
    SOURCE_CUDA,
    SOURCE_GLIBC,
    SOURCE_RSS,
    LiveBytesGauge,
    MemorySample,
    engine_live_bytes,
)

__all__ = [
    "SOURCE_CUDA", "SOURCE_GLIBC", "SOURCE_RSS", "LiveBytesGauge", "MemoryLog", "MemoryMonitor", "MemorySample",
    "empty_cache", "engine_live_bytes", "event_mark_label", "format_bytes", "parse_bytes", "peak_bytes",
    "read_memory_csv", "register_cache", "release_caches", "reset_peak", "write_memory_csv",
]

_DEFAULT_WINDOW = RESIDENT_HIGH_WATER.open()  # the CPU peak window of reset_peak / peak_bytes


def reset_peak(device: torch.device) -> int:
    """Start a new peak window: CUDA's max_memory_allocated, or the process's RSS high-water mark.

    Returns what is in use as the window starts (CUDA allocated bytes, or RSS), the floor of its peak.
    """
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return int(torch.cuda.memory_allocated(device))
    rss, _ = RESIDENT_HIGH_WATER.take(_DEFAULT_WINDOW)  # shares VmHWM with running monitors (see ResidentHighWater)
    return rss


def peak_bytes(device: torch.device) -> int:
    """Peak since `reset_peak`: CUDA allocated bytes, or the process's resident high-water mark."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return RESIDENT_HIGH_WATER.peak(_DEFAULT_WINDOW)


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
