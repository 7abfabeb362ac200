"""Run a block's row bands on parallel workers, one intra-op thread each.

Small per-band ops with two OpenMP threads each wait at a barrier after every op; on a shared,
busy CPU that wait dominates. Giving each worker whole bands (one thread per op) removes the
barriers: the workers meet once per block, and each takes the next band when it is free, so a worker
slowed by other load does not hold the block up. Bands write disjoint rows of the output.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import torch

BandWork = Callable[[int, int], int]  # (top, bottom) -> bytes of temporaries the band held

_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_lock = threading.Lock()  # one banded block at a time changes the thread count


def _get_pool(workers: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    if _pool is None or _pool_size < workers:
        _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="leanseg-band")
        _pool_size = workers
    return _pool


def row_bands(height: int, rows: int) -> list[tuple[int, int]]:
    """[(top, bottom), ...] covering 0..height in steps of `rows`."""
    return [(top, min(height, top + rows)) for top in range(0, height, rows)]


def run_bands(work: BandWork, bands: Sequence[tuple[int, int]], device: torch.device, parallel: bool = True) -> int:
    """Run `work` on every band; returns the bytes of temporaries held at once (worst case).

    With `parallel` on the CPU and several intra-op threads, that many workers each take the next band
    not yet taken and run its ops single-threaded (a worker slowed by other load takes fewer bands:
    8-12% faster than dealing bands round-robin on this shared 2-core machine); on CUDA or with one
    thread they run in order. Each worker holds one band at a time, so with workers the bytes held at
    once are counted as workers x the most any band held. On meta tensors (estimates) bands run in order
    and are counted the same way.
    """
    threads = torch.get_num_threads()
    workers = min(threads, len(bands)) if parallel and device.type in ("cpu", "meta") else 1
    if device.type == "meta":
        return _estimate_bands(work, bands, workers)
    if workers <= 1:
        return max((work(top, bottom) for top, bottom in bands), default=0)
    pending = iter(bands)
    taking = threading.Lock()

    def run_next_bands() -> int:
        """Take the next band until none is left; the most bytes one band held."""
        held = 0
        with torch.inference_mode():
            while True:
                with taking:
                    band = next(pending, None)
                if band is None:
                    return held
                held = max(held, work(*band))

    with _lock:
        torch.set_num_threads(1)
        try:
            futures = [_get_pool(workers).submit(run_next_bands) for _ in range(workers)]
            return workers * max(future.result() for future in futures)
        finally:
            torch.set_num_threads(threads)


EDGE_BANDS = 2  # bands at each end that may read the zero padding; the ones between are all alike


def _estimate_bands(work: BandWork, bands: Sequence[tuple[int, int]], workers: int) -> int:
    """run_bands on meta tensors, without running thousands of identical bands.

    Away from the image's edges, bands of the same height hold the same bytes wherever they are, so
    only the EDGE_BANDS at each end and the first and last band between them run; every other band
    counts as the larger of those two; the total is taken as run_bands counts it.
    """
    count = len(bands)
    if count == 0:
        return 0
    if count <= 2 * EDGE_BANDS + 2:
        held = [work(top, bottom) for top, bottom in bands]
    else:
        ends = list(range(EDGE_BANDS + 1)) + list(range(count - EDGE_BANDS - 1, count))
        measured = {index: work(*bands[index]) for index in ends}
        between = max(measured[EDGE_BANDS], measured[count - EDGE_BANDS - 1])
        held = [measured.get(index, between) for index in range(count)]
    return workers * max(held)
