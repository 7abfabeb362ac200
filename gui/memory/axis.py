"""A pyqtgraph value axis that stays readable when short: its numbered ticks keep a label's height apart, so a
low plot shows fewer numbers (down to one round value) instead of numbers printed over each other, and a title
longer than the axis shows only its units, whole ("(MB)"), instead of being cut ("memory (M")."""
from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QGraphicsSceneResizeEvent

MIN_TICK_GAP_PX = 26  # least distance between two numbered ticks: a label's height and a gap


def _round_within(low: float, high: float) -> float | None:
    """The 1, 2 or 5 times a power of ten in (low, high) nearest their middle (None when there is none)."""
    middle = (low + high) / 2
    if high <= 0 or middle <= 0:
        return None
    top = math.floor(math.log10(high))
    candidates = [factor * 10.0 ** power for power in range(top - 2, top + 1) for factor in (1, 2, 5)]
    inside = [value for value in candidates if low < value < high]
    return min(inside, key=lambda value: abs(value - middle)) if inside else None


class SparseAxis(pg.AxisItem):
    """pyqtgraph's tick spacing, widened to a 1-2-5 step whose ticks are at least MIN_TICK_GAP_PX apart; with
    room for fewer than two such steps, one tick at a round value whose label fits on the axis. A vertical axis
    shorter than its title shows the units alone."""

    title_fits = True  # the whole title fits along the axis; when not, `labelString` gives the units alone

    def labelString(self) -> str:
        if self.title_fits or not self.labelUnits:
            return super().labelString()
        style = ";".join(f"{key}: {value}" for key, value in self.labelStyle.items())
        return f"<span style='{style}'>({self.labelUnitPrefix}{self.labelUnits})</span>"

    def resizeEvent(self, ev: QGraphicsSceneResizeEvent | None = None) -> None:
        if self.label is not None and self.orientation in ("left", "right"):
            whole = QTextDocument()
            whole.setDefaultFont(self.label.font())
            whole.setHtml(super().labelString())
            title_fits = whole.size().width() <= self.size().height()
            if title_fits != self.title_fits:
                self.title_fits = title_fits
                self.label.setHtml(self.labelString())
        super().resizeEvent(ev)

    def tickSpacing(self, minVal: float, maxVal: float, size: float) -> list[tuple[float, float]]:
        levels = super().tickSpacing(minVal, maxVal, size)
        span = abs(maxVal - minVal)
        if not levels or size <= 0 or span == 0:
            return levels
        least = span * MIN_TICK_GAP_PX / size  # the smallest step that keeps labels apart
        if levels[0][0] >= least:
            return levels
        power = 10.0 ** math.floor(math.log10(least))
        major = next(factor * power for factor in (1, 2, 5, 10) if factor * power >= least)  # as pyqtgraph's steps
        lone = _round_within(min(minVal, maxVal), max(minVal, maxVal))  # nearest the middle: its label fits
        if 2 * major > span and lone is not None:
            return [(2 * span, lone)]  # one tick: the next would be past the axis's far end
        return [(major, 0.0)]  # no minor ticks: on an axis this short they would be a smear

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        """pyqtgraph's labels, except the lone tick's: its decimal places come from its own value, not from the
        wide spacing that keeps it alone (which would print 0.5 MB as "0")."""
        if len(values) == 1 and values[0] and spacing > abs(values[0]):
            spacing = abs(values[0])
        return super().tickStrings(values, scale, spacing)
