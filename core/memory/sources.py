"""Where memory figures come from: glibc's allocator, the process RSS, or PyTorch's CUDA allocator (no Qt).

One model on both devices:
- allocated: bytes the allocator has handed out and not taken back (CUDA: `memory_allocated`;
  glibc: mallinfo2 `uordblks + hblkhd`, i.e. heap chunks in use plus mmapped chunks);
- reserved: bytes the allocator holds from the system (CUDA: `memory_reserved`; glibc: `arena +
  hblkhd`, less the free heap pages `malloc_trim` gave back, which glibc still counts);
- peak allocated: the highest allocated since `reset_peak`, including spikes between two samples
  (CUDA: `max_memory_allocated`; CPU: see `CpuMemorySource.read`).
Elsewhere (musl, macOS, Windows) allocated = reserved = RSS, and `MemorySample.source` says so.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import torch

from .system import (
    HAVE_GLIBC,
    RESIDENT_HIGH_WATER,
    glibc_allocated_reserved,
    ram_total_available,
    read_rss_hwm,
)

SOURCE_CUDA = "cuda"
SOURCE_GLIBC = "glibc mallinfo2"
SOURCE_RSS = "rss"
MALLINFO2_CPU_SHARE = 0.004  # the sampling thread spends at most this share of a core inside mallinfo2


@dataclass(frozen=True)
class MemorySample:
    """One reading of the memory of `device`; byte counts are ints."""

    time: float  # seconds since the monitor started
    device: str  # 'cpu' or 'cuda:N'
    allocated: int  # bytes handed out by the allocator and not given back
    reserved: int  # bytes the allocator holds from the system (>= allocated, up to rounding)
    peak_allocated: int  # highest allocated since reset_peak, spikes between samples included
    rss: int  # the process's resident set size (host memory)
    device_total: int | None  # device memory (CUDA) or physical RAM (CPU) in all; None if unknown
    device_free: int | None  # free on the device, or RAM available to new processes; None if unknown
    source: str  # SOURCE_CUDA, SOURCE_GLIBC or SOURCE_RSS: how allocated / reserved were read
    engine_live: int = 0  # bytes in tensors the lean engine holds live (0 when it is not running)


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


# ---------------------------------------------------------------- per-device readers


class CpuMemorySource:
    """Reads CPU samples: glibc mallinfo2 where available, else RSS; spikes between reads from VmHWM.

    Peak allocated: each read takes the RSS high-water mark of the interval since the previous read.
    RSS above the RSS at either end of the interval is memory that came and went in between, so the
    interval's peak allocated is at least min(allocated_then + hwm - rss_then, allocated_now + hwm -
    rss_now) (the min keeps a trim, where RSS falls, from reading as a peak). Each end pairs allocated
    with an RSS read just after the allocator's figures, not the RSS read before them:
    - glibc counts a big chunk as freed before its munmap returns, so a read racing a free can see
      RSS still holding pages the allocator has let go; RSS read after clearing the high-water mark
      (which waits for the munmap: both take the address-space lock) no longer holds them;
    - a throttled read reuses the allocator's last figures, and with them the RSS read beside them:
      a stale allocated next to a fresh RSS that caught a tensor half-written would hide part of it.
    """

    def __init__(self, device: torch.device, use_glibc: bool = True) -> None:
        self.device = device
        self._use_glibc = use_glibc and HAVE_GLIBC  # False: the RSS fallback other platforms get
        self.source = SOURCE_GLIBC if self._use_glibc else SOURCE_RSS
        self._lock = threading.Lock()
        self._window = RESIDENT_HIGH_WATER.open()
        self._previous: tuple[int, int] | None = None  # (allocated, rss read beside it) at the previous read
        self._peak = 0
        self._glibc_last: tuple[int, int, int] | None = None  # (allocated, reserved, rss) at the last mallinfo2 call
        self._glibc_next_at = 0.0  # monotonic time before which a throttled read reuses _glibc_last

    def _allocated_reserved(self, rss: int, fresh: bool) -> tuple[int, int, int]:
        """(allocated, reserved, the RSS read just after them). mallinfo2 walks glibc's free lists (about 1 ms
        per 20,000 free chunks): unless `fresh`, call it no more often than keeps its cost under
        MALLINFO2_CPU_SHARE of a core, reusing the last figures and the RSS that went with them."""
        if not self._use_glibc:
            return rss, rss, rss
        now = time.monotonic()
        if fresh or self._glibc_last is None or now >= self._glibc_next_at:
            cpu_before = time.thread_time()
            glibc = glibc_allocated_reserved()
            assert glibc is not None
            self._glibc_next_at = now + (time.thread_time() - cpu_before) / MALLINFO2_CPU_SHARE
            self._glibc_last = glibc[0], glibc[1], read_rss_hwm()[0]
        return self._glibc_last

    def read(self, at_s: float, engine_live: int, fresh: bool = True) -> MemorySample:
        """One sample at `at_s` seconds; `fresh` False lets a busy heap's allocator figures be reused."""
        with self._lock:
            rss, interval_hwm = RESIDENT_HIGH_WATER.take(self._window)  # RSS first: see class docstring
            allocated, reserved, rss_beside = self._allocated_reserved(rss, fresh)
            peak = allocated
            if interval_hwm is not None and self._previous is not None:
                allocated_then, rss_then = self._previous
                spike = min(allocated_then + interval_hwm - rss_then, allocated + interval_hwm - rss_beside)
                peak = max(peak, spike)
            self._previous = (allocated, rss_beside)
            self._peak = max(self._peak, peak)
            total, available = ram_total_available()
            return MemorySample(at_s, str(self.device), allocated, reserved, self._peak, rss, total, available,
                                self.source, engine_live)

    def reset_peak(self) -> None:
        with self._lock:
            rss, _ = RESIDENT_HIGH_WATER.take(self._window)
            allocated, _, _ = self._allocated_reserved(rss, fresh=True)
            self._previous = (allocated, rss)
            self._peak = allocated

    def close(self) -> None:
        RESIDENT_HIGH_WATER.close(self._window)


class CudaMemorySource:
    """Reads CUDA samples from PyTorch's caching allocator; host RSS beside them.

    Never initialises CUDA or creates a context itself: before the process first uses the device,
    allocated and reserved read 0 and device total / free read None.
    """

    source = SOURCE_CUDA

    def __init__(self, device: torch.device) -> None:
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device() if torch.cuda.is_initialized() else 0)
        self.device = device
        self._lock = threading.Lock()
        self._peak = 0
        self._total: int | None = None  # device memory, read once CUDA is initialised

    def read(self, at_s: float, engine_live: int, fresh: bool = True) -> MemorySample:
        """One sample at `at_s` seconds (CUDA figures are always fresh: reading them is cheap)."""
        with self._lock:
            allocated = int(torch.cuda.memory_allocated(self.device))
            reserved = int(torch.cuda.memory_reserved(self.device))
            # our own running max: others (Segmenter, benchmarks) reset PyTorch's peak counter too
            self._peak = max(self._peak, int(torch.cuda.max_memory_allocated(self.device)), allocated)
            total = free = None
            if torch.cuda.is_initialized():
                if self._total is None:
                    self._total = int(torch.cuda.get_device_properties(self.device).total_memory)
                total = self._total
                if reserved > 0:  # a context exists on this device: asking cannot create one (~500 MB)
                    free = int(torch.cuda.mem_get_info(self.device)[0])
            rss, _ = read_rss_hwm()
            return MemorySample(at_s, str(self.device), allocated, reserved, self._peak, rss, total, free,
                                self.source, engine_live)

    def reset_peak(self) -> None:
        with self._lock:
            if torch.cuda.is_initialized():
                torch.cuda.reset_peak_memory_stats(self.device)
            self._peak = int(torch.cuda.memory_allocated(self.device))

    def close(self) -> None:
        pass


def memory_source(device: torch.device) -> CpuMemorySource | CudaMemorySource:
    """The reader for `device` ('cpu' or 'cuda[:N]')."""
    if device.type == "cuda":
        return CudaMemorySource(device)
    if device.type == "cpu":
        return CpuMemorySource(device)
    raise ValueError(f"no memory telemetry for device {device}; use cpu or cuda[:N]")
