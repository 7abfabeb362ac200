"""Memory measurement shared by the CLI, jobs and GUI (no Qt).

Telemetry lives in `system` (glibc, /proc), `sources` (MemorySample, per-device
readers), `monitor` (MemoryMonitor), `cache` (register_cache, empty_cache), `log` (CSV) and
`units` (format_bytes, parse_bytes); the public names are re-exported here
(`from leanseg.core.memory import MemoryMonitor`).
"""
from __future__ import annotations

import torch

from .cache import empty_cache, register_cache, release_caches
from .log import MemoryLog, read_memory_csv, write_memory_csv
from .monitor import MemoryMonitor, event_mark_label, plot_mark_label
from .sources import (
    RESIDENT_HIGH_WATER,
    SOURCE_CUDA,
    SOURCE_GLIBC,
    SOURCE_RSS,
    LiveBytesGauge,
    MemorySample,
    engine_live_bytes,
)
from .units import format_bytes, parse_bytes

__all__ = [
    "SOURCE_CUDA", "SOURCE_GLIBC", "SOURCE_RSS", "LiveBytesGauge", "MemoryLog", "MemoryMonitor", "MemorySample",
    "empty_cache", "engine_live_bytes", "event_mark_label", "format_bytes", "parse_bytes", "peak_bytes",
    "peak_label", "plot_mark_label", "read_memory_csv", "register_cache", "release_caches", "reset_peak",
    "write_memory_csv",
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


def peak_label(device: torch.device | str) -> str:
    """What `peak_bytes(device)` counts, for a summary: 'CUDA peak' (allocated) or 'process peak' (RSS)."""
    return "CUDA peak" if str(device).startswith("cuda") else "process peak"


def peak_bytes(device: torch.device) -> int:
    """Peak since `reset_peak`: CUDA allocated bytes, or the process's resident high-water mark."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return RESIDENT_HIGH_WATER.peak(_DEFAULT_WINDOW)
