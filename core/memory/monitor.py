"""MemoryMonitor: samples memory on its own thread into a numpy ring buffer, with job marks (no Qt).

    monitor = MemoryMonitor("cpu", rate_hz=10.0, capacity_s=600.0)
    monitor.start()
    monitor.mark("start")            # or monitor.mark_event(job_event)
    ...
    series = monitor.snapshot()      # {'time', 'allocated', 'reserved', 'peak', 'rss', 'engine_live'}
    freed = monitor.empty_cache()    # bytes given back (RSS on the CPU, reserved on CUDA)
    monitor.stop(); monitor.export_csv("memory.csv")
"""
from __future__ import annotations

import threading
import time
from collections import deque
from pathlib import Path

import numpy as np
import torch

from ..events import JobEvent
from .cache import empty_cache
from .log import SERIES, write_memory_csv
from .sources import MemorySample, engine_live_bytes, memory_source

_MARKED_EVENTS = ("start", "tile", "image", "frame", "error", "cancelled", "done")


def event_mark_label(event: JobEvent) -> str | None:
    """The label a plot marks for a job event ('tile 3/8', 'frame 12', 'done'), or None for other kinds."""
    if event.kind not in _MARKED_EVENTS:
        return None
    if event.index is not None:
        of = f"/{event.count}" if event.count is not None else ""
        return f"{event.kind} {event.index + 1}{of}"
    return event.kind


_PLOT_WORDS = {"error": "failed"}  # a recorded mark's first word (a job event's kind) as a plot writes it


def plot_mark_label(mark: str) -> str:
    """What a plot writes for a recorded mark: the same, with a job event's kind in the user's word ('error 3/10',
    as `event_mark_label` records it, is written 'failed 3/10')."""
    first, _, rest = mark.partition(" ")
    return " ".join(filter(None, (_PLOT_WORDS.get(first, first), rest)))


class MemoryMonitor:
    """Samples `device` memory `rate_hz` times a second, keeping the last `capacity_s` seconds."""

    def __init__(self, device: torch.device | str = "cpu", rate_hz: float = 10.0, capacity_s: float = 600.0):
        if not 0 < rate_hz <= 1000:
            raise ValueError(f"rate_hz must be in (0, 1000], got {rate_hz}")
        if capacity_s <= 0:
            raise ValueError(f"capacity_s must be positive, got {capacity_s}")
        self.device = torch.device(device)
        self.rate_hz = float(rate_hz)
        self._reader = memory_source(self.device)
        self.source: str = self._reader.source  # 'cuda', 'glibc mallinfo2' or 'rss'
        self.capacity = max(2, int(round(rate_hz * capacity_s)))
        self._times = np.zeros(self.capacity, np.float64)  # ring buffer, one row per sample
        self._values = np.zeros((self.capacity, len(SERIES)), np.int64)
        self._count = 0  # samples ever taken; the next goes to row _count % capacity
        self._marks: deque[tuple[float, str]] = deque(maxlen=max(1000, self.capacity))
        self._latest: MemorySample | None = None
        self._lock = threading.Lock()  # guards the buffer and marks (held briefly; snapshot never waits on a read)
        self._sample_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = time.monotonic()
        self._started = False
        self.sampling_cpu_seconds = 0.0  # CPU time the sampling thread has used, all runs together

    # ---------------------------------------------------------------- lifecycle

    @property
    def is_running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Take a first sample now and keep sampling on a daemon thread until `stop`."""
        if self.is_running:
            return
        if not self._started:
            self._t0 = time.monotonic()
            self._started = True
        self._stop.clear()
        self.sample_now()
        self._thread = threading.Thread(target=self._run, name="leanseg-memory-monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling (the buffer stays readable); a later `start` continues the same timeline."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def close(self) -> None:
        """Stop and release the process-wide high-water window this monitor holds."""
        self.stop()
        self._reader.close()

    def __enter__(self) -> MemoryMonitor:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        period = 1.0 / self.rate_hz
        cpu_start = time.thread_time()
        next_due = time.monotonic() + period
        while not self._stop.wait(max(0.0, next_due - time.monotonic())):
            self.sample_now(fresh=False)
            self.sampling_cpu_seconds += time.thread_time() - cpu_start
            cpu_start = time.thread_time()
            next_due += period
            if next_due < time.monotonic():  # fell behind (machine busy): skip, don't burst
                next_due = time.monotonic() + period

    # ---------------------------------------------------------------- samples and marks

    def now(self) -> float:
        """Seconds since `start`, the monitor's time axis."""
        return time.monotonic() - self._t0

    def sample_now(self, fresh: bool = True) -> MemorySample:
        """Read one sample and append it to the buffer (the thread does this `rate_hz` times a second).

        The thread passes `fresh=False`: on a heap with very many free chunks, glibc's figures are then
        re-read less often so that sampling stays cheap (see `CpuMemorySource`).
        """
        with self._sample_lock:  # one reader at a time, so rows stay in time order
            sample = self._reader.read(self.now(), engine_live_bytes.value, fresh)
            row = (sample.allocated, sample.reserved, sample.peak_allocated, sample.rss, sample.engine_live)
            with self._lock:
                index = self._count % self.capacity
                self._times[index] = sample.time
                self._values[index] = row
                self._count += 1
                self._latest = sample
        return sample

    def latest(self) -> MemorySample | None:
        return self._latest

    def snapshot(self) -> dict[str, np.ndarray]:
        """Copies of the buffered series, oldest first: 'time' (s, float64, shape (N,)) and bytes (int64)."""
        with self._lock:
            count = min(self._count, self.capacity)
            start = self._count % self.capacity if self._count > self.capacity else 0
            order = (np.arange(count) + start) % self.capacity
            times, values = self._times[order], self._values[order]
        series: dict[str, np.ndarray] = {"time": times}
        series.update({name: values[:, i].copy() for i, name in enumerate(SERIES)})
        return series

    def mark(self, label: str) -> None:
        """Note an event (job start, tile, frame, done) at the current time."""
        with self._lock:
            self._marks.append((self.now(), label))

    def mark_event(self, event: JobEvent) -> None:
        """Mark a job event if it is one a plot shows (see `event_mark_label`)."""
        label = event_mark_label(event)
        if label is not None:
            self.mark(label)

    def marks(self) -> list[tuple[float, str]]:
        """(time, label) of the marks within the buffered time span, oldest first."""
        with self._lock:
            oldest = self._times[self._count % self.capacity] if self._count > self.capacity else -np.inf
            return [(t, label) for t, label in self._marks if t >= oldest]

    # ---------------------------------------------------------------- actions

    def reset_peak(self) -> None:
        """Start a new peak window: `peak` restarts from what is allocated now."""
        self._reader.reset_peak()
        engine_live_bytes.reset_peak()

    def empty_cache(self) -> int:
        """Give cached memory back (see `memory_cache.empty_cache`); marks and returns the bytes freed."""
        freed = empty_cache(self.device)
        from .units import format_bytes

        self.mark(f"empty cache: {format_bytes(freed)} given back")
        self.sample_now()
        return freed

    def export_csv(self, path: str | Path) -> Path:
        """Write the buffered timeline and marks as CSV (format in `memory_log`); returns the path."""
        latest = self._latest
        meta: dict[str, object] = {"device": str(self.device), "source": self.source, "rate_hz": self.rate_hz}
        if latest is not None and latest.device_total is not None:
            meta["device_total"] = latest.device_total
        return write_memory_csv(path, self.snapshot(), self.marks(), meta)
