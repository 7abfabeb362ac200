"""The memory lab's charts (pyqtgraph): bars per configuration with lower-bound lines, and the
bytes held at each step of the network with the peak step labelled; hovering a step reports it.
Before there is anything to draw, each says so in its middle, on bare axes."""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt, Signal
from PySide6.QtGui import QFontMetrics

from leanseg.core.memory import format_bytes
from leanseg.core.profile import LowerBounds, MemoryProfile

from ..memory.axis import SparseAxis
from ..style import DIM_TEXT, PLOT_TEXT, VIEW_BACKGROUND

MB = 1e6
BAR_COLOURS = {"train": "#e5534b", "eval": "#f2a541", "engine": "#4fc38a"}
TEXT = PLOT_TEXT
BOUND_STYLES = (  # pen and the glyph that names it in a title, one per lower bound (blocks whole, in pieces)
    (pg.mkPen(TEXT, width=1, style=Qt.PenStyle.DashLine), "╌╌"),
    (pg.mkPen("#9fd8ff", width=1, style=Qt.PenStyle.DotLine), "┈┈"),
)


def _bar_colour(name: str) -> str:
    return BAR_COLOURS.get(name.split(" ")[0], "#5b8def")


class LabChart(pg.PlotWidget):
    """A lab chart: plain numbers on its axes (the units are in their titles, so no SI prefix like "(x0.001)"),
    numbered ticks kept apart on a short axis, and until it has data a line in its middle saying what it will
    show, on a fixed frame without ticks instead of axes auto-ranged over nothing."""

    def __init__(self, empty_text: str) -> None:
        super().__init__(background=VIEW_BACKGROUND, axisItems={side: SparseAxis(side) for side in ("left", "bottom")})
        for side in ("left", "bottom"):
            self.getAxis(side).enableAutoSIPrefix(False)
        self.setMouseEnabled(x=False, y=False)
        self.placeholder = pg.TextItem(empty_text, color=DIM_TEXT, anchor=(0.5, 0.5))  # the window changes its
        self.placeholder.setVisible(False)  # text while a run goes on; shown by _show_empty
        self.addItem(self.placeholder, ignoreBounds=True)

    def is_empty(self) -> bool:
        """Whether the chart shows its placeholder (there is nothing to draw yet)."""
        return self.placeholder.isVisible()

    def set_empty_text(self, text: str) -> None:
        self.placeholder.setText(text)

    def _show_empty(self) -> None:
        """The placeholder in the middle of a 0..1 frame; the axes keep their titles and lose their ticks."""
        for side in ("left", "bottom"):
            self.getAxis(side).setTicks([[]])
        self.placeholder.setPos(0.5, 0.5)
        self.placeholder.setVisible(True)
        self.setXRange(0, 1, padding=0)
        self.setYRange(0, 1, padding=0)

    def _show_data(self) -> None:
        self.placeholder.setVisible(False)
        for side in ("left", "bottom"):
            self.getAxis(side).setTicks(None)  # pyqtgraph's own again


class BarChart(LabChart):
    """One horizontal bar per configuration, its name on the left and its value at its end; lower bounds as
    vertical lines, named above the plot (never on the bars)."""

    def __init__(self, x_label: str, units: str, scale: float = 1.0, empty_text: str = "") -> None:
        super().__init__(empty_text)
        self.scale = scale  # value / scale is drawn
        self.units = units
        self.setLabel("bottom", x_label)
        self.showGrid(x=True, alpha=0.15)
        self.getViewBox().invertY(True)  # the first configuration on top
        self.names: list[str] = []
        self.values: list[float] = []
        self.bars: pg.BarGraphItem | None = None
        self._labels: list[pg.TextItem] = []
        self._lines: list[pg.InfiniteLine] = []
        self._fit()

    def set_bars(self, names: list[str], values: list[float]) -> None:
        self.names, self.values = list(names), [v / self.scale for v in values]
        if self.bars is not None:
            self.removeItem(self.bars)
        for label in self._labels:
            self.removeItem(label)
        self._labels = []
        self.bars = pg.BarGraphItem(x0=0, y=np.arange(len(names)), width=self.values, height=0.62,
                                    brushes=[pg.mkBrush(_bar_colour(n)) for n in names], pen=None)
        self.addItem(self.bars)
        for i, value in enumerate(self.values):
            label = pg.TextItem(f" {value:.0f}" if value >= 100 else f" {value:.3g}", color=TEXT, anchor=(0, 0.5))
            label.setPos(value, i)
            self.addItem(label)
            self._labels.append(label)
        axis = self.getAxis("left")
        widest = max((QFontMetrics(axis.font()).horizontalAdvance(n) for n in names), default=40)
        axis.setWidth(widest + 16)
        self._fit()

    def set_lines(self, lines: list[tuple[float, str]]) -> None:
        """Vertical lines at x (bytes before scaling), each drawn in its own style and named above the plot."""
        for line in self._lines:
            self.removeItem(line)
        self._lines = []
        names = []
        for (x, text), (pen, glyph) in zip(lines, BOUND_STYLES):
            line = pg.InfiniteLine(pos=x / self.scale, angle=90, movable=False, pen=pen)
            self.addItem(line)
            self._lines.append(line)
            names.append(f"{glyph} {text}")
        self.setTitle("&nbsp;&nbsp;&nbsp;".join(names) or None, color=TEXT, size="9pt")  # None: no title row
        self._fit()

    def bar_count(self) -> int:
        return 0 if self.bars is None else len(self.bars.opts["width"])

    def line_values(self) -> list[float]:
        return [float(line.value()) for line in self._lines]

    def _fit(self) -> None:
        """The bars and lines in view, the names as the left axis's ticks; the placeholder while there are none."""
        if not self.names and not self._lines:
            self._show_empty()
            return
        self._show_data()
        self.getAxis("left").setTicks([[(i, n) for i, n in enumerate(self.names)]])
        top = max(self.values + [float(line.value()) for line in self._lines] + [1e-9])
        self.setYRange(-0.6, max(len(self.names), 1) - 0.4, padding=0)
        self.setXRange(0, top * 1.18, padding=0)  # room for the value after the longest bar


class StepChart(LabChart):
    """Bytes held at each step (while it ran, and after it), lower bounds, the peak step labelled.

    `step_hovered(index)` fires when the mouse moves over a step.
    """

    step_hovered = Signal(int)

    def __init__(self, empty_text: str = "") -> None:
        super().__init__(empty_text)
        self.setLabel("left", "held (MB)")
        self.setLabel("bottom", "step through the network (graph node)")
        self.showGrid(x=True, y=True, alpha=0.15)
        self.legend = self.addLegend(offset=(10, 5), labelTextColor=TEXT, brush=pg.mkBrush(23, 24, 27, 200))
        self.peak_curve = self.plot(name="while the step ran", pen=pg.mkPen("#f2a541", width=2), stepMode="center")
        self.live_curve = self.plot(name="after it (dead inputs freed)", pen=pg.mkPen("#5b8def", width=1.5),
                                    stepMode="center")
        self.cursor = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen("#6b707a", width=1))
        self.addItem(self.cursor)
        self.peak_marker = pg.ScatterPlotItem(size=9, brush=pg.mkBrush("#e5534b"), pen=None)
        self.addItem(self.peak_marker)
        self.peak_label = pg.TextItem("", color="#ff8a80", anchor=(0.5, 1.2))
        self.addItem(self.peak_label)
        self._bound_lines: list[pg.InfiniteLine] = []
        self._bound_samples: list[pg.PlotDataItem] = []  # their entries in the legend
        self.profile: MemoryProfile | None = None
        self.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.set_profile(None, None)

    def set_profile(self, profile: MemoryProfile | None, bounds: LowerBounds | None) -> None:
        self.profile = profile
        for line in self._bound_lines:
            self.removeItem(line)
        for sample in self._bound_samples:
            self.legend.removeItem(sample)
        self._bound_lines, self._bound_samples = [], []
        if profile is None or not profile.steps:
            self.peak_curve.setData([], [])
            self.live_curve.setData([], [])
            self.peak_label.setText("")
            self.peak_marker.setData([], [])
            self.legend.setVisible(False)  # it would name curves that are not there
            self.cursor.setVisible(False)
            self._show_empty()
            return
        self._show_data()
        self.legend.setVisible(True)
        self.cursor.setVisible(True)
        edges = np.arange(len(profile.steps) + 1) - 0.5
        self.peak_curve.setData(edges, [s.peak_bytes / MB for s in profile.steps])
        self.live_curve.setData(edges, [s.live_bytes / MB for s in profile.steps])
        peak = profile.peak_step
        assert peak is not None
        self.peak_marker.setData([peak.index], [peak.peak_bytes / MB])
        self.peak_label.setText(f"peak {format_bytes(peak.peak_bytes)}: {peak.layer}")
        right_half = peak.index > len(profile.steps) / 2
        self.peak_label.setAnchor((1.02, 1.0) if right_half else (-0.02, 1.0))
        self.peak_label.setPos(peak.index, peak.peak_bytes / MB)
        if bounds is not None:
            pairs = ((bounds.whole_bytes, "lower bound, blocks whole"), (bounds.pieces_bytes, "lower bound, in pieces"))
            for (value, text), (pen, _glyph) in zip(pairs, BOUND_STYLES):
                line = pg.InfiniteLine(pos=value / MB, angle=0, movable=False, pen=pen)
                self.addItem(line)
                self._bound_lines.append(line)
                sample = pg.PlotDataItem(pen=pen)
                self.legend.addItem(sample, f"{text} {format_bytes(value)}")
                self._bound_samples.append(sample)
        top = max([peak.peak_bytes] + ([bounds.whole_bytes] if bounds else [])) / MB
        self.setXRange(-0.5, len(profile.steps) - 0.5, padding=0.01)
        self.setYRange(0, top * 1.18, padding=0)

    def _on_mouse_moved(self, position: QPointF) -> None:
        if self.profile is None or not self.sceneBoundingRect().contains(position):
            return
        x = self.plotItem.vb.mapSceneToView(position).x()
        index = int(round(x))
        if 0 <= index < len(self.profile.steps):
            self.cursor.setPos(index)
            self.step_hovered.emit(index)
