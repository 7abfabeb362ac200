"""One memory monitor per device for the memory panel: started here, replaced when the device changes."""
from __future__ import annotations

import torch

from leanseg.core.memory import MemoryMonitor

SAMPLE_RATE_HZ = 10.0  # samples a second: smooth enough to see tiles, cheap enough to run always
HISTORY_S = 600.0  # seconds of history the ring buffer keeps


def start_monitor(current: MemoryMonitor | None, device: torch.device) -> MemoryMonitor:
    """`current` if it already watches `device`; else close it and start a new monitor for `device`."""
    if current is not None and current.device == device:
        return current
    if current is not None:
        current.close()
    monitor = MemoryMonitor(device, rate_hz=SAMPLE_RATE_HZ, capacity_s=HISTORY_S)
    monitor.start()
    return monitor
