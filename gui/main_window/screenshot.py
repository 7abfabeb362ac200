"""--screenshot: wait for the job to end, let the plots catch up, grab the whole window, save it and quit."""
from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QApplication

from .window import MainWindow

SETTLE_MS = 700  # let the memory panel draw the samples after the job before grabbing


class ScreenshotTaker(QObject):
    """Saves `window.grab()` to `path` once the current job ends (or after `timeout_s`), then quits the app."""

    def __init__(self, window: MainWindow, path: Path, timeout_s: float) -> None:
        super().__init__(window)
        self.window = window
        self.path = Path(path)
        self.exit_code = 1
        self._done = False
        window.job_ended.connect(self._on_job_ended)
        window.image_shown.connect(self._on_image_shown)
        window.error_shown.connect(lambda message: print(f"leanseg-gui: {message}", file=sys.stderr))
        QTimer.singleShot(int(timeout_s * 1000), lambda: self._take("timed out"))

    def _on_image_shown(self) -> None:
        if self.window.model_requested is None:  # nothing will be segmented: take the window as it is
            self._on_job_ended("no model to segment with")

    def _on_job_ended(self, outcome: str) -> None:
        QTimer.singleShot(SETTLE_MS, lambda: self._take(outcome))

    def _take(self, outcome: str) -> None:
        if self._done:
            return
        self._done = True
        self.window.memory_panel.refresh()
        if self.window.error_box is not None:
            self.window.error_box.close()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        saved = self.window.grab().save(str(self.path))
        if not saved:
            print(f"leanseg-gui: error: could not write the screenshot {self.path}", file=sys.stderr)
        self.exit_code = 0 if saved and outcome == "finished" else 1
        print(f"screenshot {self.path} ({outcome})")
        QApplication.quit()
