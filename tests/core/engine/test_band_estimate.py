"""Estimates on meta tensors run a few bands for all of them: the same answer as running every band."""
from __future__ import annotations

import threading
import time

import pytest
import torch

from leanseg.core.engine.band_pool import row_bands, run_bands

META = torch.device("meta")


def _bytes_by_position(height: int):  # type: ignore[no-untyped-def]
    """Bytes a band holds: its rows, more where its window reaches the top or bottom padding."""
    ran: list[tuple[int, int]] = []

    def work(top: int, bottom: int) -> int:
        ran.append((top, bottom))
        edge = 700 if top == 0 else 300 if bottom >= height - 1 else 0
        return 100 * (bottom - top) + edge

    return work, ran


@pytest.mark.parametrize("height,rows", [(1, 1), (5, 1), (6, 1), (7, 2), (100, 7), (4096, 3), (64, 64)])
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_meta_estimate_equals_running_every_band(height: int, rows: int, workers: int, monkeypatch) -> None:
    bands = row_bands(height, rows)
    work, ran = _bytes_by_position(height)
    every = [work(top, bottom) for top, bottom in bands]
    expected = min(workers, len(bands)) * max(every)  # each worker holds one band at a time, any band
    ran.clear()
    monkeypatch.setattr(torch, "get_num_threads", lambda: workers)
    assert run_bands(work, bands, META) == expected
    assert len(ran) <= 6  # thousands of bands or a handful: a handful run


def test_workers_take_the_next_band_so_a_slow_one_takes_fewer(monkeypatch) -> None:
    """On the CPU every band runs once; a worker held up (here: its first band sleeps, as a core busy with
    other work would) leaves the remaining bands to the other. Bytes: workers x the most one band held."""
    bands = row_bands(40, 2)
    by_thread: dict[str, list[tuple[int, int]]] = {}
    guard = threading.Lock()

    def work(top: int, bottom: int) -> int:
        with guard:
            by_thread.setdefault(threading.current_thread().name, []).append((top, bottom))
        if top == 0:
            time.sleep(0.5)
        return 10 + top

    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)
    assert run_bands(work, bands, torch.device("cpu")) == 2 * (10 + 38)
    assert sorted(band for done in by_thread.values() for band in done) == bands
    slow = next(done for done in by_thread.values() if (0, 2) in done)
    assert len(slow) <= 2 and len(by_thread) == 2, by_thread
