"""CLI progress on stderr: a `rich` progress bar on a terminal, plain lines (every few seconds) otherwise.

A log file or a pipe gets readable lines such as `batch 12/40 3.10 img/s ETA 00:09 NAME`, never
carriage returns or escape codes. Lines printed while a bar is shown (`print_above`, `JobProgress.note`)
go above it and the bar is redrawn below.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn
from rich.text import Text

from ..events import JobEvent

PLAIN_EVERY_S = 5.0  # seconds between plain progress lines (not a terminal)


class ProgressBar:
    """Counts items towards `total` (None: unknown); shows count, rate and ETA on `stream` (default stderr)."""

    def __init__(self, total: int | None, label: str = "", unit: str = "it", stream: TextIO | None = None) -> None:
        self.total = total
        self.label = label
        self.unit = unit
        self.stream = stream or sys.stderr
        self.count = 0
        self.start = time.perf_counter()
        self._last_line = 0.0
        self._lock = threading.Lock()
        self._console = Console(file=self.stream, highlight=False, soft_wrap=True)
        self.interactive = self._console.is_terminal and not self._console.is_dumb_terminal
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        if self.interactive:
            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"), TextColumn("ETA"), TimeRemainingColumn(),
                TextColumn("{task.fields[postfix]}"),
                console=self._console, transient=False, redirect_stdout=False, redirect_stderr=False,
            )
            self._task = self._progress.add_task(label, total=total, rate="", postfix="")
            self._progress.start()

    def update(self, n: int = 1, postfix: str = "", total: int | None = None) -> None:
        """`n` more items done; `postfix` is shown after the bar (e.g. the file just finished); `total`: a new
        count of items in all (a tile split in two after running out of memory adds one)."""
        with self._lock:
            self.count += n
            self.total = total if total is not None else self.total
            rate = f"{self._rate():.2f} {self.unit}/s"
            if self._progress is not None and self._task is not None:
                self._progress.update(self._task, advance=n, rate=rate, postfix=postfix, total=self.total)
                return
            now = time.perf_counter()
            finished = self.total is not None and self.count >= self.total
            if finished or now - self._last_line >= PLAIN_EVERY_S:
                self._last_line = now
                self.stream.write(self._plain_line(postfix) + "\n")
                self.stream.flush()

    def _rate(self) -> float:
        elapsed = time.perf_counter() - self.start
        return self.count / elapsed if elapsed > 0 else 0.0

    def _plain_line(self, postfix: str) -> str:
        rate = self._rate()
        if self.total:
            eta = (self.total - self.count) / rate if rate > 0 else float("nan")
            text = f"{self.label} {self.count}/{self.total} {rate:.2f} {self.unit}/s ETA {_clock(eta)}"
        else:
            text = f"{self.label} {self.count} {rate:.2f} {self.unit}/s"
        return f"{text} {postfix}" if postfix else text

    def print_above(self, message: str, stream: TextIO | None = None) -> None:
        """Print a line (on `stream`, default stdout); on a terminal it goes above the bar."""
        target = stream or sys.stdout
        if self._progress is not None and target.isatty():
            self._progress.console.print(Text(message))
        else:
            print(message, file=target, flush=True)

    def close(self) -> None:
        """Leave the final bar (terminal) in place; later updates still count but draw nothing new."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


class _LinesAroundBar:
    """What a progress bar's owner prints: lines above its open bar (or plain ones), and the bar's end."""

    bar: ProgressBar | None

    def note(self, message: str, stream: TextIO | None = None) -> None:
        """Print a line (a plan, a warning) without ending the bar: it is redrawn below the line."""
        if self.bar is not None:
            self.bar.print_above(message, stream)
        else:
            print(message, file=stream or sys.stdout, flush=True)

    def close(self) -> None:
        """End the bar's line; later advances draw nothing."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class JobProgress(_LinesAroundBar):
    """The bar of one job: opened by the job's "start" event (whose `count` says how many items follow)."""

    def __init__(self, label: str, unit: str) -> None:
        self.label = label
        self.unit = unit
        self.bar: ProgressBar | None = None  # None until "start", and again after close()

    def start(self, event: JobEvent) -> None:
        """Print the start event's message on stdout and open a bar for its `count` items."""
        print(event.message, flush=True)
        self.bar = ProgressBar(event.count, label=self.label, unit=self.unit)

    def advance(self, postfix: str = "") -> None:
        """One more item done; nothing while no bar is open."""
        if self.bar is not None:
            self.bar.update(1, postfix=postfix)


class TileProgress(_LinesAroundBar):
    """The tiles of the image in flight, from its "tile" events: a bar on a terminal, a plain line every few
    seconds otherwise (never a line per tile); the tiles' summary is the job's to print when they are done."""

    def __init__(self, label: str = "tiles") -> None:
        self.label = label
        self.bar: ProgressBar | None = None  # open from the image's first tile until close()
        self.done = 0  # tiles of the image in flight (or of the last one) run
        self.count = 0  # ... of how many

    def start(self, count: int) -> None:
        """Open the bar for an image cut into `count` tiles (from its plan), so its rate counts from here."""
        self.close()
        self.bar = ProgressBar(count, label=self.label, unit="tiles")
        self.done, self.count = 0, count

    def advance(self, event: JobEvent) -> None:
        """One more tile done; opens the bar if the image's plan did not."""
        if self.bar is None:
            self.start(event.count or 0)
        self.done, self.count = self.done + 1, event.count or self.count
        if self.bar is not None:
            self.bar.update(1, total=event.count)


def _clock(seconds: float) -> str:
    if seconds != seconds or seconds == float("inf"):
        return "--:--"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"
