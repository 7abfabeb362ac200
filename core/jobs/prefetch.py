"""Overlap I/O with inference: a reader thread ahead of the loop, a writer thread behind it.

Both hold bounded queues, so at most `depth` items wait at each end and memory stays flat however
long the batch is. Decoders and encoders (OpenCV, zlib) release the GIL, so the threads really overlap.
"""
from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar

Item = TypeVar("Item")
Loaded = TypeVar("Loaded")
_DONE = object()
_POLL_S = 0.1  # how often a blocked thread looks at the stop flag


class Prefetcher(Generic[Item, Loaded]):
    """Iterate `(item, load(item) or the exception it raised)`, loading up to `depth` items ahead.

    Use as a context manager: leaving it stops the reader thread, whatever is still queued.
    """

    def __init__(self, items: Sequence[Item], load: Callable[[Item], Loaded], depth: int = 2) -> None:
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        self._items = items
        self._load = load
        self._queue: queue.Queue[object] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="batch-reader", daemon=True)

    def __enter__(self) -> Prefetcher[Item, Loaded]:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _put(self, entry: object) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(entry, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        for item in self._items:
            if self._stop.is_set():
                return
            try:
                loaded: Loaded | BaseException = self._load(item)
            except Exception as err:  # handed to the consumer, who records it
                loaded = err
            if not self._put((item, loaded)):
                return
        self._put(_DONE)

    def __iter__(self) -> Iterator[tuple[Item, Loaded | BaseException]]:
        while True:
            entry = self._queue.get()
            if entry is _DONE:
                return
            yield entry  # type: ignore[misc]


class BackgroundWriter:
    """Run submitted calls in order on one thread, at most `depth` waiting; `__exit__` drains them.

    An exception a call raises is re-raised by the next `submit` or by `__exit__`.
    """

    def __init__(self, depth: int = 2) -> None:
        self._queue: queue.Queue[Callable[[], object] | None] = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="batch-writer", daemon=True)

    def __enter__(self) -> BackgroundWriter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._queue.put(None)
        self._thread.join()
        self._raise()

    def submit(self, call: Callable[[], object]) -> None:
        self._raise()
        self._queue.put(call)

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _run(self) -> None:
        while True:
            call = self._queue.get()
            if call is None:
                return
            if self._error is not None:
                continue  # after a failure, drop the rest; the consumer re-raises
            try:
                call()
            except BaseException as err:  # re-raised on the submitting thread
                self._error = err
