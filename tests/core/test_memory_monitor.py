"""MemoryMonitor mechanics in this process: ring buffer, marks, thread, caches, peak windows, CSV."""
from __future__ import annotations

import gc
import mmap
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from leanseg.core.events import JobEvent
from leanseg.core.memory import (
    SOURCE_GLIBC,
    SOURCE_RSS,
    MemoryMonitor,
    empty_cache,
    engine_live_bytes,
    event_mark_label,
    peak_bytes,
    plot_mark_label,
    read_memory_csv,
    register_cache,
    reset_peak,
)
from leanseg.core.memory.sources import CpuMemorySource

SERIES_KEYS = {"time", "allocated", "reserved", "peak", "rss", "engine_live"}


def test_ring_buffer_keeps_the_newest_samples_in_time_order() -> None:
    monitor = MemoryMonitor("cpu", rate_hz=10.0, capacity_s=0.5)  # 5 rows
    assert monitor.capacity == 5 and monitor.source in (SOURCE_GLIBC, SOURCE_RSS)
    assert monitor.snapshot()["time"].shape == (0,)
    taken = [monitor.sample_now().time for _ in range(12)]
    series = monitor.snapshot()
    assert set(series) == SERIES_KEYS
    assert np.array_equal(series["time"], np.asarray(taken[-5:]))
    assert all(series[key].shape == (5,) and series[key].dtype == np.int64 for key in SERIES_KEYS - {"time"})
    series["allocated"][:] = -1  # a copy: the monitor's buffer is untouched
    assert (monitor.snapshot()["allocated"] > 0).all()
    monitor.close()


def test_sample_fields_are_consistent() -> None:
    monitor = MemoryMonitor(torch.device("cpu"))
    sample = monitor.sample_now()
    assert sample.device == "cpu" and sample.source == monitor.source
    assert 0 < sample.allocated <= sample.reserved + 4096
    assert sample.peak_allocated >= sample.allocated and sample.rss > 0
    assert sample.device_total is not None and sample.device_free is not None
    assert 0 < sample.device_free <= sample.device_total
    monitor.close()


def test_thread_samples_at_its_rate_and_stops() -> None:
    monitor = MemoryMonitor("cpu", rate_hz=50.0)
    monitor.start()
    assert monitor.is_running and monitor.latest() is not None
    deadline = time.monotonic() + 20
    while len(monitor.snapshot()["time"]) < 5 and time.monotonic() < deadline:
        time.sleep(0.02)
    monitor.stop()
    assert not monitor.is_running
    count = len(monitor.snapshot()["time"])
    assert count >= 5
    time.sleep(0.1)
    assert len(monitor.snapshot()["time"]) == count  # nothing sampled after stop
    times = monitor.snapshot()["time"]
    assert (np.diff(times) > 0).all()
    assert monitor.sampling_cpu_seconds > 0
    monitor.close()


def test_engine_live_gauge_is_sampled() -> None:
    monitor = MemoryMonitor("cpu")
    engine_live_bytes.set(123_456)
    try:
        assert monitor.sample_now().engine_live == 123_456
        assert monitor.snapshot()["engine_live"][-1] == 123_456
    finally:
        engine_live_bytes.set(0)
        monitor.close()


def test_marks_and_job_event_labels() -> None:
    assert event_mark_label(JobEvent("tile", index=2, count=8)) == "tile 3/8"
    assert event_mark_label(JobEvent("frame", index=11)) == "frame 12"
    assert event_mark_label(JobEvent("done")) == "done"
    assert event_mark_label(JobEvent("error", index=2, count=10)) == "error 3/10"  # the kind; a plot rewords it:
    assert plot_mark_label("error 3/10") == "failed 3/10" and plot_mark_label("done") == "done"
    assert event_mark_label(JobEvent("info", message="x")) is None
    monitor = MemoryMonitor("cpu", rate_hz=10.0, capacity_s=0.3)  # 3 rows
    monitor.mark("old")
    for _ in range(4):
        monitor.sample_now()
    monitor.mark_event(JobEvent("start"))
    monitor.mark_event(JobEvent("plan", message="not marked"))
    monitor.mark_event(JobEvent("tile", index=0, count=2))
    labels = [label for _, label in monitor.marks()]
    assert labels == ["start", "tile 1/2"]  # 'old' fell out of the buffered span with its samples
    times = [t for t, _ in monitor.marks()]
    assert times == sorted(times)
    monitor.close()


def test_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="rate_hz"):
        MemoryMonitor("cpu", rate_hz=0)
    with pytest.raises(ValueError, match="capacity_s"):
        MemoryMonitor("cpu", capacity_s=-1)
    with pytest.raises(ValueError, match="meta"):
        MemoryMonitor("meta")


class _Workspace:
    def __init__(self) -> None:
        self.buffer: torch.Tensor | None = torch.ones(1000)
        self.released = 0

    def release(self) -> None:
        self.buffer = None
        self.released += 1


def test_empty_cache_releases_registered_caches_and_forgets_dead_owners() -> None:
    workspace = _Workspace()
    unregister = register_cache(workspace.release)
    calls: list[int] = []
    unregister_plain = register_cache(lambda: calls.append(1))
    try:
        assert empty_cache("cpu") >= 0
        assert workspace.released == 1 and workspace.buffer is None and calls == [1]
        del workspace  # held weakly: the registry does not keep the engine alive
        gc.collect()
        empty_cache("cpu")
        assert calls == [1, 1]
    finally:
        unregister()
        unregister_plain()
    empty_cache("cpu")
    assert calls == [1, 1]


def test_monitor_sampling_does_not_break_reset_peak_and_peak_bytes() -> None:
    """Monitors reset the kernel's RSS high-water mark every sample; peak_bytes must still see the whole window."""
    cpu = torch.device("cpu")
    monitor = MemoryMonitor(cpu, rate_hz=50.0)
    monitor.start()
    reset_peak(cpu)
    start = peak_bytes(cpu)
    tensor = torch.ones(25_000_000)  # 100 MB, touched
    del tensor
    time.sleep(0.2)  # several monitor samples, each clearing VmHWM
    monitor.stop()
    monitor.close()
    assert peak_bytes(cpu) - start >= 95 * 10**6


def test_export_csv_round_trips(tmp_path: Path) -> None:
    monitor = MemoryMonitor("cpu")
    monitor.sample_now()
    monitor.mark("start")
    monitor.mark('tile 1/2, "quoted"')
    monitor.sample_now()
    path = monitor.export_csv(tmp_path / "logs" / "memory.csv")
    log = read_memory_csv(path)
    assert log.meta["device"] == "cpu" and log.meta["source"] == monitor.source
    assert float(log.meta["rate_hz"]) == 10.0 and int(log.meta["device_total"]) > 0
    original = monitor.snapshot()
    for key in SERIES_KEYS - {"time"}:
        assert np.array_equal(log.series[key], original[key])
    assert np.allclose(log.series["time"], original["time"], atol=1e-4)
    assert [label for _, label in log.marks] == ["start", 'tile 1/2, "quoted"']
    monitor.close()


def test_read_memory_csv_names_the_file_and_problem(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no such file"):
        read_memory_csv(tmp_path / "missing.csv")
    wrong = tmp_path / "wrong.csv"
    wrong.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match=r"wrong\.csv: not a leanseg memory log"):
        read_memory_csv(wrong)
    monitor = MemoryMonitor("cpu")
    monitor.sample_now()
    good = monitor.export_csv(tmp_path / "good.csv")
    monitor.close()
    broken = tmp_path / "broken.csv"
    broken.write_text(good.read_text() + "1.5,12,x,3,4,5,\n")
    with pytest.raises(ValueError, match=r"broken\.csv, line \d+"):
        read_memory_csv(broken)


def test_rss_fallback_reads_rss_and_still_catches_a_spike_between_reads() -> None:
    """The source other platforms (musl, macOS) get, exercised here by turning glibc off."""
    reader = CpuMemorySource(torch.device("cpu"), use_glibc=False)
    try:
        assert reader.source == SOURCE_RSS
        reader.reset_peak()
        before = reader.read(0.0, 0)
        assert before.allocated == before.reserved == before.rss
        # 100 MB of fresh pages, touched, then gone before the next read. An anonymous mapping: a tensor's
        # bytes may come from heap pages an earlier test left resident, and then RSS does not move.
        spike = mmap.mmap(-1, 100 * 10**6)
        for offset in range(0, len(spike), mmap.PAGESIZE):
            spike[offset] = 1
        spike.close()
        after = reader.read(1.0, 0)
        assert after.peak_allocated - before.allocated >= 95 * 10**6
        assert abs(after.allocated - before.allocated) <= 5 * 10**6
    finally:
        reader.close()
