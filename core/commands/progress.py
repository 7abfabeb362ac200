"""A small text progress bar for the CLI: count, rate, ETA; plain lines when not a terminal."""
from __future__ import annotations

import sys
import time
from typing import TextIO

from ..events import JobEvent


class ProgressBar:
    def __init__(self, total: int | None, label: str = "", unit: str = "it", stream: TextIO | None = None) -> None:
        self.total = total
        self.label = label
        self.unit = unit
        self.stream = stream or sys.stderr
        self.count = 0
        self.start = time.perf_counter()
        self._last_draw = 0.0
        self._interactive = self.stream.isatty()

    def update(self, n: int = 1, postfix: str = "") -> None:
        self.count += n
        now = time.perf_counter()
        finished = self.total is not None and self.count >= self.total
        if finished or now - self._last_draw >= (0.2 if self._interactive else 5.0):
            self._last_draw = now
            self._draw(postfix)

    def _draw(self, postfix: str) -> None:
        elapsed = time.perf_counter() - self.start
        rate = self.count / elapsed if elapsed > 0 else 0.0
        if self.total:
            fraction = min(self.count / self.total, 1.0)
            bar = "#" * int(24 * fraction) + "-" * (24 - int(24 * fraction))
            eta = (self.total - self.count) / rate if rate > 0 else float("nan")
            text = f"{self.label} [{bar}] {self.count}/{self.total} {rate:.2f} {self.unit}/s ETA {_clock(eta)}"
        else:
            text = f"{self.label} {self.count} {rate:.2f} {self.unit}/s"
        if postfix:
            text += f" {postfix}"
        if self._interactive:
            self.stream.write("\r\x1b[2K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def print_above(self, message: str, stream: TextIO | None = None) -> None:
        """Print a line where the bar is, then redraw the bar under it (on a terminal)."""
        if self._interactive:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
        print(message, file=stream or sys.stdout, flush=True)
        if self._interactive and self.count:
            self._draw("")

    def close(self) -> None:
        if self._interactive:
            self.stream.write("\n")
            self.stream.flush()


class JobProgress:
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


def _clock(seconds: float) -> str:
    if seconds != seconds or seconds == float("inf"):
        return "--:--"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"
