"""The live memory panel: allocated, reserved and engine-live MB against time, job marks, peak, Empty cache.

Allocated and reserved share the left axis; the engine's live tensors, often a hundredth of that, have their own
axis on the right. Mark labels are written across, in rows that do not cover each other: a mark with no room in any
row joins the label of a mark a few pixels before it ("done · start") or is drawn as a line alone, its label in the
line's tooltip. The legend sits above the plot, where it covers neither. In a dock too low for a useful plot, the
plot folds away and the figures line stays.
Curves are created once; a GUI-thread QTimer reads the monitor's ring buffer (`snapshot()`) and `setData`s
them, as in pyqtgraph's scrollingPlots example. The monitor samples on its own thread; this widget only reads.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QFontMetrics, QResizeEvent
from PySide6.QtWidgets import QGraphicsItem, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from leanseg.core.memory import format_bytes, plot_mark_label

from ..style import DIM_TEXT, PEAK_COLOUR, PLOT_TEXT, VIEW_BACKGROUND
from .axis import SparseAxis
from .mark_labels import place_labels

MB = 1e6
WINDOW_S = 30.0  # seconds the time axis spans; it jumps ahead in steps so the axes are not redrawn every tick
CURVES = (  # snapshot key, legend name, colour; engine_live is drawn against the right axis
    ("reserved", "reserved", "#5b8def"),
    ("allocated", "allocated", "#f2a541"),
    ("engine_live", "engine live tensors (right axis)", "#4fc38a"),
)
MAJOR_MARKS = ("start", "done", "cancel", "failed", "empty", "reset")  # first words of the labelled marks
MARKS_Z = 1000.0  # mark lines stack from here down (a thousandth each), above the curves (0) and the peak line
PEAK_Z = 0.5  # over the curves (0), under the mark labels, which the dashed peak line would otherwise cross
LABEL_FILL = pg.mkBrush(23, 24, 27, 190)  # VIEW_BACKGROUND, a little see-through: lines behind a label fade
MARK_ROWS = (0.93, 0.78, 0.63, 0.48)  # heights of the mark label rows, as a fraction of the plot's height,
# spread further apart, and fewer, where the plot is too low for a label's height between them (`_row_heights`)
MARK_GAP_PX = 6  # space kept between two labels in one row
PLOT_MIN_HEIGHT = 100  # px: the least useful plot (a data area of about two label rows); lower, it folds away
LEGEND_HEIGHT_PX = 18  # height of the legend row above the plot
PEAK_TIP = (
    "Peak allocated: the most bytes in use by the memory allocator since the panel started or Reset peak "
    "(CPU: the C heap in use, from glibc; GPU: torch.cuda.max_memory_allocated). It leaves out code, libraries "
    "and memory the allocator keeps for later, so it is below the process RSS a job's peak reports."
)


class MemoryMonitorLike(Protocol):
    """What the panel reads from leanseg.core.memory.MemoryMonitor."""

    def snapshot(self) -> dict[str, np.ndarray]: ...
    def marks(self) -> list[tuple[float, str]]: ...
    def mark(self, label: str) -> None: ...
    def reset_peak(self) -> None: ...
    def empty_cache(self) -> int: ...


class MemoryPanel(QWidget):
    """Plots a monitor; `set_monitor(None)` shows that no telemetry is running."""

    cache_emptied = Signal(int)  # bytes freed

    def __init__(self, monitor: MemoryMonitorLike | None = None, refresh_ms: int = 200) -> None:
        super().__init__()
        self.monitor: MemoryMonitorLike | None = None
        self.plot = pg.PlotWidget(background=VIEW_BACKGROUND,  # a low plot shows fewer numbers, never overlapping
                                  axisItems={side: SparseAxis(side) for side in ("left", "right")})
        self.plot.setMinimumHeight(PLOT_MIN_HEIGHT)  # lower than this, `fold_plot` hides it (memory_dock.py)
        self.plot.setLabel("left", "memory", units="B")
        self.plot.setLabel("bottom", "time", units="s")
        self.plot.showGrid(x=True, y=True, alpha=0.15)
        for side in ("left", "bottom"):  # axes change only when the range jumps: repaint them from a pixmap
            self.plot.getAxis(side).setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.disableAutoRange()
        self._show_legend()
        self.live_view = self._right_axis_view()
        self.plot.getViewBox().sigResized.connect(self._place_labels)
        self.curves: dict[str, pg.PlotDataItem] = {}
        for key, name, colour in CURVES:
            curve = pg.PlotDataItem(name=name, pen=pg.mkPen(colour, width=2))
            curve.setDownsampling(auto=True, method="peak")
            curve.setClipToView(True)
            (self.live_view if key == "engine_live" else self.plot).addItem(curve)
            self.curves[key] = curve
        peak_pen = pg.mkPen(PEAK_COLOUR, width=1, style=Qt.PenStyle.DashLine)
        self.peak_line = pg.InfiniteLine(angle=0, movable=False, pen=peak_pen)
        self.peak_line.setZValue(PEAK_Z)  # under the mark labels
        self.peak_line.setVisible(False)
        self.plot.addItem(self.peak_line)
        self._mark_lines: list[pg.InfiniteLine] = []
        self._mark_texts: dict[pg.InfiniteLine, str] = {}  # the labelled marks' texts, oldest first
        self._marks_added = 0  # marks drawn so far: each new one goes under the ones before it
        self._last_mark_time = float("-inf")
        self._x_start = -1.0  # left end of the time axis; negative until the first sample
        self._y_top = 0.0  # top of the memory axis in bytes
        self._live_top = 0.0  # top of the engine-live axis in bytes
        self.now_label = QLabel("—")
        self.peak_label = QLabel("peak allocated —")
        self.peak_label.setObjectName("peakLabel")
        self.peak_label.setToolTip(PEAK_TIP)
        self.freed_label = QLabel("")
        self.source_label = QLabel("")
        self.source_label.setObjectName("dimLabel")
        self.reset_peak_button = QPushButton("Reset peak")
        self.reset_peak_button.clicked.connect(self.reset_peak)
        self.empty_cache_button = QPushButton("Empty cache")
        self.empty_cache_button.setToolTip("Give memory the allocator keeps but does not use back to the system")
        self.empty_cache_button.clicked.connect(self.empty_cache)
        self._build_layout()
        self.timer = QTimer(self)
        self.timer.setInterval(refresh_ms)
        self.timer.timeout.connect(self.refresh)
        self.set_monitor(monitor)

    def _show_legend(self) -> None:
        """The curves' names in their colours in the title row above the plot, clear of data and mark labels."""
        entries = [(name, colour) for _, name, colour in CURVES] + [("peak allocated", PEAK_COLOUR)]
        text = "&nbsp;&nbsp;&nbsp;".join(f"<span style='color:{colour}'>&#9473;&#9473;</span> {name}"
                                         for name, colour in entries)
        item = self.plot.getPlotItem()
        item.setTitle(text, color=PLOT_TEXT, size="8pt")
        item.layout.setRowFixedHeight(0, LEGEND_HEIGHT_PX)

    def _right_axis_view(self) -> pg.ViewBox:
        """A second view sharing the time axis, scaled by the right axis (pyqtgraph's MultiplePlotAxes)."""
        item = self.plot.getPlotItem()
        view = pg.ViewBox(enableMouse=False, enableMenu=False)
        item.showAxis("right")
        item.scene().addItem(view)
        axis = item.getAxis("right")
        axis.linkToView(view)
        axis.setLabel("engine live", units="B", color="#4fc38a")
        axis.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        view.setXLink(item)
        view.disableAutoRange()

        def follow_main_view() -> None:
            view.setGeometry(item.vb.sceneBoundingRect())
            view.linkedViewChanged(item.vb, view.XAxis)

        item.vb.sigResized.connect(follow_main_view)
        return view

    def _build_layout(self) -> None:
        bar = QHBoxLayout()
        for widget in (self.now_label, self.peak_label, self.freed_label):
            bar.addWidget(widget)
            bar.addSpacing(12)
        bar.addStretch(1)
        bar.addWidget(self.source_label)
        bar.addWidget(self.reset_peak_button)
        bar.addWidget(self.empty_cache_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 6)
        layout.addLayout(bar)
        layout.addWidget(self.plot, 1)
        layout.addStretch(0)  # a folded plot leaves the figures line at the top
        self._figures_bar, self._column = bar, layout

    def least_height(self, with_plot: bool) -> int:
        """The panel's least height in px: the figures line, and the plot at its least when `with_plot`."""
        margins = self._column.contentsMargins()
        plot = self._column.spacing() + self.plot.minimumHeight() if with_plot else 0
        return margins.top() + self._figures_bar.minimumSize().height() + plot + margins.bottom()

    def fold_plot(self) -> None:
        """Hide the plot until the panel is high enough for it again (`least_height(True)`), leaving the figures
        line: for a dock too low for a useful plot."""
        self.plot.setVisible(False)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self.plot.isHidden() and event.size().height() >= self.least_height(with_plot=True):
            self.plot.setVisible(True)

    def set_monitor(self, monitor: MemoryMonitorLike | None) -> None:
        """Read from `monitor` from now on (curves keep their items, marks restart)."""
        self.monitor = monitor
        for line in self._mark_lines:
            self.plot.removeItem(line)
        self._mark_lines.clear()
        self._mark_texts.clear()
        self._last_mark_time = float("-inf")
        self._x_start, self._y_top, self._live_top = -1.0, 0.0, 0.0
        enabled = monitor is not None
        self.reset_peak_button.setEnabled(enabled)
        self.empty_cache_button.setEnabled(enabled)
        self.source_label.setText(f"source: {getattr(monitor, 'source', '')}" if enabled else "no telemetry")
        if enabled:
            self.timer.start()
            self.refresh()
        else:
            self.timer.stop()

    def refresh(self) -> None:
        """Read the ring buffer once and update curves, peak and marks (GUI thread, cheap)."""
        if self.monitor is None:
            return
        snapshot = self.monitor.snapshot()
        times = snapshot.get("time")
        if times is None or len(times) == 0:
            return
        latest = float(times[-1])
        self._follow(latest)
        shown = slice(int(np.searchsorted(times, self._x_start)), None)  # only what the view shows
        tops = {key: 0.0 for key in self.curves}
        marks = self.monitor.marks()
        for key, curve in self.curves.items():
            values = snapshot.get(key)
            if values is not None and len(values) == len(times):
                curve.setData(times[shown], values[shown].astype(np.float64))
                tops[key] = float(values[shown].max(initial=0))
        self._show_figures(snapshot)
        top = max(tops["allocated"], tops["reserved"])
        self._fit_height(max(top, self.peak_line.value() if self.peak_line.isVisible() else 0.0))
        live_top = _round_top(self._live_top, tops["engine_live"])
        if live_top != self._live_top:
            self._live_top = live_top
            self.live_view.setYRange(0, live_top, padding=0)
        self._add_new_marks(marks)

    def _follow(self, latest: float) -> None:
        """Keep the newest sample in view, moving the time axis in jumps of a quarter window."""
        if latest > self._x_start + WINDOW_S or self._x_start < 0:
            self._x_start = max(0.0, latest - 0.75 * WINDOW_S)
            self.plot.setXRange(self._x_start, self._x_start + WINDOW_S, padding=0)
            self._place_labels()  # marks now left of the axis give their rows up

    def _fit_height(self, top: float) -> None:
        """Grow the memory axis to a round number above `top`; shrink only when far too tall."""
        new_top = _round_top(self._y_top, top)
        if new_top != self._y_top:
            self._y_top = new_top
            self.plot.setYRange(0, self._y_top, padding=0)

    def _show_figures(self, snapshot: dict[str, np.ndarray]) -> None:
        allocated, reserved = snapshot["allocated"][-1], snapshot["reserved"][-1]
        self.now_label.setText(f"allocated {format_bytes(allocated)} · reserved {format_bytes(reserved)}")
        peaks = snapshot.get("peak")
        if peaks is not None and len(peaks):
            peak = float(peaks[-1])
            self.peak_label.setText(f"peak allocated {format_bytes(peak)}")
            self.peak_line.setPos(peak)
            self.peak_line.setVisible(True)

    def _add_new_marks(self, marks: list[tuple[float, str]]) -> None:
        added = False
        for time, mark in marks:
            if time <= self._last_mark_time:
                continue
            self._last_mark_time = time
            label = plot_mark_label(mark)
            major = label.split()[0].lower().startswith(MAJOR_MARKS) if label else False
            style = Qt.PenStyle.SolidLine if major else Qt.PenStyle.DotLine
            pen = pg.mkPen(DIM_TEXT if major else "#4a4e57", width=1, style=style)
            line = pg.InfiniteLine(pos=time, angle=90, movable=False, pen=pen,
                                   label=label if major else None,
                                   labelOpts={"position": MARK_ROWS[0], "color": PLOT_TEXT,
                                              "anchors": [(0, 0.5), (0, 0.5)], "fill": LABEL_FILL})
            line.setToolTip(f"{label} at {time:.2f} s")  # also a label that finds no room is there to read
            if major:
                line.label.setVisible(False)  # until `_place_labels` finds it room
                self._mark_texts[line] = label
                added = True
            # each mark under the ones before it: a label reaches right, over the lines of later marks only
            self._marks_added += 1
            line.setZValue(MARKS_Z - self._marks_added / 1000)
            self.plot.addItem(line)
            self._mark_lines.append(line)
        while len(self._mark_lines) > 400:  # keep the plot cheap on long sessions
            old = self._mark_lines.pop(0)
            self._mark_texts.pop(old, None)
            self.plot.removeItem(old)
        if added:
            self._place_labels()

    def _row_heights(self) -> tuple[float, ...]:
        """The label rows that fit the plot at its present height, as fractions of it: MARK_ROWS where the plot is
        tall enough; in a low plot a label's height apart, the top one inside the plot, and only as many as fit."""
        height = self.plot.getViewBox().height()
        text = QFontMetrics(self.font()).height()
        if height <= text:
            return MARK_ROWS[:1]
        top = min(MARK_ROWS[0] * height, height - text / 2)
        step = max((MARK_ROWS[0] - MARK_ROWS[1]) * height, text)
        rows = [top - i * step for i in range(len(MARK_ROWS))]
        return tuple(y / height for y in rows if y >= text / 2) or MARK_ROWS[:1]

    def _place_labels(self) -> None:
        """Lay the labels out afresh (`place_labels`) for the plot's present size and time axis: on new marks, a
        resize, a jump of the axis. A label that stands for several marks lists them all in its tooltip."""
        lines = list(self._mark_texts)
        if not lines:
            return
        heights = self._row_heights()
        seconds_per_px = self.plot.getViewBox().viewPixelSize()[0]
        if not np.isfinite(seconds_per_px) or seconds_per_px <= 0:
            seconds_per_px = WINDOW_S / 800
        text_item = lines[0].label.textItem  # every label has the same font and margins
        metrics, margins = QFontMetrics(text_item.font()), 2 * text_item.document().documentMargin()
        placed = place_labels([(line.value(), text) for line, text in self._mark_texts.items()], len(heights),
                              self._x_start, seconds_per_px,
                              lambda text: metrics.horizontalAdvance(text) + margins + MARK_GAP_PX)
        for index, line in enumerate(lines):
            label, shown = line.label, placed.get(index)
            if shown is None:
                label.setVisible(False)
                continue
            label.format = shown.text  # a hidden label ignores setFormat: setVisible below writes it
            label.setToolTip("\n".join(lines[i].toolTip() for i in shown.marks) if len(shown.marks) > 1 else "")
            label.setPosition(heights[shown.row])
            label.setVisible(True)

    def reset_peak(self) -> None:
        if self.monitor is not None:
            self.monitor.reset_peak()
            self.monitor.mark("reset peak")
            self.refresh()

    def empty_cache(self) -> int:
        """Ask the monitor to give cached memory back; shows and returns the bytes freed."""
        if self.monitor is None:
            return 0
        freed = self.monitor.empty_cache()
        self.freed_label.setText(f"Empty cache freed {format_bytes(freed)}")
        self.refresh()
        self.cache_emptied.emit(freed)
        return freed


def _round_top(current: float, top: float, floor: float = 1e6) -> float:
    """An axis top: `current` while `top` sits in 30-95% of it, else a round number 25% above `top`."""
    if current > 0 and 0.3 * current <= top <= 0.95 * current:
        return current
    step = 10 ** np.floor(np.log10(max(top, floor)))
    return float(np.ceil(1.25 * max(top, floor) / step) * step)
