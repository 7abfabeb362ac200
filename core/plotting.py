"""PNG line and bar charts drawn with OpenCV (no matplotlib), for benchmarks and `plot-memory`.

Usage::

    from leanseg.core.plotting import bar_chart, line_chart

    line_chart({"eager": (x, y), "lean": (x2, y2)}, "/tmp/mem.png", title="Memory",
               x_label="time (s)", y_label="MB", marks=[(1.2, "start"), (3.4, "done")],
               hlines=[(512, "budget")])
    bar_chart({"eager": 810.0, "lean": 180.0}, "/tmp/peak.png", title="Peak", y_label="MB")
    bar_chart({"1024 px": {"eager": 810.0, "lean": 180.0},      # grouped bars:
               "2048 px": {"eager": 3200.0, "lean": 260.0}},    # group -> series -> value
              "/tmp/peak_groups.png", title="Peak by size", y_label="MB")

- `series` maps a legend name to `(x, y)`, two 1-D sequences of equal length (NaNs break the line).
- `marks` are vertical dashed lines at x with a label; `hlines` horizontal dashed lines at y.
- `y_format` / `x_format` turn a tick value into its text (default: compact `%g`).
- Both functions write the PNG atomically, create the folder, and return the path.
  Default size 960 x 540 px; pass `size=(width, height)` for another.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import cv2
import numpy as np

from .io.outputs import write_png

ArrayLike = Sequence[float] | np.ndarray
TickFormat = Callable[[float], str]

# Tableau-10 colours, RGB.
PALETTE = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
           (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207)]
_FONT = cv2.FONT_HERSHEY_SIMPLEX
_INK = (40, 40, 40)
_GRID = (225, 225, 225)
_MARK = (90, 90, 90)
_HLINE = (200, 40, 40)
_MARGIN_LEFT, _MARGIN_RIGHT, _MARGIN_TOP, _MARGIN_BOTTOM = 90, 30, 66, 60


def _compact(value: float) -> str:
    return f"{value:.4g}"


def nice_ticks(low: float, high: float, target: int = 6) -> np.ndarray:
    """About `target` round tick values (steps 1, 2, 5 x 10^k) covering [low, high]."""
    if not math.isfinite(low) or not math.isfinite(high):
        raise ValueError(f"axis range must be finite, got {low}..{high}")
    if high <= low:
        high = low + (abs(low) if low else 1.0)
    raw = (high - low) / max(target, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.floor(low / step) * step
    count = int(math.ceil((high - first) / step - 1e-9)) + 1
    return first + step * np.arange(count)


class _Canvas:
    """A white RGB image with a plot area mapping data (x, y) to pixels."""

    def __init__(self, size: tuple[int, int], x_range: tuple[float, float], y_range: tuple[float, float]):
        width, height = size
        if width < 200 or height < 150:
            raise ValueError(f"chart size {size} is too small; use at least (200, 150)")
        self.pixels = np.full((height, width, 3), 255, np.uint8)
        self.left, self.top = _MARGIN_LEFT, _MARGIN_TOP
        self.right, self.bottom = width - _MARGIN_RIGHT, height - _MARGIN_BOTTOM
        self.x_range, self.y_range = x_range, y_range

    def px(self, x: float, y: float) -> tuple[int, int]:
        (x0, x1), (y0, y1) = self.x_range, self.y_range
        u = self.left + (x - x0) / (x1 - x0) * (self.right - self.left)
        v = self.bottom - (y - y0) / (y1 - y0) * (self.bottom - self.top)
        return int(round(u)), int(round(v))

    def text(self, text: str, org: tuple[int, int], scale: float = 0.45, colour=_INK, anchor: str = "left") -> None:
        (w, h), _ = cv2.getTextSize(text, _FONT, scale, 1)
        x, y = org
        if anchor == "center":
            x -= w // 2
        elif anchor == "right":
            x -= w
        cv2.putText(self.pixels, text, (x, y + h // 2), _FONT, scale, colour, 1, cv2.LINE_AA)

    def vertical_text(self, text: str, centre: tuple[int, int], scale: float = 0.5) -> None:
        (w, h), base = cv2.getTextSize(text, _FONT, scale, 1)
        flat = np.full((h + base + 4, w + 4, 3), 255, np.uint8)
        cv2.putText(flat, text, (2, h + 2), _FONT, scale, _INK, 1, cv2.LINE_AA)
        patch = np.ascontiguousarray(np.rot90(flat))  # reads bottom to top
        ph, pw = patch.shape[:2]
        x0 = max(centre[0] - pw // 2, 0)
        y0 = max(centre[1] - ph // 2, 0)
        region = self.pixels[y0:y0 + ph, x0:x0 + pw]
        np.minimum(region, patch[:region.shape[0], :region.shape[1]], out=region)

    def dashed(self, start: tuple[int, int], end: tuple[int, int], colour, dash: int = 6) -> None:
        length = max(abs(end[0] - start[0]), abs(end[1] - start[1]))
        for s in range(0, length, 2 * dash):
            a = s / length
            b = min(s + dash, length) / length
            p = (int(start[0] + a * (end[0] - start[0])), int(start[1] + a * (end[1] - start[1])))
            q = (int(start[0] + b * (end[0] - start[0])), int(start[1] + b * (end[1] - start[1])))
            cv2.line(self.pixels, p, q, colour, 1, cv2.LINE_AA)

    def frame(self, title: str, x_label: str, y_label: str, y_ticks: np.ndarray, y_format: TickFormat) -> None:
        for tick in y_ticks:
            _, v = self.px(self.x_range[0], float(tick))
            cv2.line(self.pixels, (self.left, v), (self.right, v), _GRID, 1)
            self.text(y_format(float(tick)), (self.left - 6, v), anchor="right")
        cv2.rectangle(self.pixels, (self.left, self.top), (self.right, self.bottom), _INK, 1)
        width, height = self.pixels.shape[1], self.pixels.shape[0]
        self.text(title, (width // 2, 20), scale=0.6, anchor="center")
        self.text(x_label, ((self.left + self.right) // 2, height - 15), scale=0.5, anchor="center")
        self.vertical_text(y_label, (18, (self.top + self.bottom) // 2))

    def legend(self, names: Sequence[str]) -> None:
        """One row between the title and the plot, right-aligned: a colour swatch and the name per series."""
        x, y = self.right, self.top - 16
        for i, name in reversed(list(enumerate(names))):
            (w, _), _ = cv2.getTextSize(name, _FONT, 0.45, 1)
            x -= w
            self.text(name, (x, y))
            x -= 26
            cv2.line(self.pixels, (x, y), (x + 20, y), PALETTE[i % len(PALETTE)], 3, cv2.LINE_AA)
            x -= 18


def _padded_range(low: float, high: float, include_zero: bool) -> tuple[float, float]:
    if include_zero:
        low, high = min(low, 0.0), max(high, 0.0)
    if high <= low:
        return low - 1.0, high + 1.0
    return low, high + 0.05 * (high - low)


def line_chart(
    series: Mapping[str, tuple[ArrayLike, ArrayLike]],
    path: str | Path,
    title: str = "",
    x_label: str = "",
    y_label: str = "",
    marks: Sequence[tuple[float, str]] = (),
    hlines: Sequence[tuple[float, str]] = (),
    size: tuple[int, int] = (960, 540),
    y_from_zero: bool = True,
    x_format: TickFormat = _compact,
    y_format: TickFormat = _compact,
) -> Path:
    """Draw each series `name -> (x, y)` (1-D, equal length) as a line; write a PNG to `path`."""
    if not series:
        raise ValueError("line_chart needs at least one series")
    arrays = {}
    for name, (x, y) in series.items():
        xs, ys = np.asarray(x, np.float64).ravel(), np.asarray(y, np.float64).ravel()
        if xs.shape != ys.shape:
            raise ValueError(f"series {name!r}: x has {xs.size} values but y has {ys.size}")
        arrays[name] = (xs, ys)
    xs_all = np.concatenate([x for x, _ in arrays.values()] + [np.asarray([m for m, _ in marks], np.float64)])
    ys_all = np.concatenate([y for _, y in arrays.values()] + [np.asarray([h for h, _ in hlines], np.float64)])
    xs_all, ys_all = xs_all[np.isfinite(xs_all)], ys_all[np.isfinite(ys_all)]
    x_lo, x_hi = (float(xs_all.min()), float(xs_all.max())) if xs_all.size else (0.0, 1.0)
    if x_hi <= x_lo:
        x_hi = x_lo + 1.0
    y_lo, y_hi = (float(ys_all.min()), float(ys_all.max())) if ys_all.size else (0.0, 1.0)
    y_ticks = nice_ticks(*_padded_range(y_lo, y_hi, y_from_zero))
    canvas = _Canvas(size, (x_lo, x_hi), (float(y_ticks[0]), float(y_ticks[-1])))
    canvas.frame(title, x_label, y_label, y_ticks, y_format)
    for tick in nice_ticks(x_lo, x_hi, target=8):
        if x_lo <= tick <= x_hi:
            u, _ = canvas.px(float(tick), y_lo)
            canvas.text(x_format(float(tick)), (u, canvas.bottom + 14), anchor="center")
    for index, (xs, ys) in enumerate(arrays.values()):
        colour = PALETTE[index % len(PALETTE)]
        finite = np.isfinite(xs) & np.isfinite(ys)
        # split at NaNs so gaps stay gaps
        breaks = np.flatnonzero(~finite)
        for segment in np.split(np.arange(xs.size), breaks):
            segment = segment[finite[segment]]
            if segment.size == 0:
                continue
            points = np.array([canvas.px(xs[i], ys[i]) for i in segment], np.int32)
            if points.shape[0] == 1:
                cv2.circle(canvas.pixels, tuple(int(c) for c in points[0]), 2, colour, -1, cv2.LINE_AA)
            else:
                cv2.polylines(canvas.pixels, [points.reshape(-1, 1, 2)], False, colour, 2, cv2.LINE_AA)
    for row, (mark_x, label) in enumerate(marks):
        u, _ = canvas.px(float(mark_x), y_lo)
        canvas.dashed((u, canvas.top), (u, canvas.bottom), _MARK)
        (w, _), _ = cv2.getTextSize(label, _FONT, 0.38, 1)
        left_of_line = u + 3 + w > canvas.right  # keep labels near the right edge inside the plot
        canvas.text(label, (u - 3 if left_of_line else u + 3, canvas.top + 10 + 14 * (row % 4)), scale=0.38,
                    colour=_MARK, anchor="right" if left_of_line else "left")
    for line_y, label in hlines:
        _, v = canvas.px(x_lo, float(line_y))
        canvas.dashed((canvas.left, v), (canvas.right, v), _HLINE)
        canvas.text(label, (canvas.left + 6, v - 9), scale=0.4, colour=_HLINE)
    canvas.legend(list(arrays))
    return write_png(path, canvas.pixels)


def bar_chart(
    bars: Mapping[str, float] | Mapping[str, Mapping[str, float]],
    path: str | Path,
    title: str = "",
    x_label: str = "",
    y_label: str = "",
    hlines: Sequence[tuple[float, str]] = (),
    size: tuple[int, int] = (960, 540),
    y_format: TickFormat = _compact,
    value_format: TickFormat | None = _compact,
) -> Path:
    """Bars `name -> value`, or grouped bars `group -> {series -> value}`; value printed on top."""
    if not bars:
        raise ValueError("bar_chart needs at least one bar")
    grouped: dict[str, dict[str, float]] = {}
    for group, value in bars.items():
        grouped[group] = {k: float(v) for k, v in value.items()} if isinstance(value, Mapping) else {"": float(value)}
    series_names: list[str] = []
    for values in grouped.values():
        series_names += [name for name in values if name not in series_names]
    all_values = [v for values in grouped.values() for v in values.values()] + [float(h) for h, _ in hlines]
    finite = [v for v in all_values if math.isfinite(v)] or [0.0]
    y_ticks = nice_ticks(*_padded_range(min(finite), max(finite), True))
    canvas = _Canvas(size, (0.0, float(len(grouped))), (float(y_ticks[0]), float(y_ticks[-1])))
    canvas.frame(title, x_label, y_label, y_ticks, y_format)
    slot = 0.8 / len(series_names)
    for g, (group, values) in enumerate(grouped.items()):
        u, _ = canvas.px(g + 0.5, 0.0)
        canvas.text(group, (u, canvas.bottom + 14), anchor="center")
        for s, name in enumerate(series_names):
            if name not in values or not math.isfinite(values[name]):
                continue
            value = values[name]
            x0 = g + 0.1 + s * slot
            p, q = canvas.px(x0, 0.0), canvas.px(x0 + slot * 0.9, value)
            cv2.rectangle(canvas.pixels, (p[0], min(p[1], q[1])), (q[0], max(p[1], q[1])),
                          PALETTE[s % len(PALETTE)], -1)
            if value_format is not None:
                canvas.text(value_format(value), ((p[0] + q[0]) // 2, min(p[1], q[1]) - 9), scale=0.38,
                            anchor="center")
    for y, label in hlines:
        _, v = canvas.px(0.0, float(y))
        canvas.dashed((canvas.left, v), (canvas.right, v), _HLINE)
        canvas.text(label, (canvas.left + 6, v - 9), scale=0.4, colour=_HLINE)
    if series_names != [""]:
        canvas.legend(series_names)
    return write_png(path, canvas.pixels)
