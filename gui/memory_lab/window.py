"""The Memory lab window: where memory goes, in training and at test time, for the loaded model.

A bar chart of peak memory (and one of time) per configuration, each run in its own subprocess,
with the liveness lower bounds drawn as lines; the bytes held at each step of the network with the
peak step labelled by layer; hovering a step lists the tensors alive there. The lab runs on a
worker thread (leanseg.core.profile.run_lab) with progress and cancel; export PNG and JSON.
"""
from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from leanseg.core.events import JobEvent
from leanseg.core.memory import format_bytes
from leanseg.core.profile import CONFIGURATION_NAMES, LabRequest, LabResult, ModelSpec, default_spec
from leanseg.core.profile.export import bound_lines
from leanseg.core.profile.records import MemoryProfile, write_json
from leanseg.core.profile.summary import summary_lines

from ..flow_layout import FlowLayout
from ..text_fit import ElidedLabel
from .charts import BarChart, StepChart
from .runner import LabRunner

MAX_LISTED_TENSORS = 40
EMPTY_TEXTS = (  # what the peak, time and step charts say with nothing to draw: before a run, and during one
    ("Run the lab to see each configuration's peak memory", "Measuring the first configuration…"),
    ("Run the lab to see each configuration's time per run", "Measuring the first configuration…"),
    ("Run the lab to see the memory held at each step", "The steps are drawn when the lab has profiled them…"),
)


class MemoryLabWindow(QWidget):
    """`run_lab()` for the model in `spec`; `finished(LabResult)`, `cancelled()`, `failed(str)` when it ends."""

    finished = Signal(object)
    cancelled = Signal()
    failed = Signal(str)

    def __init__(self, spec: ModelSpec | None = None, model_text: str = "") -> None:
        super().__init__()
        self.setWindowTitle("Memory lab — leanseg")
        self.resize(1280, 860)
        if spec is None:
            spec, model_text = default_spec()
        self.spec, self.result = spec, LabResult(spec.describe(), 1024, "cpu")
        self.runner = LabRunner()
        self.runner.job_event.connect(self._on_event)
        self.runner.finished.connect(self._on_finished)
        self.runner.failed.connect(self._on_failed)
        self.runner.cancelled.connect(self._on_cancelled)
        self._build(model_text or spec.describe())

    # -- construction ---------------------------------------------------------------------------------------
    def _build(self, model_text: str) -> None:
        self.model_label = ElidedLabel(model_text)  # a long path is cut in the middle, not the window held wide
        self.model_label.setObjectName("modelName")
        self.input_size = QSpinBox(minimum=32, maximum=8192, singleStep=32, value=1024, suffix=" px")
        self.repeats = QSpinBox(minimum=1, maximum=9, value=1, prefix="× ")
        self.repeats.setToolTip("timed runs per configuration (median), after one warm-up")
        self.run_button = QPushButton("Run")
        self.run_button.setObjectName("primary")
        self.run_button.clicked.connect(self.run_lab)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        self.progress = QProgressBar()
        self.progress.setFormat("%v / %m")
        self.open_button = QPushButton("Open JSON…")
        self.open_button.clicked.connect(self._choose_open)
        self.export_png_button = QPushButton("Export PNG…")
        self.export_png_button.clicked.connect(lambda: self._choose_export("png"))
        self.export_json_button = QPushButton("Export JSON…")
        self.export_json_button.clicked.connect(lambda: self._choose_export("json"))
        model_row = QHBoxLayout()  # what is measured, and the files
        model_row.addWidget(QLabel("Model:"))
        model_row.addWidget(self.model_label, 1)
        for button in (self.open_button, self.export_png_button, self.export_json_button):
            model_row.addWidget(button)
        self.config_boxes = {name: QCheckBox(name) for name in CONFIGURATION_NAMES}
        for box in self.config_boxes.values():
            box.setChecked(True)
        configs = QHBoxLayout()  # the boxes wrap to a second row in a narrow window
        configs_label = QLabel("Configurations:")
        configs_label.setMinimumHeight(next(iter(self.config_boxes.values())).sizeHint().height())  # on their line
        configs.addWidget(configs_label, 0, Qt.AlignmentFlag.AlignTop)
        boxes = FlowLayout()
        for box in self.config_boxes.values():
            boxes.addWidget(box)
        configs.addLayout(boxes, 1)
        run_row = QHBoxLayout()
        for widget in (QLabel("Input"), self.input_size, QLabel("Repeats"), self.repeats, self.run_button,
                       self.cancel_button):
            run_row.addWidget(widget)
        run_row.addWidget(self.progress, 1)
        self.peak_chart = BarChart("peak above baseline (MB)", "MB", scale=1e6, empty_text=EMPTY_TEXTS[0][0])
        self.time_chart = BarChart("time per run (s)", "s", empty_text=EMPTY_TEXTS[1][0])
        bars = QSplitter(Qt.Orientation.Horizontal)
        bars.addWidget(self.peak_chart)
        bars.addWidget(self.time_chart)
        bars.setSizes([760, 500])
        self.step_chart = StepChart(EMPTY_TEXTS[2][0])
        self.step_chart.step_hovered.connect(self.hover_step)
        self.profile_choice = QComboBox()
        self.profile_choice.addItems(["eager (no_grad, fp32)", "engine (fp32)"])
        self.profile_choice.currentIndexChanged.connect(lambda _: self._show_profile())
        self.tensor_title = QLabel("Hover a step to list the tensors alive there")
        self.tensor_title.setWordWrap(True)  # a long layer name takes a second line, not the window's width
        self.tensor_list = QListWidget()
        side = QVBoxLayout()
        side.addWidget(QLabel("Step profile:"))
        side.addWidget(self.profile_choice)
        side.addWidget(self.tensor_title)
        side.addWidget(self.tensor_list, 1)
        side_widget = QWidget()
        side_widget.setLayout(side)
        steps = QSplitter(Qt.Orientation.Horizontal)
        steps.addWidget(self.step_chart)
        steps.addWidget(side_widget)
        steps.setSizes([900, 380])
        self.summary = QLabel("Run the lab to measure each configuration in its own process.")
        self.summary.setObjectName("dimLabel")
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        charts = QSplitter(Qt.Orientation.Vertical)
        charts.addWidget(bars)
        charts.addWidget(steps)
        charts.setSizes([380, 420])
        layout = QGridLayout(self)
        layout.addLayout(model_row, 0, 0)
        layout.addLayout(configs, 1, 0)
        layout.addLayout(run_row, 2, 0)
        layout.addWidget(charts, 3, 0)
        layout.addWidget(self.summary, 4, 0)
        layout.setRowStretch(3, 1)

    # -- actions ------------------------------------------------------------------------------------------------
    def set_model(self, spec: ModelSpec, text: str) -> None:
        self.spec = spec
        self.model_label.setText(text)

    def request(self) -> LabRequest:
        chosen = tuple(name for name, box in self.config_boxes.items() if box.isChecked())
        return LabRequest(self.spec, size=self.input_size.value(), repeats=self.repeats.value(), configurations=chosen)

    def run_lab(self) -> None:
        """Start the lab on the worker thread (the charts fill in as configurations finish)."""
        if self.runner.busy():
            return
        request = self.request()
        self.result = LabResult(self.spec.describe(), request.size, request.device)
        self._say_when_empty(running=True)
        self._refresh_bars()
        self.step_chart.set_profile(None, None)
        self.tensor_list.clear()
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.progress.setValue(0)
        self.runner.start(request)

    def cancel(self) -> None:
        """Stop after terminating the configuration's subprocess."""
        self.runner.cancel()
        self.summary.setText("Cancelling…")

    def hover_step(self, index: int) -> None:
        """List the tensors alive while step `index` of the shown profile ran."""
        profile = self.shown_profile()
        if profile is None or not 0 <= index < len(profile.steps):
            return
        step = profile.steps[index]
        self.tensor_title.setText(f"step {index}: {step.layer} — {format_bytes(step.peak_bytes)} while it ran"
                                  + (f" ({format_bytes(step.workspace_bytes)} hidden)" if step.workspace_bytes else ""))
        self.tensor_list.clear()
        for tensor in sorted(step.running, key=lambda t: -t.nbytes)[:MAX_LISTED_TENSORS]:
            shape = "×".join(str(d) for d in tensor.shape)
            self.tensor_list.addItem(f"{format_bytes(tensor.nbytes):>9}  {tensor.layer}  {shape} {tensor.dtype}")
        if step.workspace_bytes:
            self.tensor_list.addItem(f"{format_bytes(step.workspace_bytes):>9}  hidden temporaries of {step.layer}")

    def shown_profile(self) -> MemoryProfile | None:
        return self.result.eager if self.profile_choice.currentIndex() == 0 else self.result.engine

    def export_png(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not self.grab().save(str(path)):
            raise OSError(f"could not write {path}")
        return path

    def export_json(self, path: str | Path) -> Path:
        return write_json(path, self.result.to_dict())

    def show_result(self, result: LabResult) -> None:
        """Draw a finished lab run (this window's, or one read back from its JSON)."""
        self.result = result
        self._refresh_bars()
        self._show_profile()
        self.summary.setText("\n".join(summary_lines(result)))

    def open_json(self, path: str | Path) -> LabResult:
        """Show a run saved by Export JSON or `leanseg profile` (ValueError naming the file if unreadable)."""
        try:
            result = LabResult.from_dict(json.loads(Path(path).read_text()))
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{path}: not a memory lab JSON file ({err})") from err
        self.model_label.setText(f"{result.model} (from {Path(path).name})")
        self.input_size.setValue(result.size)
        self.show_result(result)
        return result

    def _choose_open(self) -> None:
        name, _ = QFileDialog.getOpenFileName(self, "Open memory lab JSON", "", "JSON (*.json)")
        if name:
            try:
                self.open_json(name)
            except ValueError as err:
                self.summary.setText(str(err))

    def _choose_export(self, kind: str) -> None:
        name, _ = QFileDialog.getSaveFileName(self, f"Export {kind.upper()}", f"memory_lab.{kind}",
                                              f"{kind.upper()} (*.{kind})")
        if name:
            try:
                written = self.export_png(name) if kind == "png" else self.export_json(name)
                self.summary.setText(f"written {written}")
            except OSError as err:
                self.summary.setText(f"export failed: {err}")

    # -- worker -> widgets ----------------------------------------------------------------------------------------
    def _on_event(self, event: JobEvent) -> None:
        if event.kind == "start" and event.count:
            self.progress.setMaximum(event.count)
        if event.kind == "info" and event.index is not None:
            done = "row" in event.data or "profile" in event.data
            self.progress.setValue(event.index + int(done))
            self.summary.setText(event.message)
        if "row" in event.data:
            self.result.rows.append(event.data["row"])
            self._refresh_bars()

    def _on_finished(self, result: LabResult) -> None:
        self.show_result(result)
        self._idle()
        self.finished.emit(result)

    def _on_failed(self, message: str) -> None:
        self.summary.setText(f"The lab failed: {message}")
        self._idle()
        self.failed.emit(message)

    def _on_cancelled(self) -> None:
        self.summary.setText("Cancelled.")
        self._idle()
        self.cancelled.emit()

    def _idle(self) -> None:
        self.run_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        self._say_when_empty(running=False)

    def _say_when_empty(self, running: bool) -> None:
        """What the charts with nothing to draw say: that the run will draw them, or how to start one."""
        for chart, texts in zip((self.peak_chart, self.time_chart, self.step_chart), EMPTY_TEXTS):
            chart.set_empty_text(texts[running])

    def _refresh_bars(self) -> None:
        rows = [r for r in self.result.rows if "error" not in r]
        self.peak_chart.set_bars([r["name"] for r in rows], [r["peak_bytes"] for r in rows])
        self.time_chart.set_bars([r["name"] for r in rows], [r["seconds"] for r in rows])
        self.peak_chart.set_lines([(mb * 1e6, text) for mb, text in bound_lines(self.result)])

    def _show_profile(self) -> None:
        self.step_chart.set_profile(self.shown_profile(), self.result.bounds)
        profile = self.shown_profile()
        if profile is not None and profile.peak_step is not None:
            self.hover_step(profile.peak_index)

    def closeEvent(self, event: QCloseEvent) -> None:
        self.runner.cancel()
        self.runner.wait(5.0)
        super().closeEvent(event)
