"""How far a run of the batch dialog has got, and the lines that say it: '2 of 4 · p1.png · 0.50 images/s · ETA
00:04' while it runs, '2 of 4 images done' for the question the main window asks before it quits."""
from __future__ import annotations

import time
from dataclasses import dataclass

from leanseg.core.events import JobEvent

from .texts import clock


@dataclass
class BatchCount:
    todo: int = 0  # images this run segments
    done: int = 0  # of those, finished (segmented or failed)
    segmented: int = 0  # of those, the ones segmented: the rate counts these, not files that failed at once
    before: int = 0  # images finished by an earlier run, skipped by this one
    total: int = 0  # images in the folder: the bar counts against these
    started_at: float = 0.0  # time.monotonic() at the run's start

    @classmethod
    def of_start(cls, event: JobEvent) -> BatchCount:
        """The count a run's 'start' event gives: nothing done yet, what earlier runs finished, the total."""
        todo, before = event.count or 0, len(event.data.get("finished_before", []))
        return cls(todo=todo, before=before, total=int(event.data.get("total", before + todo)),
                   started_at=time.monotonic())

    @property
    def finished(self) -> int:
        """Images finished in all, by this run and earlier ones: the bar's value."""
        return self.before + self.done

    def count(self, event: JobEvent) -> None:
        """An 'image' (segmented) or 'error' (failed) event of this run."""
        self.done = (event.index or 0) + 1
        self.segmented += event.kind == "image"

    def running_text(self, name: str) -> str:
        """'2 of 4 · NAME · 1.50 images/s · ETA 00:02'; the rate and ETA once an image was segmented (a file that
        failed at once says nothing of how long the rest take), over the whole time this run has taken."""
        parts = [f"{self.finished} of {self.total}", name]
        elapsed = time.monotonic() - self.started_at
        if self.segmented and elapsed > 0:
            rate = self.segmented / elapsed
            parts += [f"{rate:.2f} images/s", f"ETA {clock((self.todo - self.done) / rate)}"]
        return " · ".join(parts)

    def done_text(self) -> str:
        """How far the run has got: '2 of 4 images done' ('starting' before it has counted them)."""
        if not self.total:
            return "starting, no image done yet"
        return f"{self.finished} of {self.total} images done"
