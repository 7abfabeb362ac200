"""A pyqtgraph value axis that stays readable when short: its numbered ticks keep a label's height apart, so a
low plot shows fewer numbers (down to one round value) instead of numbers printed over each other."""
from __future__ import annotations

import math

import pyqtgraph as pg

MIN_TICK_GAP_PX = 26  # least distance between two numbered ticks: a label's height and a gap


def _round_at_most(value: float) -> float | None:
    """The largest 1, 2 or 5 times a power of ten that is at most `value` (None unless `value` > 0)."""
    if value <= 0:
        return None
    power = 10.0 ** math.floor(math.log10(value))
    return max(factor * power for factor in (1, 2, 5) if factor * power <= value * (1 + 1e-9))


class SparseAxis(pg.AxisItem):
    """pyqtgraph's tick spacing, widened to a 1-2-5 step whose ticks are at least MIN_TICK_GAP_PX apart; with
    room for fewer than two such steps, one tick at a round value half a gap or more below the far end."""

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
        lone = _round_at_most(max(minVal, maxVal) - span * MIN_TICK_GAP_PX / 2 / size)  # its label stays on the axis
        if 2 * major > span and lone is not None and lone >= min(minVal, maxVal):
            return [(2 * span, lone)]  # one tick: the next would be past the axis's far end
        return [(major, 0.0)]  # no minor ticks: on an axis this short they would be a smear
