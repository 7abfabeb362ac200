"""What the main window shows when a segmentation job reports: its tile plan and progress, the result, a failure,
a cancel, or an image that could not be opened (while the image shown before stays, and is named as still shown).

Mixed into MainWindow, which connects the controller's signals to these handlers. Late signals of a job that
was cancelled or replaced are ignored by job id.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QMainWindow, QMessageBox

from leanseg.core.events import JobEvent
from leanseg.core.io.images import ImageData
from leanseg.core.memory import MemoryMonitor
from leanseg.core.predict import Segmentation

from ..inference.controller import InferenceController
from ..inference.worker import IMAGE_UNREADABLE, NO_MODEL_MESSAGE, ModelStatus
from ..messages import for_the_app, status_line
from ..viewer.controls import InferenceControls
from ..viewer.last_run import TileClock
from ..viewer.legend import OverlayPanel
from ..viewer.view import PLACEHOLDER, SegmentationViewer
from .notes import job_peak_text
from .status_text import StatusField, StatusFields

SEGMENTING_FAILED, READING_FAILED = "Segmentation failed", "Cannot open image"  # the boxes a failed job opens
ERROR_SHOWN_MS = 10_000  # how long the status bar says an error (MainWindow.show_error, a failed open)
NOT_OPENED = "not opened"  # the bar after a file failed to open: nothing ran, whatever was shown stays


def _in_a_sentence(reason: str) -> str:
    """`reason` to follow other words: "Truncated PNG" -> "truncated PNG" ("PNG signature missing" stays)."""
    first = reason.split(" ", 1)[0]
    return reason[:1].lower() + reason[1:] if first[1:2].islower() else reason


class JobResultsMixin(QMainWindow):
    """The worker's job signals -> widgets; MainWindow provides the widgets and state used here."""

    _tile_clock: tuple[int, TileClock] | None = None  # (job id, its tiles from its plan); None: no tiles yet

    if TYPE_CHECKING:  # provided by MainWindow
        segmented: ClassVar[Signal]
        job_ended: ClassVar[Signal]
        image: ImageData | None
        result: Segmentation | None
        model_status: ModelStatus | None
        model_requested: Path | None
        job_waits_for_model: bool
        monitor: MemoryMonitor | None
        controller: InferenceController
        viewer: SegmentationViewer
        controls: InferenceControls
        overlay_panel: OverlayPanel
        status_fields: StatusFields
        status_labels: dict[str, StatusField]
        _given_labels: tuple[int, np.ndarray] | None
        _image_notes: list[str]
        _busy: bool
        _setting_job_id: int
        error_box: QMessageBox | None

        def show_error(self, title: str, message: str, in_box: bool = True) -> None: ...
        def _refresh_actions(self) -> None: ...

    def _on_job_event(self, job_id: int, event: JobEvent) -> None:
        if self.monitor is not None:
            self.monitor.mark_event(event)
        if not self.controller.is_current(job_id):
            return
        if event.kind == "start":
            self._show_run_fields()  # a new image's job: the last image's time and peak are not about it
        elif event.kind == "plan":  # before the first tile: the grid, tile size and budget, shown at once
            count = event.count or 1
            clock = TileClock(event.message, count)
            self._tile_clock = job_id, clock
            self.controls.show_last_run(clock.summary(), tooltip=event.message)
            if count > 1:
                self.controls.set_tile_progress(0, count)
                self.statusBar().showMessage(f"Segmenting {self._image_name()} in {count} tiles…")
        elif event.kind == "tile" and event.count:
            self._on_tile(job_id, event.index or 0, event.count)

    def _on_tile(self, job_id: int, index: int, count: int) -> None:
        """Tile `index` (0-based) of `count` has run: the bar, and the time the tiles left should take."""
        done = index + 1
        self.controls.set_tile_progress(done, count)
        clock = self._clock_of(job_id)
        if clock is None and count > 1:  # tiles with no plan before them: a whole-image pass split after an OOM
            clock = TileClock("", count)
            self._tile_clock = job_id, clock
        left = ""
        if clock is not None:
            clock.tile_done(done, count, time.monotonic())
            self.controls.show_last_run(clock.summary(), tooltip=clock.plan)
            left = f", {clock.time_left()}" if clock.seconds_left() is not None else ""
        self.statusBar().showMessage(f"Segmenting {self._image_name()}: tile {done} of {count}{left}…")

    def _on_job_finished(self, job_id: int, result: Segmentation) -> None:
        if not self.controller.is_current(job_id) or self.model_status is None:
            return
        self.result = result
        info = self.model_status.info
        self.viewer.set_labels(result.labels, info.class_colours, info.class_names)
        self.overlay_panel.legend.set_labels(result.labels)
        self._set_busy(False)
        if self.error_box is not None and self.error_box.windowTitle() in (SEGMENTING_FAILED, READING_FAILED):
            self.error_box.close()  # an earlier run's failure is old news beside this result
        self.controls.show_outcome(f"done · {result.seconds:.2f} s", complete=True)
        peak, peak_tip = job_peak_text(result)
        summary = f"{result.seconds:.2f} s · {peak} · {result.device}"
        self.controls.show_last_run("Last run: " + summary + "".join(f"\n{n}" for n in result.notes), tooltip=peak_tip)
        self._show_run_fields()
        given = self._given_labels is not None and self._given_labels[0] == job_id
        done = "shown with its saved labels" if given else f"segmented in {result.seconds:.2f} s"
        self.statusBar().showMessage(self._with_notes(f"{self._image_name()}: {done}"))
        self._refresh_actions()
        self.segmented.emit(result)
        self.job_ended.emit("finished")

    def _on_job_failed(self, job_id: int, message: str) -> None:
        if not self.controller.is_current(job_id):
            return
        self._set_busy(False)
        if message == NO_MODEL_MESSAGE and self.model_status is None and self.model_requested is not None:
            self.job_waits_for_model = True  # the asked-for model failed and the shipped one is loading:
            return  # it segments the image when ready (or the job fails with it)
        message = for_the_app(message)
        self._show_run_fields()
        if message.startswith(IMAGE_UNREADABLE):  # the job failed reading, before any segmenting
            self._say_not_opened(message, in_box=job_id != self._setting_job_id)
            self.job_ended.emit("failed")
            return
        # the message first: it takes down what an older failure said in the panel, where this one's reason goes
        self.show_error(SEGMENTING_FAILED, message, in_box=job_id != self._setting_job_id)
        self.controls.show_outcome("failed", complete=False)
        reason = message.removeprefix("Segmentation failed")  # ": why" or " (Error): why"
        last_run = "Last run failed" + (reason if reason != message else f": {message}")
        self.controls.show_last_run(last_run, failed=True, tooltip=message)
        self.job_ended.emit("failed")

    def _say_not_opened(self, message: str, in_box: bool) -> None:
        """An image file that could not be opened, said so that what the window shows is never in doubt: the image
        shown before stays (with its labels, and the status bar's size, time and peak fields, which are about it),
        and every message names it as still shown; the bar says "not opened", not that a run failed. With no
        image before, the viewer says which file could not be opened."""
        current = self.controller.current
        failed = current.path.name if current is not None and current.path is not None else "the image"
        shown = self._image_name() if self.image is not None else ""
        whole = f"{message.rstrip('.')}. Still showing {shown}." if shown else message
        self.show_error(READING_FAILED, whole, in_box=in_box)
        self.controls.show_outcome(NOT_OPENED, complete=False)
        self.controls.show_last_run(whole, failed=True, tooltip=whole)
        reason = _in_a_sentence(status_line(message).split(" · ")[0])  # the reason alone, files by name
        still = f"; still showing {shown}" if shown else ""
        self.status_fields.show_cut(f"{failed} could not be opened{still} · {reason}", whole, ERROR_SHOWN_MS)
        if self.image is None:
            self.viewer.clear_image(f"{failed} could not be opened: {reason}\n\n{PLACEHOLDER}")

    def _on_job_cancelled(self, job_id: int) -> None:
        current = self.controller.current
        if current is None or current.job_id != job_id:
            return
        self._set_busy(False)
        self.controls.show_outcome("cancelled", complete=False)
        clock = self._clock_of(job_id)
        if clock is not None:  # what was planned stays in view, with how far it got
            stopped = f"Cancelled after {clock.done} of {clock.count} tiles"
            self.controls.show_last_run("\n".join(line for line in (stopped, clock.plan) if line), tooltip=clock.plan)
        self._show_run_fields()  # the labels of an earlier run may stay; a new image's job leaves none
        self.statusBar().showMessage(f"{self._image_name()}: cancelled")
        self.job_ended.emit("cancelled")

    # -- helpers ----------------------------------------------------------------------------------------------
    def _image_name(self) -> str:
        return self.image.path.name if self.image is not None and self.image.path is not None else "image"

    def _with_notes(self, message: str) -> str:
        return " · ".join([message, *self._image_notes])

    def _clock_of(self, job_id: int) -> TileClock | None:
        """The tiles of job `job_id`, once its plan (or first tile) came; None before, or for another job's."""
        return self._tile_clock[1] if self._tile_clock is not None and self._tile_clock[0] == job_id else None

    def _show_run_fields(self) -> None:
        """The status bar's time and peak fields: of the run whose labels are shown, empty when none are."""
        time_text, peak, peak_tip = "", "", ""
        if self.result is not None:
            time_text = f"{self.result.seconds:.2f} s"
            peak, peak_tip = job_peak_text(self.result)
        self.status_labels["time"].setText(time_text)
        self.status_labels["peak"].setText(peak)
        self.status_labels["peak"].setToolTip(peak_tip)

    def _set_busy(self, busy: bool) -> None:
        self._busy = busy
        self.controls.set_busy(busy)

    def _clear_result(self) -> None:
        """Drop the shown labels and what the last run said about them."""
        self.result = None
        self.viewer.clear_labels()
        self.overlay_panel.legend.set_labels(None)
        self.controls.show_last_run("")
        self._show_run_fields()
        self._refresh_actions()
