"""--screenshot: wait until what was opened is shown segmented, let the plots catch up, grab, save and quit.

An image: the main window once its job ends. A folder: the batch dialog, started on the folder, once it lists
FIRST_RESULTS results (or the whole batch, if smaller; the rest is cancelled). A video: the video panel once its
first segmented frame is drawn. Whatever was opened, an error or `timeout_s` still saves the picture and quits.
"""
from __future__ import annotations

import sys
from pathlib import Path

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QApplication, QWidget

from leanseg.core.events import JobEvent
from leanseg.core.jobs.batch import BatchSummary

from .window import MainWindow

SETTLE_MS = 700  # let the memory panel draw the samples after the job before grabbing
FIRST_RESULTS = 4  # a folder's screenshot is taken once the batch dialog lists this many results


class ScreenshotTaker(QObject):
    """Saves a grab of the window showing the result to `path`, then quits the app; `exit_code` 0 on success."""

    def __init__(self, window: MainWindow, path: Path, timeout_s: float) -> None:
        super().__init__(window)
        self.window = window
        self.path = Path(path)
        self.exit_code = 1
        self.target: QWidget = window  # what is grabbed: the main window, the batch dialog or the video panel
        self._done = False
        self._results = 0
        window.error_shown.connect(lambda message: print(f"leanseg-gui: {message}", file=sys.stderr))
        QTimer.singleShot(int(timeout_s * 1000), lambda: self._take("timed out"))

    def follow(self, kind: str) -> None:
        """Wait for what `kind` ('image', 'folder', 'video' or 'model') shows when it is ready."""
        if kind == "folder":
            self._follow_batch()
        elif kind == "video":
            self._follow_video()
        else:
            self.window.job_ended.connect(self._settle_then_take)
            self.window.image_shown.connect(self._on_image_shown)
            if kind == "model":  # nothing to segment: the window once the model is ready
                self.window.model_changed.connect(lambda _status: self._settle_then_take("finished"))

    # -- an image ----------------------------------------------------------------------------------------------
    def _on_image_shown(self) -> None:
        if self.window.model_requested is None:  # nothing will be segmented: take the window as it is
            self._settle_then_take("no model to segment with")

    # -- a folder ----------------------------------------------------------------------------------------------
    def _follow_batch(self) -> None:
        dialog = getattr(self.window, "batch_dialog", None)
        if dialog is None:  # the dialog could not open; the window says why
            self._settle_then_take("failed")
            return
        self.target = dialog
        dialog.job_event.connect(self._on_batch_event)
        dialog.batch_finished.connect(self._on_batch_finished)
        dialog.batch_failed.connect(lambda _message: self._settle_then_take("failed"))
        dialog.start()

    def _on_batch_finished(self, summary: BatchSummary) -> None:
        failed = len(summary.failed)
        self._settle_then_take("finished" if not failed else f"{failed} of {len(summary.records)} image(s) failed")

    def _on_batch_event(self, event: JobEvent) -> None:
        if event.kind == "error":  # core's message names the file already; one that does not gets it in front
            named = event.path is None or event.path in event.message
            print(f"leanseg-gui: {event.message if named else f'{event.path}: {event.message}'}", file=sys.stderr)
        if event.kind in ("image", "error"):
            self._results += 1
            if self._results == FIRST_RESULTS:
                self._settle_then_take("finished")

    # -- a video -----------------------------------------------------------------------------------------------
    def _follow_video(self) -> None:
        panel = getattr(self.window, "video_panel", None)
        if panel is None or panel.source is None:  # the video could not open; the window says why
            self._settle_then_take("failed")
            return
        self.target = panel
        panel.error_shown.connect(self._on_video_error)
        panel.frame_shown.connect(self._on_frame_shown)
        if panel.last_frame is not None:
            self._on_frame_shown(panel.last_frame)

    def _on_video_error(self, message: str) -> None:
        print(f"leanseg-gui: {message}", file=sys.stderr)  # as the window's errors: the picture alone is not enough
        self._settle_then_take("failed")

    def _on_frame_shown(self, shown: object) -> None:
        if getattr(shown, "labels", None) is not None:
            self._settle_then_take("finished")
        elif self.window.model_requested is None:
            self._settle_then_take("no model to segment with")

    # -- grab ----------------------------------------------------------------------------------------------------
    def _settle_then_take(self, outcome: str) -> None:
        QTimer.singleShot(SETTLE_MS, lambda: self._take(outcome))

    def _take(self, outcome: str) -> None:
        if self._done:
            return
        self._done = True
        self.window.memory_panel.refresh()
        if self.window.error_box is not None and self.target is self.window:
            self.window.error_box.close()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        saved = self.target.grab().save(str(self.path))
        if not saved:
            print(f"leanseg-gui: error: could not write the screenshot {self.path}", file=sys.stderr)
        if outcome == "finished" and self.window.refusal_notice:  # the shipped model stood in for the given one
            outcome = "finished with the shipped model: the model given could not be opened"
        self.exit_code = 0 if saved and outcome == "finished" else 1
        print(f"screenshot {self.path} ({outcome})", flush=True)
        self._quit()

    def _quit(self) -> None:
        """Stop what is running (a batch is cancelled and waited for), close the windows and quit."""
        dialog = getattr(self.window, "batch_dialog", None)
        if dialog is not None and dialog.running:
            dialog.batch_finished.connect(lambda _summary: self._quit())
            dialog.batch_failed.connect(lambda _message: self._quit())
            dialog.cancel()
            return
        for companion in (dialog, getattr(self.window, "video_panel", None)):
            if companion is not None:
                companion.close()
        self.window.close()
        QApplication.quit()
