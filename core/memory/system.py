"""What the C library and the kernel report about this process's memory: glibc mallinfo2 / malloc_trim,
VmRSS / VmHWM from /proc/self/status, and shared high-water windows over VmHWM (no Qt)."""
from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from pathlib import Path

import psutil

_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


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
HAVE_GLIBC = _GLIBC is not None  # mallinfo2 and malloc_trim can be called
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


class _ProcSelf:
    """/proc/self/status and clear_refs kept open (a read is ~10 us, not ~50 us); reopened after a fork."""

    def __init__(self) -> None:
        self._pid = -1
        self._status_fd = self._clear_fd = -1
        self._lock = threading.Lock()

    def _ensure_open(self) -> None:
        if self._pid == os.getpid():
            return
        with self._lock:
            if self._pid == os.getpid():
                return
            self._status_fd = self._clear_fd = -1  # a forked child must not read its parent's files
            try:
                self._status_fd = os.open(_STATUS, os.O_RDONLY | os.O_CLOEXEC)
                self._clear_fd = os.open(_CLEAR_REFS, os.O_WRONLY | os.O_CLOEXEC)
            except OSError:
                pass  # not Linux, or clear_refs not writable here: no high-water resets
            self._pid = os.getpid()

    def rss_hwm(self) -> tuple[int, int] | None:
        """(VmRSS, VmHWM) in bytes, or None without /proc."""
        self._ensure_open()
        if self._status_fd < 0:
            return None
        status = os.pread(self._status_fd, 16384, 0)
        rss_at, hwm_at = status.find(b"VmRSS:"), status.find(b"VmHWM:")
        if rss_at < 0 or hwm_at < 0:
            return None
        rss = int(status[rss_at + 6:status.index(b"kB", rss_at)])
        hwm = int(status[hwm_at + 6:status.index(b"kB", hwm_at)])
        return rss * 1024, hwm * 1024

    def clear_high_water(self) -> bool:
        """Reset VmHWM to the current RSS (write 5 to clear_refs); False where that is not possible."""
        self._ensure_open()
        if self._clear_fd < 0:
            return False
        try:
            os.write(self._clear_fd, b"5")
            return True
        except OSError:
            return False


_PROC_SELF = _ProcSelf()


def read_rss_hwm() -> tuple[int, int | None]:
    """(resident bytes now, resident high-water bytes since the last clear or None) of this process."""
    read = _PROC_SELF.rss_hwm()
    if read is not None:
        return read
    return int(psutil.Process().memory_info().rss), None


_ram_lock = threading.Lock()
_ram_reading: tuple[float, int, int] = (-1.0, 0, 0)  # (monotonic time, total, available)


def ram_total_available(max_age_s: float = 1.0) -> tuple[int, int]:
    """(physical RAM, RAM available to new processes) in bytes; re-read at most once per `max_age_s`."""
    global _ram_reading
    with _ram_lock:
        read_at, total, available = _ram_reading
        if time.monotonic() - read_at > max_age_s or read_at < 0:
            memory = psutil.virtual_memory()
            _ram_reading = (time.monotonic(), int(memory.total), int(memory.available))
            total, available = _ram_reading[1:]
        return total, available


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
        self.clearable = True  # False once clearing VmHWM failed: then no windows narrower than the process

    def _read_and_clear(self) -> tuple[int, int | None]:
        rss, hwm = read_rss_hwm()
        if hwm is not None and self.clearable:
            self.clearable = _PROC_SELF.clear_high_water()
        if hwm is not None:
            for key, peak in self._window_peaks.items():
                self._window_peaks[key] = max(peak, hwm)
        return rss, hwm

    def open(self) -> int:
        """A new window; returns its key. Opening resets nothing (no side effect on VmHWM), so until its
        first `take` the window also covers the time since VmHWM was last reset (or the process began)."""
        with self._lock:
            key = self._next_key
            self._next_key += 1
            self._window_peaks[key] = 0
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
