"""Run a block's row bands on parallel workers, one intra-op thread each.

Small per-band ops with two OpenMP threads each wait at a barrier after every op; on a shared,
busy CPU that wait dominates. Giving each worker whole bands (one thread per op) removes the
barriers: the workers meet once per block. Bands write disjoint rows of the output.
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

    With `parallel` on the CPU and several intra-op threads, bands are dealt round-robin to that
    many workers, each running its ops single-threaded; on CUDA or with one thread they run in
    order. On meta tensors (estimates) they run in order but are counted as the workers would hold them.
    """
    threads = torch.get_num_threads()
    workers = min(threads, len(bands)) if parallel and device.type in ("cpu", "meta") else 1
    if device.type == "meta":
        return _estimate_bands(work, bands, workers)
    if workers <= 1:
        return max((work(top, bottom) for top, bottom in bands), default=0)
    shares = [bands[i::workers] for i in range(workers)]

    def run_share(share: Sequence[tuple[int, int]]) -> int:
        with torch.inference_mode():
            return max(work(top, bottom) for top, bottom in share)

    with _lock:
        torch.set_num_threads(1)
        try:
            futures = [_get_pool(workers).submit(run_share, share) for share in shares]
            return sum(future.result() for future in futures)
        finally:
            torch.set_num_threads(threads)


EDGE_BANDS = 2  # bands at each end that may read the zero padding; the ones between are all alike


def _estimate_bands(work: BandWork, bands: Sequence[tuple[int, int]], workers: int) -> int:
    """run_bands on meta tensors, without running thousands of identical bands.

    Away from the image's edges, bands of the same height hold the same bytes wherever they are, so
    only the EDGE_BANDS at each end and the first and last band between them run; every other band
    counts as the larger of those two. The sum over workers is then taken as run_bands counts it.
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
    return sum(max(held[start::workers]) for start in range(workers))
