"""Give memory back: leanseg's own caches, Python's garbage, then the allocator's free memory (no Qt)."""
from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Callable

import torch

from .system import credit_trimmed, glibc_allocated_reserved, malloc_trim, read_rss_hwm

_lock = threading.Lock()
_caches: dict[int, Callable[[], Callable[[], object] | None]] = {}
_next_key = 0


def register_cache(release: Callable[[], object]) -> Callable[[], None]:
    """Register a callable that drops one of leanseg's caches (e.g. the engine's workspaces).

    `empty_cache` calls every registered callable before giving memory back. A bound method is held
    weakly (its owner may be collected; it then unregisters itself). Returns a function that unregisters.
    """
    global _next_key
    ref: Callable[[], Callable[[], object] | None]
    if hasattr(release, "__self__") and hasattr(release, "__func__"):
        ref = weakref.WeakMethod(release)  # type: ignore[arg-type]
    else:
        ref = lambda: release  # noqa: E731
    with _lock:
        key = _next_key
        _next_key += 1
        _caches[key] = ref

    def unregister() -> None:
        with _lock:
            _caches.pop(key, None)

    return unregister


def release_caches() -> int:
    """Call every registered cache release (outside the lock); returns how many ran."""
    with _lock:
        refs = dict(_caches)
    ran = 0
    for key, ref in refs.items():
        release = ref()
        if release is None:
            with _lock:
                _caches.pop(key, None)
            continue
        release()
        ran += 1
    return ran


def empty_cache(device: torch.device | str) -> int:
    """Drop leanseg's caches, collect garbage, give the allocator's free memory back; returns bytes freed.

    CUDA: the reserved bytes `torch.cuda.empty_cache()` gave back (host heap trimmed too).
    CPU: the RSS given back by `gc.collect()` and glibc's `malloc_trim(0)`, which also returns free
    pages inside the heap, not only its top.
    """
    device = torch.device(device)
    if device.type == "cuda":
        before = torch.cuda.memory_reserved(device)
        release_caches()
        gc.collect()
        if torch.cuda.is_initialized():
            torch.cuda.synchronize(device)
            torch.cuda.empty_cache()
        malloc_trim()
        return max(0, int(before) - int(torch.cuda.memory_reserved(device)))
    rss_before, _ = read_rss_hwm()
    glibc_before = glibc_allocated_reserved()
    release_caches()
    gc.collect()
    trimmed = malloc_trim()
    rss_after, _ = read_rss_hwm()
    freed = max(0, rss_before - rss_after)
    glibc_after = glibc_allocated_reserved()
    if trimmed and glibc_before is not None and glibc_after is not None:
        # RSS lost beyond what glibc's own reserved figure shows (heap top trimmed, mmapped chunks
        # unmapped) is free pages inside the heap handed back with madvise, which glibc still counts
        credit_trimmed(freed - max(0, glibc_before[1] - glibc_after[1]))
    return freed
