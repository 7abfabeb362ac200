"""Estimates on meta tensors run a few bands for all of them: the same answer as running every band."""
from __future__ import annotations

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
    expected = sum(max(every[start::workers]) for start in range(min(workers, len(bands))))
    ran.clear()
    monkeypatch.setattr(torch, "get_num_threads", lambda: workers)
    assert run_bands(work, bands, META) == expected
    assert len(ran) <= 6  # thousands of bands or a handful: a handful run
