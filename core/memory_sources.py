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

import ctypes
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import psutil
import torch

SOURCE_CUDA = "cuda"
SOURCE_GLIBC = "glibc mallinfo2"
SOURCE_RSS = "rss"
_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


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


# ---------------------------------------------------------------- glibc


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def _load_glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = _MallInfo2
        libc.mallinfo2.argtypes = []
        libc.malloc_trim.restype = ctypes.c_int
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        return libc
    except (OSError, AttributeError):  # musl, or glibc older than 2.33
        return None


_GLIBC = _load_glibc()
_trim_lock = threading.Lock()
_trimmed_free_bytes = 0  # free heap bytes malloc_trim returned to the OS that mallinfo2 still counts


def glibc_allocated_reserved() -> tuple[int, int, int] | None:
    """(allocated, reserved, free-in-heap) bytes from glibc's mallinfo2, or None without glibc."""
    global _trimmed_free_bytes
    if _GLIBC is None:
        return None
    info = _GLIBC.mallinfo2()
    allocated = info.uordblks + info.hblkhd
    with _trim_lock:  # trimmed pages come back as free chunks are reused, so the credit shrinks with them
        _trimmed_free_bytes = min(_trimmed_free_bytes, info.fordblks)
        reserved = info.arena + info.hblkhd - _trimmed_free_bytes
    return allocated, max(reserved, allocated), info.fordblks


def malloc_trim() -> bool:
    """glibc's malloc_trim(0): return free heap memory to the OS; False without glibc."""
    if _GLIBC is None:
        return False
    _GLIBC.malloc_trim(0)
    return True


def credit_trimmed(free_bytes_returned: int) -> None:
    """Record free heap bytes malloc_trim handed back inside the heap (mallinfo2 still counts them)."""
    global _trimmed_free_bytes
    if _GLIBC is None:
        return
    with _trim_lock:
        free_now = _GLIBC.mallinfo2().fordblks
        _trimmed_free_bytes = min(_trimmed_free_bytes + max(0, free_bytes_returned), free_now)


# ---------------------------------------------------------------- RSS and its high-water mark


def read_rss_hwm() -> tuple[int, int | None]:
    """(resident bytes now, resident high-water bytes since the last clear) of this process."""
    try:
        rss = hwm = None
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) * 1024
        if rss is not None:
            return rss, hwm
    except OSError:
        pass
    return int(psutil.Process().memory_info().rss), None


class ResidentHighWater:
    """Windows over the process's RSS high-water mark that survive each other's resets.

    The kernel keeps one VmHWM per process, reset by writing 5 to /proc/self/clear_refs. Every reset
    goes through here and first folds the old VmHWM into every open window, so `reset_peak` /
    `peak_bytes` and any number of monitors can share it. Code that writes clear_refs itself breaks
    the windows: use `leanseg.core.memory.reset_peak` instead.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._window_peaks: dict[int, int] = {}
        self._next_key = 0
        self.clearable = _CLEAR_REFS.exists()

    def _read_and_clear(self) -> tuple[int, int | None]:
        rss, hwm = read_rss_hwm()
        if hwm is not None and self.clearable:
            try:
                _CLEAR_REFS.write_text("5")
            except OSError:
                self.clearable = False
        if hwm is not None:
            for key, peak in self._window_peaks.items():
                self._window_peaks[key] = max(peak, hwm)
        return rss, hwm

    def open(self) -> int:
        """A new window starting now; returns its key."""
        with self._lock:
            rss, _ = self._read_and_clear()
            key = self._next_key
            self._next_key += 1
            self._window_peaks[key] = rss
            return key

    def close(self, key: int) -> None:
        with self._lock:
            self._window_peaks.pop(key, None)

    def take(self, key: int) -> tuple[int, int | None]:
        """(RSS now, highest RSS since the window's last take or open); the window restarts now.

        The high-water is None where the kernel keeps none or it cannot be reset (not Linux, no permission).
        """
        with self._lock:
            rss, hwm = self._read_and_clear()
            peak = self._window_peaks.get(key, rss)
            self._window_peaks[key] = rss
            return rss, (peak if hwm is not None and self.clearable else None)

    def peak(self, key: int) -> int:
        """Highest RSS since the window opened (RSS now where no high-water mark is kept)."""
        with self._lock:
            rss, hwm = read_rss_hwm()
            return max(self._window_peaks.get(key, rss), hwm if hwm is not None else rss)


RESIDENT_HIGH_WATER = ResidentHighWater()


# ---------------------------------------------------------------- per-device readers


class CpuMemorySource:
    """Reads CPU samples: glibc mallinfo2 where available, else RSS; spikes between reads from VmHWM.

    Peak allocated: each read takes the RSS high-water mark of the interval since the previous read.
    RSS above the RSS at either end of the interval is memory that came and went in between, so the
    interval's peak allocated is at least min(allocated_then + hwm - rss_then, allocated_now + hwm -
    rss_now) (the min keeps a trim, where RSS falls, from reading as a peak).
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.source = SOURCE_GLIBC if _GLIBC is not None else SOURCE_RSS
        self._lock = threading.Lock()
        self._window = RESIDENT_HIGH_WATER.open()
        self._previous: tuple[int, int] | None = None  # (allocated, rss) at the previous read
        self._peak = 0
        self._ram_total = psutil.virtual_memory().total

    def _allocated_reserved(self, rss: int) -> tuple[int, int]:
        glibc = glibc_allocated_reserved()
        return (glibc[0], glibc[1]) if glibc is not None else (rss, rss)

    def read(self, time: float, engine_live: int) -> MemorySample:
        with self._lock:
            rss, interval_hwm = RESIDENT_HIGH_WATER.take(self._window)  # RSS first: see class docstring
            allocated, reserved = self._allocated_reserved(rss)
            peak = allocated
            if interval_hwm is not None and self._previous is not None:
                allocated_then, rss_then = self._previous
                spike = min(allocated_then + interval_hwm - rss_then, allocated + interval_hwm - rss)
                peak = max(peak, spike)
            self._previous = (allocated, rss)
            self._peak = max(self._peak, peak)
            available = psutil.virtual_memory().available
            return MemorySample(time, str(self.device), allocated, reserved, self._peak, rss,
                                self._ram_total, available, self.source, engine_live)

    def reset_peak(self) -> None:
        with self._lock:
            rss, _ = RESIDENT_HIGH_WATER.take(self._window)
            allocated, _ = self._allocated_reserved(rss)
            self._previous = (allocated, rss)
            self._peak = allocated

    def close(self) -> None:
        RESIDENT_HIGH_WATER.close(self._window)


class CudaMemorySource:
    """Reads CUDA samples from PyTorch's caching allocator; host RSS beside them.

    Never initialises CUDA itself: before the first CUDA call of the process, allocated and reserved
    read 0 and device total / free read None.
    """

    source = SOURCE_CUDA

    def __init__(self, device: torch.device) -> None:
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device() if torch.cuda.is_initialized() else 0)
        self.device = device
        self._lock = threading.Lock()
        self._peak = 0

    def read(self, time: float, engine_live: int) -> MemorySample:
        with self._lock:
            allocated = int(torch.cuda.memory_allocated(self.device))
            reserved = int(torch.cuda.memory_reserved(self.device))
            # our own running max: others (Segmenter, benchmarks) reset PyTorch's peak counter too
            self._peak = max(self._peak, int(torch.cuda.max_memory_allocated(self.device)), allocated)
            total = free = None
            if torch.cuda.is_initialized():
                free, total = (int(n) for n in torch.cuda.mem_get_info(self.device))
            rss, _ = read_rss_hwm()
            return MemorySample(time, str(self.device), allocated, reserved, self._peak, rss, total, free,
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
