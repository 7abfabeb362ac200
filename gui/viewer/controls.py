"""The inference panel: model, device, engine, precision, memory budget, tiling, mirror and multi-scale averaging;
Segment, Cancel and progress."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from leanseg.core.device import available_devices
from leanseg.core.engine.multiscale import SUGGESTED_SCALES
from leanseg.core.predict import ENGINES, PRECISIONS, TILING_MODES, InferenceOptions

from .last_run import LAST_RUN_LINES, LastRunLabel

ENGINE_TIPS = {
    "lean": "Memory-lean engine: frees each tensor after its last use, runs blocks in pieces",
    "eager": "Plain PyTorch eager mode (inference_mode), for comparison",
}
TILING_TIPS = {
    "auto": "Tile only when the memory budget needs it",
    "exact": "Tiles with a halo of the full receptive field: identical to whole-image labels",
    "fast": "Tiles with a smaller halo: faster, labels measured against whole-image inference",
    "off": "Never tile",
}
EXACT_WITH_SCALES_TIP = ("Not with Multi-scale averaging: a resized tile's border is not the resized image's, "
                         "so its tiles are approximate ones")
TILING_WITH_SCALES_TIP = ("'exact' is unavailable while Multi-scale averaging is on: auto tiles, when the budget "
                          "needs it, with approximate (fast) tiles")
MB = 1_000_000
LONG_WORD_CHARS = 24  # a word this long in a model's name may wrap after its _ . and -, not widen the panel


def _multiscale_tip(scales: tuple[float, ...]) -> str:
    sizes = [f"{scale:g}x" for scale in scales]
    listed = sizes[0] if len(sizes) == 1 else ", ".join(sizes[:-1]) + f" and {sizes[-1]}"
    return (f"Run each image at {listed} its size and average the results: a little more accurate on scenes with "
            f"objects at many distances, about {len(scales)}x the time. Large images are cut into approximate "
            "tiles: Tiling 'exact' is unavailable with it and becomes auto (still images; video runs without it)")


def breakable(name: str) -> str:
    """`name` with a zero-width space after each _ . and - of its long words: a narrow panel wraps it there."""
    words = [word if len(word) < LONG_WORD_CHARS else
             word.replace("_", "_\u200b").replace(".", ".\u200b").replace("-", "-\u200b") for word in name.split(" ")]
    return " ".join(words)


def _combo(values: tuple[str, ...], tips: dict[str, str] | None = None) -> QComboBox:
    combo = QComboBox()
    for value in values:
        combo.addItem(value, value)
        if tips and value in tips:
            combo.setItemData(combo.count() - 1, tips[value], Qt.ItemDataRole.ToolTipRole)
    return combo


class InferenceControls(QWidget):
    """Emits `options_changed` whenever a choice changes; the window forwards them to the worker."""

    options_changed = Signal(object)  # InferenceOptions
    segment_requested = Signal()
    cancel_requested = Signal()
    open_model_requested = Signal()
    busy_changed = Signal(bool)  # a job is running (Cancel makes sense)

    def __init__(self) -> None:
        super().__init__()
        self.model_name = QLabel("no model")
        self.model_name.setWordWrap(True)
        self.model_name.setObjectName("modelName")
        self.open_model = QPushButton("Open model…")
        self.open_model.clicked.connect(self.open_model_requested)
        self.device = _combo(tuple(available_devices()))
        self.engine = _combo(ENGINES, ENGINE_TIPS)
        self.precision = _combo(PRECISIONS)
        self.memory_budget = QSpinBox()
        self.memory_budget.setRange(0, 1_000_000)
        self.memory_budget.setSingleStep(64)
        self.memory_budget.setSuffix(" MB")
        self.memory_budget.setSpecialValueText("auto")
        self.memory_budget.setToolTip("Most memory inference may hold; auto: a fraction of free device memory")
        self.memory_budget.setKeyboardTracking(False)  # typed digits count on Enter or leaving the box, not 1, 10, 102
        self.tiling = _combo(TILING_MODES, TILING_TIPS)
        self.mirror = QCheckBox("Mirror averaging")
        self.mirror.setToolTip("Average each image's result with its left-right mirror's: a little more accurate, "
                               "twice the time (still images; video runs without it)")
        self.multiscale = QCheckBox("Multi-scale averaging")
        self.multiscale_scales = SUGGESTED_SCALES  # what a ticked box asks for; set_options keeps others it is given
        self.segment = QPushButton("Segment")
        self.segment.setObjectName("primary")
        self.segment.setToolTip("Segment the image (F5)")
        self.segment.clicked.connect(self.segment_requested)
        self.cancel = QPushButton("Cancel")
        self.cancel.setEnabled(False)
        self.cancel.setToolTip("Stop at the next tile (Esc)")
        self.cancel.clicked.connect(self.cancel_requested)
        self.progress = QProgressBar()
        self.show_outcome("ready", complete=False)
        self.last_result = LastRunLabel()
        self._build_layout()
        self.set_options(InferenceOptions(device=self.device.itemData(0), mirror="flip"))
        for combo in (self.device, self.engine, self.precision, self.tiling):
            combo.currentIndexChanged.connect(self._emit_options)
        self.mirror.toggled.connect(self._emit_options)
        self.multiscale.toggled.connect(self._emit_options)
        self.memory_budget.valueChanged.connect(self._emit_options)

    def _build_layout(self) -> None:
        model_row = QHBoxLayout()  # the name on a line of its own: a long one must not widen the panel
        model_row.addWidget(QLabel("Model"), 1)
        model_row.addWidget(self.open_model)
        form = QFormLayout()
        form.addRow("Device", self.device)
        form.addRow("Engine", self.engine)
        form.addRow("Precision", self.precision)
        form.addRow("Memory budget", self.memory_budget)
        form.addRow("Tiling", self.tiling)
        form.addRow(self.mirror)  # across the form: in its field column they would widen the panel past its dock
        form.addRow(self.multiscale)
        buttons = QHBoxLayout()
        buttons.addWidget(self.segment, 1)
        buttons.addWidget(self.cancel)
        layout = QVBoxLayout(self)
        layout.addLayout(model_row)
        layout.addWidget(self.model_name)
        layout.addSpacing(8)
        layout.addLayout(form)
        layout.addSpacing(8)
        layout.addLayout(buttons)
        layout.addWidget(self.progress)
        layout.addWidget(self.last_result)
        layout.addStretch(1)

    def options(self) -> InferenceOptions:
        budget_mb = self.memory_budget.value()
        return InferenceOptions(
            device=self.device.currentData(),
            engine=self.engine.currentData(),
            precision=self.precision.currentData(),
            memory_budget=budget_mb * MB if budget_mb else None,
            tiling=self.tiling.currentData(),
            mirror="flip" if self.mirror.isChecked() else "off",
            scales=self.multiscale_scales if self.multiscale.isChecked() else (1.0,),
        )

    def set_options(self, options: InferenceOptions) -> None:
        """Show `options` without emitting options_changed; unknown devices fall back to the first entry."""
        self.blockSignals(True)
        try:
            for combo, value in ((self.device, options.device), (self.engine, options.engine),
                                 (self.precision, options.precision), (self.tiling, options.tiling)):
                index = combo.findData(value)
                combo.blockSignals(True)
                combo.setCurrentIndex(max(index, 0))
                combo.blockSignals(False)
            self.memory_budget.blockSignals(True)
            self.memory_budget.setValue((options.memory_budget or 0) // MB)
            self.memory_budget.blockSignals(False)
            self.mirror.blockSignals(True)
            self.mirror.setChecked(options.mirror == "flip")
            self.mirror.blockSignals(False)
            if options.multiscale:
                self.multiscale_scales = options.scales
            self.multiscale.setToolTip(_multiscale_tip(self.multiscale_scales))
            self.multiscale.blockSignals(True)
            self.multiscale.setChecked(options.multiscale)
            self.multiscale.blockSignals(False)
            self._fit_tiling_to_scales()
        finally:
            self.blockSignals(False)

    def set_model_name(self, text: str, tooltip: str = "") -> None:
        self.model_name.setText(breakable(text))
        self.model_name.setToolTip(tooltip)

    def set_busy(self, busy: bool) -> None:
        self.cancel.setEnabled(busy)
        self.busy_changed.emit(busy)
        if busy:
            if self.last_result.property("failed"):  # a failure's reason stands until the next run
                self.show_last_run("")
            self.progress.setRange(0, 0)  # busy indicator until the engine reports tiles
            self.progress.setFormat("segmenting…")
        else:
            self.show_outcome("ready", complete=False)

    def show_outcome(self, text: str, complete: bool) -> None:
        """The bar at rest: full with what the run came to ("done · 1.30 s"), or empty ("cancelled")."""
        self.progress.setRange(0, 1)
        self.progress.setValue(1 if complete else 0)
        self.progress.setFormat(text)

    def show_last_run(self, text: str, failed: bool = False, tooltip: str = "") -> None:
        """What the last run came to under the bar: its time and peak in a few lines (the whole text in the
        tooltip), or why it failed, whole and in the warning colour."""
        self.last_result.show_text(text, None if failed else LAST_RUN_LINES, tooltip)
        if self.last_result.property("failed") != failed:
            self.last_result.setProperty("failed", failed)
            self.last_result.style().unpolish(self.last_result)
            self.last_result.style().polish(self.last_result)

    def clear_failure(self) -> None:
        """Take down what a failed run said (the bar's "failed" and the reason under it), if it says so: a newer
        error, or an image opened since, makes it old news."""
        if self.last_result.property("failed"):
            self.show_last_run("")
            self.show_outcome("ready", complete=False)

    def set_tile_progress(self, done: int, count: int) -> None:
        self.progress.setRange(0, max(count, 1))
        self.progress.setValue(done)
        self.progress.setFormat(f"tile {done} of {count}")

    def _fit_tiling_to_scales(self) -> None:
        """Exact tiles are impossible with multi-scale averaging: while it is on, 'exact' is greyed out (its tip
        says why) and a Tiling of exact becomes auto, which tiles, when the budget needs it, with fast tiles."""
        multiscale = self.multiscale.isChecked()
        exact = self.tiling.findData("exact")
        tiling_model = self.tiling.model()
        assert isinstance(tiling_model, QStandardItemModel)  # a QComboBox's own model
        tiling_model.item(exact).setEnabled(not multiscale)
        tip = EXACT_WITH_SCALES_TIP if multiscale else TILING_TIPS["exact"]
        self.tiling.setItemData(exact, tip, Qt.ItemDataRole.ToolTipRole)
        self.tiling.setToolTip(TILING_WITH_SCALES_TIP if multiscale else "")
        if multiscale and self.tiling.currentIndex() == exact:
            self.tiling.blockSignals(True)  # one options_changed for the change that caused this
            self.tiling.setCurrentIndex(self.tiling.findData("auto"))
            self.tiling.blockSignals(False)

    def _emit_options(self) -> None:
        self._fit_tiling_to_scales()
        self.options_changed.emit(self.options())
