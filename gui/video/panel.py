"""The video panel: play a video with the overlay segmented live, seek, and export the segmented video.

Playback (player.py) and export (export.py, started by export_actions.py) each run on their own thread with
their own Segmenter; this widget only turns their signals into pixels and labels. Frames arrive on
the GUI thread as ShownFrame objects; the panel draws them and tells the player it may send more.
"""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QRect, Qt, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from leanseg.core.io.video import VideoInfo, VideoReadError
from leanseg.core.jobs import VideoJobSummary
from leanseg.core.model.catalog import describe_file, display_name, model_classes
from leanseg.core.predict import InferenceOptions

from ..viewer.controls import breakable
from ..viewer.legend import ClassLegend
from ..viewer.view import SegmentationViewer
from .export import VideoExport
from .export_actions import ExportActionsMixin, clock_text
from .player import ShownFrame, VideoPlayback

LEGEND_EVERY_S = 0.25  # while playing, the legend's class shares follow the frames at most 4 times a second
NEW_MODEL_NOTE = "segmenting with the new model…"  # until a frame it segmented arrives (its name is beside)
SIDE_WIDTH_PX = 190  # the model name and legend column: fixed, so a long model name never resizes the video
NAME_LINES = 3  # the most lines the model's name takes there; a longer one is cut before its file extension


class VideoPanel(ExportActionsMixin):
    """`open_video(path)`, then play/pause, seek and `export_to(path)`; non-modal, one video at a time."""

    video_opened = Signal(object)  # VideoInfo
    frame_shown = Signal(object)  # ShownFrame, after it was drawn
    export_finished = Signal(object)  # VideoJobSummary (also when cancelled)
    export_failed = Signal(str)
    job_event = Signal(object)  # the export's JobEvents, for the memory timeline
    error_shown = Signal(str)

    def __init__(self, parent: QWidget | None = None, model_path: Path | None = None,
                 options: InferenceOptions | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Video")
        self.setModal(False)
        self.resize(820, 640)
        self.source: Path | None = None
        self.info: VideoInfo | None = None
        self.model_path = model_path
        self.options = options or InferenceOptions()
        self.colours: tuple[tuple[int, int, int], ...] = ()
        self.class_names: tuple[str, ...] = ()
        self.last_frame: ShownFrame | None = None
        self._labels_from_serial = 0  # frames of a lower playback model serial carry an earlier model's labels
        self._legend_drawn_at = 0.0  # when the legend's class shares last followed a frame
        self.last_summary: VideoJobSummary | None = None
        self.exporting = False  # from export_to until finished/failed arrives
        self.playback = VideoPlayback(self)
        self.export = VideoExport(self)
        self._build()
        self._connect()
        self._read_classes()
        self._refresh()

    # -- construction ---------------------------------------------------------------------------------------
    def _build(self) -> None:
        self.viewer = SegmentationViewer()
        self.viewer.placeholder.setText("Open a video (File > Open video) or drop one on the main window")
        self.play_button = QPushButton("Play")
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setTracking(True)
        self.position_label = QLabel("—")
        self.live_overlay = QCheckBox("Live overlay")
        self.live_overlay.setChecked(True)
        self.rate_label = QLabel("")
        self.info_label = QLabel("No video")
        self.export_button = QPushButton("Export segmented video…")
        self.cancel_button = QPushButton("Cancel")
        self.progress = QProgressBar()
        self.progress.setTextVisible(True)
        self.export_label = QLabel("")
        self.export_label.setWordWrap(True)
        self.model_label = QLabel("No model")
        self.model_label.setObjectName("modelName")
        self.model_label.setWordWrap(True)
        self.legend = ClassLegend()  # the shown frame's class shares; a click hides a class
        side_column = QWidget()
        side_column.setFixedWidth(SIDE_WIDTH_PX)
        side = QVBoxLayout(side_column)
        side.setContentsMargins(0, 0, 0, 0)
        side.addWidget(self.model_label)
        side.addWidget(self.legend, 1)
        picture = QHBoxLayout()
        picture.addWidget(self.viewer, 1)
        picture.addWidget(side_column)
        transport = QHBoxLayout()
        transport.addWidget(self.play_button)
        transport.addWidget(self.slider, 1)
        transport.addWidget(self.position_label)
        status = QHBoxLayout()
        status.addWidget(self.info_label, 1)
        status.addWidget(self.rate_label)
        status.addWidget(self.live_overlay)
        export = QHBoxLayout()
        export.addWidget(self.export_button)
        export.addWidget(self.progress, 1)
        export.addWidget(self.cancel_button)
        layout = QVBoxLayout(self)
        layout.addLayout(picture, 1)
        layout.addLayout(transport)
        layout.addLayout(status)
        layout.addLayout(export)
        layout.addWidget(self.export_label)

    def _connect(self) -> None:
        self.play_button.clicked.connect(self.toggle_play)
        self.slider.valueChanged.connect(self._on_slider)
        self.live_overlay.toggled.connect(self._on_live_overlay)
        self.legend.hidden_changed.connect(self.viewer.set_hidden_classes)
        self.export_button.clicked.connect(self.choose_export)
        self.cancel_button.clicked.connect(self.cancel_export)
        self.playback.frame_shown.connect(self._on_frame)
        self.playback.playing_changed.connect(self._on_playing_changed)
        self.playback.failed.connect(self._show_error)
        self.export.job_event.connect(self._on_export_event)
        self.export.finished.connect(self._on_export_finished)
        self.export.failed.connect(self._on_export_failed)
        self.finished.connect(self.shutdown)  # QDialog.finished: closed by any means

    # -- entry points ---------------------------------------------------------------------------------------
    def open_video(self, path: Path) -> bool:
        """Open `path` and show its first frame (segmented when a model is set); False with a message if not."""
        if self.exporting:
            self._show_error("Wait for the export to finish, or cancel it, before opening another video.")
            return False
        try:
            info = self.playback.open(Path(path), self.model_path, self.options)
        except VideoReadError as err:
            self._show_failed_open(Path(path), f"Could not open the video: {err}")
            return False
        self.source, self.info, self.last_frame = Path(path), info, None
        self.setWindowTitle(f"{Path(path).name} — leanseg video")
        self.info_label.setText(f"{Path(path).name} · {info.describe()}")
        self.slider.blockSignals(True)
        self.slider.setRange(0, max((info.frame_count or 1) - 1, 0))
        self.slider.setValue(0)
        self.slider.blockSignals(False)
        self.export_label.setText("")
        self.progress.reset()
        self._refresh()
        self.video_opened.emit(info)
        return True

    def _show_failed_open(self, path: Path, message: str) -> None:
        """Nothing of the video shown before stays: the panel names the file that failed, and why."""
        self.playback.close()
        self.source, self.info, self.last_frame, self.last_summary = None, None, None, None
        self.setWindowTitle(f"{path.name} (could not open) — leanseg video")
        self.viewer.clear_image(f"{path.name} could not be opened")
        self.info_label.setText(f"{path.name}: not opened")
        self.slider.blockSignals(True)
        self.slider.setRange(0, 0)
        self.slider.blockSignals(False)
        self.position_label.setText("—")
        self.rate_label.setText("")
        self.play_button.setText("Play")
        self.progress.reset()
        self.legend.set_labels(None)
        self._show_error(message)
        self._refresh()

    def set_model(self, model_path: Path | None, options: InferenceOptions) -> None:
        """Use this model (and device/engine options) for live segmentation and export.

        The legend shows the new model's classes at once, so the old model's overlay goes with it: the frame
        stays bare until a frame segmented by the new model arrives."""
        model_changed = model_path != self.model_path
        self.model_path, self.options = model_path, options
        self._read_classes()
        if self.source is not None:
            self.playback.set_model(model_path, options)
            if model_changed:
                self._labels_from_serial = self.playback.model_serial
                self.viewer.clear_labels()
                self.legend.set_labels(None)
                if model_path is not None and self.live_overlay.isChecked():
                    self.rate_label.setText(NEW_MODEL_NOTE)
        self._refresh()

    def play(self) -> None:
        self.playback.play()

    def pause(self) -> None:
        self.playback.pause()

    def toggle_play(self) -> None:
        self.pause() if self.playback.playing else self.play()

    def seek(self, index: int) -> None:
        self.playback.seek(index)

    # -- worker -> widgets ------------------------------------------------------------------------------------
    def _on_frame(self, shown: ShownFrame) -> None:
        try:
            if self.source is None:  # a frame of a video closed since (a failed open cleared the panel)
                return
            first = self.viewer.pixels is None or self.viewer.pixels.shape != shown.rgb.shape
            if first:
                self.viewer.set_image(shown.rgb)
            else:
                self.viewer.pixels = shown.rgb
                self.viewer.image_item.setImage(shown.rgb, autoLevels=False, levels=(0, 255))
            stale = shown.model_serial < self._labels_from_serial  # labels of the model used before set_model
            if stale:
                shown = replace(shown, labels=None)
            if shown.labels is not None and self.colours:
                self.viewer.set_labels(shown.labels, self.colours, self.class_names)
            else:
                self.viewer.clear_labels()
            self.last_frame = shown
            if not self.playback.playing or time.monotonic() - self._legend_drawn_at >= LEGEND_EVERY_S:
                self._show_shares()
            self._show_position(shown)
            if stale and self.model_path is not None:
                self.rate_label.setText(NEW_MODEL_NOTE)
        finally:
            self.playback.frame_drawn()
        self.frame_shown.emit(shown)

    def _show_position(self, shown: ShownFrame) -> None:
        self.slider.blockSignals(True)
        self.slider.setValue(shown.index)
        self.slider.blockSignals(False)
        fps = self.info.fps if self.info and self.info.fps else 0.0
        total = f" / {self.info.frame_count}" if self.info and self.info.frame_count else ""
        when = f" · {clock_text(shown.index / fps)}" if fps else ""
        self.position_label.setText(f"frame {shown.index + 1}{total}{when}")
        infer = f"inference {1000 * shown.infer_seconds:.0f} ms" if shown.labels is not None else "no overlay"
        if self.playback.playing and shown.fps > 0:
            target = f" of {fps:.0f}" if fps else ""
            skipped = f" · skipped {shown.skipped}" if shown.skipped else ""
            self.rate_label.setText(f"live {shown.fps:.1f}{target} fps{skipped} · {infer}")
        else:
            self.rate_label.setText(infer)

    def _on_playing_changed(self, playing: bool) -> None:
        self.play_button.setText("Pause" if playing else "Play")
        if not playing:
            self._show_shares()  # the frame it stopped on, which the 4 Hz legend may have skipped

    def _show_shares(self) -> None:
        frame = self.last_frame
        self.legend.set_labels(frame.labels if frame is not None and self.colours else None)
        self._legend_drawn_at = time.monotonic()

    def _on_slider(self, value: int) -> None:
        if self.source is not None:
            self.seek(value)

    def _on_live_overlay(self, on: bool) -> None:
        self.playback.set_segmenting(on)
        if not self.playback.playing and self.last_frame is not None:
            self.seek(self.last_frame.index)

    def export_progress_text(self) -> str:
        """How far the running export has got: '12 of 100 frames exported' ('12 frames exported' of a video whose
        length is unknown)."""
        done, count = max(self.progress.value(), 0), self.progress.maximum()
        return f"{done} of {count} frames exported" if count else f"{done} frames exported"

    # -- helpers --------------------------------------------------------------------------------------------
    def _read_classes(self) -> None:
        self.colours, self.class_names = (), ()
        self.legend.set_classes((), ())
        self.model_label.setText("No model: the video plays without an overlay")
        self.model_label.setToolTip("")
        if self.model_path is None:
            return
        try:
            described = describe_file(self.model_path)  # its card or metadata, read once for names and classes
            names, colours = model_classes(described)
        except Exception as err:  # noqa: BLE001 - a bad model file is reported, the panel stays usable
            self._show_error(f"Could not read the model {self.model_path}: {err}")
            return
        self.colours = tuple((int(r), int(g), int(b)) for r, g, b in colours)
        self.class_names = tuple(names)
        self.legend.set_classes(self.class_names, self.colours)
        name = display_name(self.model_path, described.name)
        self.model_label.setText(self._fitted_model_line(name, len(names)))
        self.model_label.setToolTip(f"{name}\n{self.model_path}")

    def _fitted_model_line(self, name: str, class_count: int) -> str:
        """'Model: NAME · K classes' on one line where it fits the side column; else the name whole, wrapped after
        its _ . and - as the main window's is, and the classes on a line below. Only a name longer than NAME_LINES
        lines is cut, at the end of its stem: its extension stays (the whole name is in the tooltip)."""
        line = f"Model: {name} · {class_count} classes"
        if self._name_lines(line) == 1:
            return line
        stem, dot, extension = name.rpartition(".")
        tail = dot + extension if stem else ""  # '.safetensors', or '.onnx)' of 'Card name (file.onnx)'
        head = name[:len(name) - len(tail)]
        fitted, keep = name, len(head)
        while keep > 1 and self._name_lines(f"Model: {breakable(fitted)}") > NAME_LINES:
            keep -= 1
            fitted = head[:keep].rstrip(" _-.") + "…" + tail
        return f"Model: {breakable(fitted)}\n{class_count} classes"

    def _name_lines(self, text: str) -> int:
        """How many lines `text` takes in the model label, wrapped to the side column; more than NAME_LINES when a
        word of it is wider than the column (it could not be wrapped, and would be cut at the edge)."""
        self.model_label.ensurePolished()  # measure in the style sheet's (bold) font
        metrics = self.model_label.fontMetrics()
        wrapped = metrics.boundingRect(QRect(0, 0, SIDE_WIDTH_PX, 100_000), Qt.TextFlag.TextWordWrap, text)
        if wrapped.width() > SIDE_WIDTH_PX:
            return NAME_LINES + 1
        return round(wrapped.height() / metrics.lineSpacing())

    def _refresh(self) -> None:
        has_video = self.source is not None
        exporting = self.exporting
        self.play_button.setEnabled(has_video)
        self.slider.setEnabled(has_video)
        self.export_button.setEnabled(has_video and self.model_path is not None and not exporting)
        self.cancel_button.setEnabled(exporting)
        self.live_overlay.setEnabled(self.model_path is not None)

    def _show_error(self, message: str) -> None:
        self.export_label.setText(message)
        self.error_shown.emit(message)

    def shutdown(self) -> None:
        """Stop playback and any export (which finalises what it wrote); open_video starts afresh."""
        self.playback.close()
        self.export.stop()
        self.source = None
        self._refresh()

    def closeEvent(self, event: QCloseEvent) -> None:
        self.shutdown()
        super().closeEvent(event)
