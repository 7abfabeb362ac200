"""What the main window shows when a segmentation job reports: tile progress, the result, a failure, a cancel.

Mixed into MainWindow, which connects the controller's signals to these handlers. Late signals of a job that
was cancelled or replaced are ignored by job id.
"""
from __future__ import annotations

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
from ..messages import for_the_app
from ..viewer.controls import InferenceControls
from ..viewer.legend import OverlayPanel
from ..viewer.view import SegmentationViewer
from .notes import job_peak_text
from .status_text import StatusField

SEGMENTING_FAILED, READING_FAILED = "Segmentation failed", "Cannot open image"  # the boxes a failed job opens


class JobResultsMixin(QMainWindow):
    """The worker's job signals -> widgets; MainWindow provides the widgets and state used here."""

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
        if self.controller.is_current(job_id) and event.kind == "tile" and event.count:
            done = (event.index or 0) + 1
            self.controls.set_tile_progress(done, event.count)
            self.statusBar().showMessage(f"Segmenting {self._image_name()}: tile {done} of {event.count}…")

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
        self.status_labels["time"].setText(f"{result.seconds:.2f} s")
        self.status_labels["peak"].setText(peak)
        self.status_labels["peak"].setToolTip(peak_tip)
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
        unreadable = message.startswith(IMAGE_UNREADABLE)  # the job failed reading, before any segmenting
        # the message first: it takes down what an older failure said in the panel, where this one's reason goes
        self.show_error(READING_FAILED if unreadable else SEGMENTING_FAILED, message,
                        in_box=job_id != self._setting_job_id)
        self.controls.show_outcome("failed", complete=False)
        reason = message.removeprefix("Segmentation failed")  # ": why" or " (Error): why"
        last_run = message if unreadable else "Last run failed" + (reason if reason != message else f": {message}")
        self.controls.show_last_run(last_run, failed=True, tooltip=message)
        self.job_ended.emit("failed")

    def _on_job_cancelled(self, job_id: int) -> None:
        current = self.controller.current
        if current is None or current.job_id != job_id:
            return
        self._set_busy(False)
        self.controls.show_outcome("cancelled", complete=False)
        self.statusBar().showMessage(f"{self._image_name()}: cancelled")
        self.job_ended.emit("cancelled")

    # -- helpers ----------------------------------------------------------------------------------------------
    def _image_name(self) -> str:
        return self.image.path.name if self.image is not None and self.image.path is not None else "image"

    def _with_notes(self, message: str) -> str:
        return " · ".join([message, *self._image_notes])

    def _set_busy(self, busy: bool) -> None:
        self._busy = busy
        self.controls.set_busy(busy)

    def _clear_result(self) -> None:
        """Drop the shown labels and what the last run said about them."""
        self.result = None
        self.viewer.clear_labels()
        self.overlay_panel.legend.set_labels(None)
        self.controls.show_last_run("")
        for key in ("time", "peak"):
            self.status_labels[key].setText("")
            self.status_labels[key].setToolTip("")
        self._refresh_actions()
