"""The main window: viewer in the middle, inference and overlay panels at the sides, the memory panel below.

Widgets subscribe to the worker's signals; the worker never knows a widget exists. Late signals of a job that
was cancelled or replaced are ignored by job id.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QDockWidget, QFrame, QLabel, QMessageBox, QScrollArea, QVBoxLayout, QWidget

from leanseg.core.assets import default_model_path
from leanseg.core.io.images import ImageData, to_rgb8
from leanseg.core.memory import MemoryMonitor, format_bytes
from leanseg.core.predict import InferenceOptions, Segmentation

from ..inference.controller import InferenceController
from ..inference.latency import freeze_long_lived_objects
from ..inference.worker import ModelStatus
from ..memory.monitor import start_monitor
from ..memory.panel import MemoryPanel
from ..messages import for_the_app, status_line
from ..viewer.controls import InferenceControls
from ..viewer.legend import OverlayPanel
from ..viewer.view import SegmentationViewer
from . import state as window_state
from .about import about_text
from .banner import ModelBanner
from .companions import CompanionsMixin
from .file_actions import FileActionsMixin
from .job_results import ERROR_SHOWN_MS, JobResultsMixin
from .memory_dock import MEMORY_HEIGHT, MemoryDockHeight
from .menus import build_menus
from .model_events import ModelEventsMixin
from .notes import image_notes
from .settings import AppSettings
from .status_text import StatusFields


def _scrolling(panel: QWidget) -> QScrollArea:
    """`panel` in a frameless scroll area: a short dock scrolls it instead of squashing its controls, and is never
    narrower than the panel beside its vertical scroll bar (it has no sideways one: nothing may be cut off)."""
    area = QScrollArea()
    area.setWidget(panel)
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    area.setMinimumWidth(panel.minimumSizeHint().width() + area.verticalScrollBar().sizeHint().width())
    return area


class MainWindow(FileActionsMixin, CompanionsMixin, JobResultsMixin, ModelEventsMixin):
    """`open_path`, `open_image`, `open_folder`, `open_video`, `open_model` are the entry points."""

    image_shown = Signal(object)  # ImageData now in the viewer
    segmented = Signal(object)  # Segmentation now drawn as the overlay
    job_ended = Signal(str)  # 'finished', 'failed' or 'cancelled' (the current job)
    model_changed = Signal(object)  # ModelStatus
    error_shown = Signal(str)

    def __init__(self, settings: AppSettings | None = None, model_path: Path | None = None) -> None:
        super().__init__()
        self.setWindowTitle("leanseg")
        self.setAcceptDrops(True)
        self.settings = settings or AppSettings()
        self.image: ImageData | None = None
        self.result: Segmentation | None = None
        self.model_status: ModelStatus | None = None
        self.model_requested: Path | None = None
        self.refusal_notice = ""  # why the asked-for model did not open, kept up while the fallback stands in
        self._stand_in_loading = False  # the shipped model is loading in place of one that failed
        self.job_waits_for_model = False  # an image job found no model while the stand-in loads
        self.monitor: MemoryMonitor | None = None
        self.error_box: QMessageBox | None = None
        self.last_error = ""
        self._given_labels: tuple[int, np.ndarray] | None = None  # job id, labels to show instead of segmenting
        self._image_notes: list[str] = []  # what the status bar says about the shown image once its job ends
        self._busy = False  # the current job will segment and has not ended yet
        self._setting_job_id = 0  # the job that re-ran the image for a changed setting: its failure takes no box
        self.viewer = SegmentationViewer()
        self.controls = InferenceControls()
        self.overlay_panel = OverlayPanel()
        self.memory_panel = MemoryPanel()
        self._build_central()
        self.controller = InferenceController(self)
        self.docks = [self._dock("Inference", _scrolling(self.controls), Qt.DockWidgetArea.LeftDockWidgetArea),
                      self._dock("Overlay", self.overlay_panel, Qt.DockWidgetArea.RightDockWidgetArea),
                      self._dock("Memory", self.memory_panel, Qt.DockWidgetArea.BottomDockWidgetArea)]
        self.memory_dock = self.docks[2]
        self.menu_actions = build_menus(self)
        self.memory_lab_action = self.install_memory_lab()  # Tools > Memory lab…
        self.menuBar().addAction(self.menu_actions.help_menu.menuAction())  # keep Help last
        self.resizeDocks(self.docks, [270, 250, 240], Qt.Orientation.Horizontal)
        self.resizeDocks([self.memory_dock], [MEMORY_HEIGHT], Qt.Orientation.Vertical)
        # in a low window the memory plot gives way before the image and Segment do, and gets its height back
        self.memory_dock_height = MemoryDockHeight(self, self.memory_dock, self.docks[0], self.controls.progress,
                                                   others=[self.docks[1]])
        self._build_status_bar()
        self._connect()
        window_state.restore(self, self.settings, self.controls, self.overlay_panel, self.memory_dock_height)
        self._start(model_path)
        freeze_long_lived_objects()

    # -- construction ---------------------------------------------------------------------------------------
    def _build_central(self) -> None:
        self.banner = ModelBanner()
        self.banner.open_model_requested.connect(self.choose_model)
        self.banner.edit_card_requested.connect(self.edit_card)
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.banner)
        layout.addWidget(self.viewer, 1)
        self.setCentralWidget(central)

    def _dock(self, title: str, widget: QWidget, area: Qt.DockWidgetArea) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(f"dock{title}")
        dock.setWidget(widget)
        dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable
                         | QDockWidget.DockWidgetFeature.DockWidgetClosable)
        self.addDockWidget(area, dock)
        return dock

    def _build_status_bar(self) -> None:
        self.hover_label = QLabel("")
        bar = self.statusBar()
        bar.addWidget(self.hover_label, 1)
        self.status_fields = StatusFields(bar, ("device", "model", "size", "time", "peak"))  # squeezed for a message
        self.status_labels = self.status_fields.labels

    def _connect(self) -> None:
        worker = self.controller.worker
        worker.model_ready.connect(self._on_model_ready)
        worker.model_failed.connect(self._on_model_failed)  # a method, not a lambda: queued to the GUI thread
        worker.image_ready.connect(self._on_image_ready)
        worker.job_event.connect(self._on_job_event)
        worker.job_finished.connect(self._on_job_finished)
        worker.job_failed.connect(self._on_job_failed)
        worker.job_cancelled.connect(self._on_job_cancelled)
        self.controls.options_changed.connect(self._on_options_changed)
        self.controls.segment_requested.connect(self.segment_current)
        self.controls.cancel_requested.connect(self.cancel_job)
        self.controls.open_model_requested.connect(self.choose_model)
        self.controls.busy_changed.connect(self.menu_actions.cancel.setEnabled)
        self.menu_actions.cancel.setEnabled(False)
        self.overlay_panel.opacity_changed.connect(self.viewer.set_opacity)
        self.overlay_panel.overlay_toggled.connect(self.viewer.set_overlay_visible)
        self.overlay_panel.overlay_toggled.connect(self.menu_actions.show_overlay.setChecked)
        self.menu_actions.show_overlay.toggled.connect(self.overlay_panel.show_overlay.setChecked)
        self.overlay_panel.legend.hidden_changed.connect(self.viewer.set_hidden_classes)
        self.viewer.hovered.connect(self.hover_label.setText)
        self.memory_panel.cache_emptied.connect(
            lambda freed: self.statusBar().showMessage(f"Empty cache freed {format_bytes(freed)}", 5000))

    def _start(self, model_path: Path | None) -> None:
        self._use_device(self.controls.options().device)
        path = model_path or window_state.remembered_model(self.settings)
        if path is None and default_model_path().is_file():
            path = default_model_path()
        if path is None:
            self.banner.show_message(
                f"<b>No default model is installed</b> (looked for {default_model_path()}). "
                "Open a model file (.safetensors, .pt2, .onnx or .leanseg) to segment images, or train one with "
                "<tt>leanseg train</tt>.")
            self.controls.set_model_name("no model")
        else:
            self.open_model(path)
        self._refresh_actions()

    # -- entry points ---------------------------------------------------------------------------------------
    def open_image(self, path: Path, labels: np.ndarray | None = None) -> None:
        """Read `path` on the worker, show it and segment it (cancelling any job in flight).

        With `labels` (H, W) uint8, e.g. a saved result, show those instead of segmenting.
        """
        self.settings.remember_dir("image", path)
        segment = self.model_requested is not None and labels is None
        job_id = self.controller.submit(path=Path(path), segment=segment)
        self._given_labels = (job_id, labels) if labels is not None else None
        self._set_busy(segment)
        self.statusBar().showMessage(f"Opening {Path(path).name}…")  # until the job says how it ended

    def open_model(self, path: Path) -> None:
        """Load a model file on the worker (validated there; a bad file leaves the current model in place)."""
        self.settings.remember_dir("model", path)
        self._stand_in_loading = False
        self.model_requested = Path(path)
        self.controller.configure(Path(path), self.controls.options())
        self.statusBar().showMessage(f"Loading model {Path(path).name}…")  # until it is ready or refused

    def open_folder(self, path: Path) -> None:
        """Segment a folder in the batch dialog."""
        self.settings.remember_dir("folder", path)
        self.open_batch(Path(path))

    def open_video(self, path: Path) -> None:
        """Play and segment a video in the video panel."""
        self.settings.remember_dir("video", path)
        self.open_video_panel(Path(path))

    def segment_current(self) -> None:
        if self.image is None:
            self.statusBar().showMessage("Open an image first", 5000)
            return
        if self.model_requested is None:
            self.show_error("No model", "Open a model file first (File > Open model).")
            return
        self.controller.submit(image=self.image)
        self._set_busy(True)
        self.statusBar().showMessage(f"Segmenting {self._image_name()}…")

    def cancel_job(self) -> None:
        self.controller.cancel()
        self.statusBar().showMessage("Cancelling at the next tile…", 3000)

    def show_error(self, title: str, message: str, in_box: bool = True) -> None:
        """`message` in the status bar and, `in_box`, in a message box that does not block the event loop; the app
        carries on. Without the box the keyboard stays where the user was typing."""
        message = for_the_app(message)
        self.last_error = message
        self.controls.clear_failure()  # an older failure's reason must not stand beside this error
        self.show_status_error(message, ERROR_SHOWN_MS)
        if self.error_box is not None:
            self.error_box.close()  # about something older than this error
        if in_box:
            self.error_box = QMessageBox(QMessageBox.Icon.Warning, title, message, QMessageBox.StandardButton.Ok,
                                         self)
            self.error_box.open()
        self.error_shown.emit(message)

    def show_status_error(self, message: str, timeout_ms: int = 0) -> None:
        """`message` in the status bar, reason first and files by name, cut at a word with "…" where the bar is
        too narrow (and cut again when the window is resized); the whole text in its tooltip."""
        self.status_fields.show_cut(status_line(message), message, timeout_ms)

    def show_about(self) -> None:
        QMessageBox.about(self, "About leanseg", about_text(self.model_status))

    # -- worker -> widgets ------------------------------------------------------------------------------------
    def _on_image_ready(self, job_id: int, image: ImageData) -> None:
        if not self.controller.is_current(job_id):
            return
        self.image, self.result = image, None
        self.controls.clear_failure()  # this one opened: why an image failed before is old news
        self.viewer.set_image(to_rgb8(image))
        self.overlay_panel.legend.set_labels(None)
        name = image.path.name if image.path else "image"
        self.setWindowTitle(f"{name} — leanseg")
        self._image_notes = image_notes(image)
        depth = image.depth_text + "".join(f", {note}" for note in [image.note, *self._image_notes] if note)
        self.status_labels["size"].setText(f"{image.width} × {image.height} · {depth}")
        if image.path is not None:
            self.settings.add_recent_file(image.path)
        self._refresh_actions()
        if self.model_requested is None:
            self.statusBar().showMessage(self._with_notes(f"Opened {name}; open a model to segment it"))
        elif self._busy:  # its job goes on to segment it; tile events add the progress
            self.statusBar().showMessage(f"Segmenting {name}…")
        self.image_shown.emit(image)
        given = self._given_labels
        if given is not None and given[0] == job_id and self.model_status is not None:
            if given[1].shape != image.pixels.shape[:2]:
                self.show_error("Open result", f"the labels do not match the {image.width}x{image.height} image")
                return
            self._on_job_finished(job_id, Segmentation(given[1], 0.0, 0, self.model_status.device))

    def _on_options_changed(self, options: InferenceOptions) -> None:
        if self.model_requested is None:
            self._use_device(options.device)
            return
        self.controller.configure(None, options)
        if self.image is not None:
            self.segment_current()  # show the effect of the new engine, device or budget at once
            # a failure is said beside the setting, in the panel: a box would take the keyboard from it
            self._setting_job_id = self.controller.current.job_id if self.controller.current else 0

    # -- helpers --------------------------------------------------------------------------------------------
    def _use_device(self, device: str) -> None:
        """Point the memory panel at `device` (a new monitor when the device changes)."""
        self.status_labels["device"].setText(device)
        self.monitor = start_monitor(self.monitor, torch.device(device))
        if self.memory_panel.monitor is not self.monitor:
            self.memory_panel.set_monitor(self.monitor)

    def _refresh_actions(self) -> None:
        self.menu_actions.segment.setEnabled(self.image is not None and self.model_requested is not None)
        self.controls.segment.setEnabled(self.image is not None and self.model_requested is not None)
        self.menu_actions.save_labels.setEnabled(self.result is not None)
        self.menu_actions.save_overlay.setEnabled(self.result is not None)

    def closeEvent(self, event: QCloseEvent) -> None:
        work = self.running_work()  # a batch or a video export: ask before stopping it
        if work and not self.confirm_quit(work):
            event.ignore()
            return
        model_path = self.model_status.path if self.model_status is not None else None
        window_state.save(self, self.settings, self.controls, self.overlay_panel, self.memory_dock_height, model_path)
        self.controller.shutdown()
        self.stop_companions()
        self.memory_panel.set_monitor(None)
        if self.monitor is not None:
            self.monitor.close()
            self.monitor = None
        super().closeEvent(event)
