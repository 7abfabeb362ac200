"""CPU memory telemetry bars, each measured in a fresh interpreter so the heap starts known.

The child runs with glibc's default malloc settings (MALLOC_* variables removed), as a user's process does.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from leanseg.core.memory.sources import SOURCE_GLIBC
from leanseg.core.memory.system import HAVE_GLIBC

MB = 10**6
needs_glibc = pytest.mark.skipif(not HAVE_GLIBC, reason="needs glibc's mallinfo2")

_CHILD_PRELUDE = """
import json, time, torch
from leanseg.core.memory import MemoryMonitor
torch.set_num_threads(1)
monitor = MemoryMonitor("cpu")
result = {"source": monitor.source}
"""

# 1. a 100 MB tensor (above glibc's mmap threshold) moves allocated up 100 MB and back
_BIG_TENSOR = """
before = monitor.sample_now()
tensor = torch.ones(25_000_000)  # 100 MB of float32
during = monitor.sample_now()
del tensor
after = monitor.sample_now()
result.update(up=during.allocated - before.allocated, down=during.allocated - after.allocated)
"""

# 2. 400 small tensors freed stay in the heap (reserved) until empty_cache gives them back
_HEAP_CACHE = """
warm = torch.ones(1_000_000); del warm  # a freed 4 MB tensor raises glibc's dynamic mmap threshold
small, pins = [], []
for _ in range(400):
    small.append(torch.ones(62_500))  # 250 KB each, 100 MB in all, inside the heap
    pins.append(torch.ones(16))  # a live chunk after each keeps the freed ones from merging into the top
held = monitor.sample_now()
del small
freed_to_heap = monitor.sample_now()
monitor.reset_peak()
given_back = monitor.empty_cache()
trimmed = monitor.sample_now()
result.update(
    cached=freed_to_heap.reserved - freed_to_heap.allocated,
    reserved_drop_on_free=held.reserved - freed_to_heap.reserved,
    rss_drop_on_free=held.rss - freed_to_heap.rss,
    given_back=given_back,
    rss_drop_on_empty=freed_to_heap.rss - trimmed.rss,
    reserved_after=trimmed.reserved - trimmed.allocated,
    peak_rise_on_empty=trimmed.peak_allocated - freed_to_heap.allocated,
    empty_mark=[label for _, label in monitor.marks() if label.startswith("empty cache")],
)
"""

# 3. a 50 ms spike between two samples still shows in peak allocated (and not in allocated)
_SPIKE = """
spikes = []
for _ in range(3):
    monitor.reset_peak()
    before = monitor.sample_now()
    tensor = torch.ones(25_000_000)
    time.sleep(0.05)
    del tensor
    after = monitor.sample_now()
    spikes.append({"peak_rise": after.peak_allocated - before.allocated,
                   "allocated_rise": after.allocated - before.allocated})
result["spikes"] = spikes

# the same with the sampling thread at 10 Hz: spikes land anywhere between samples
monitor.start()
threaded = []
for delay in [0.003 + 0.0085 * step for step in range(12)]:  # across one 100 ms sampling period
    monitor.reset_peak()
    base = monitor.latest().allocated
    time.sleep(delay)
    tensor = torch.ones(25_000_000)
    time.sleep(0.05)
    del tensor
    time.sleep(0.25)  # at least two more samples
    threaded.append(monitor.latest().peak_allocated - base)
monitor.stop()
result["threaded_peak_rises"] = threaded

# the race behind a flaky run: a throttled read (allocator figures reused) lands while the tensor is
# half-written, so RSS has seen half of it and allocated none of it
import leanseg.core.memory.sources as sources
sources.MALLINFO2_CPU_SHARE = 1e-9  # every read after the fresh one reuses its allocator figures
reader = sources.CpuMemorySource(torch.device("cpu"))
before = reader.read(0.0, 0, fresh=True)
tensor = torch.empty(25_000_000)
tensor[:12_500_000].fill_(1.0)
reader.read(0.1, 0, fresh=False)
tensor[12_500_000:].fill_(1.0)
del tensor
after = reader.read(0.2, 0, fresh=False)
result["stale_half_written_rise"] = after.peak_allocated - before.allocated
"""


def _run_child(body: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    code = _CHILD_PRELUDE + body + "\nprint(json.dumps(result))\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@needs_glibc
def test_big_tensor_moves_allocated_up_and_back_by_its_size() -> None:
    result = _run_child(_BIG_TENSOR)
    assert result["source"] == SOURCE_GLIBC
    assert abs(result["up"] - 100 * MB) <= 2 * MB, result
    assert abs(result["down"] - 100 * MB) <= 2 * MB, result


@needs_glibc
def test_freed_small_tensors_stay_reserved_until_empty_cache_gives_them_back() -> None:
    result = _run_child(_HEAP_CACHE)
    assert result["cached"] >= 95 * MB, result  # freed, still held: the allocator's cache
    assert result["reserved_drop_on_free"] <= 2 * MB and result["rss_drop_on_free"] <= 5 * MB, result
    assert result["given_back"] >= 0.8 * result["cached"], result  # the bar: >= 80 % back in RSS
    assert result["rss_drop_on_empty"] >= 0.8 * result["cached"], result
    assert result["reserved_after"] <= 0.2 * result["cached"], result  # reserved follows what was given back
    assert result["peak_rise_on_empty"] <= 2 * MB, result  # RSS falling is not read as a spike
    assert len(result["empty_mark"]) == 1 and "MB given back" in result["empty_mark"][0]


@needs_glibc
def test_50ms_spike_between_samples_shows_in_peak_allocated() -> None:
    result = _run_child(_SPIKE)
    for spike in result["spikes"]:
        assert spike["peak_rise"] >= 98 * MB, result  # caught through the RSS high-water mark
        assert abs(spike["allocated_rise"]) <= 2 * MB, result  # neither sample saw it
    for rise in result["threaded_peak_rises"]:
        assert rise >= 98 * MB, result
    assert result["stale_half_written_rise"] >= 98 * MB, result


if __name__ == "__main__":  # print the figures behind the bars: python tests/core/test_memory_cpu.py
    for name, body in (("100 MB tensor", _BIG_TENSOR), ("heap cache", _HEAP_CACHE), ("50 ms spike", _SPIKE)):
        figures = _run_child(body)
        print(f"{name}: " + ", ".join(f"{key}={value / MB:.3f} MB" if isinstance(value, int) and key != "source"
                                      else f"{key}={value}" for key, value in figures.items()))
