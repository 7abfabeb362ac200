"""Line and bar charts for benchmarks, the memory lab and `plot-memory`, drawn with matplotlib.

Usage::

    from leanseg.core.plotting import bar_chart, line_chart

    line_chart({"eager": (x, y), "lean": (x2, y2)}, "/tmp/mem.png", title="Memory",
               x_label="time (s)", y_label="MB", marks=[(1.2, "start"), (3.4, "done")],
               hlines=[(512, "budget")])
    bar_chart({"eager": 810.0, "lean": 180.0}, "/tmp/peak.svg", title="Peak", y_label="MB")
    bar_chart({"1024 px": {"eager": 810.0, "lean": 180.0},      # grouped bars:
               "2048 px": {"eager": 3200.0, "lean": 260.0}},    # group -> series -> value
              "/tmp/peak_groups.png", title="Peak by size", y_label="MB")

- `series` maps a legend name to `(x, y)`, two 1-D sequences of equal length (NaNs break the line).
- `marks` are vertical dashed lines at x with a label; `hlines` are dashed lines at a value, named in
  the legend (never written over the data).
- The output type follows the path's suffix: .png, .svg or .pdf (CHART_FORMATS). Both functions
  write atomically, create the folder and return the path. Default size 960 x 540 px (at 100 dpi).

Only `matplotlib.figure.Figure` is used, never pyplot, so no global figure state and no GUI backend:
safe on worker threads and in processes without a display.
"""
from __future__ import annotations

import io
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .io.outputs import atomic_write_bytes

if TYPE_CHECKING:  # matplotlib is imported when a chart is drawn: it costs about a second at start-up
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

ArrayLike = Sequence[float] | np.ndarray
TickFormat = Callable[[float], str]

CHART_FORMATS = ("png", "svg", "pdf")
CHART_MARK = "leanseg chart"  # in every chart's metadata (PNG Software, SVG/PDF Creator): `drawn_by_leanseg`
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf"]  # matplotlib's tab10, in its order
_LINE_STYLES = ("solid", "dashed", "dotted")  # what tells series apart once the ten colours come round again
_MARK = "#5a5a5a"
_HLINE_STYLES = ((0, (6, 3)), (0, (2, 2)), (0, (8, 2, 2, 2)))  # dashes that tell bound lines apart
_DPI = 100


def _compact(value: float) -> str:
    return f"{value:.4g}"


def chart_format(path: str | Path) -> str:
    """'png', 'svg' or 'pdf' from the path's suffix; ValueError naming the valid ones."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in CHART_FORMATS:
        raise ValueError(f"{path}: cannot tell the chart type from {('.' + suffix) if suffix else 'no suffix'}; "
                         f"end the name in {', '.join('.' + f for f in CHART_FORMATS)}")
    return suffix


def _figure(size: tuple[int, int]) -> Figure:
    from matplotlib.figure import Figure

    width, height = size
    if width < 200 or height < 150:
        raise ValueError(f"chart size {size} is too small; use at least (200, 150)")
    return Figure(figsize=(width / _DPI, height / _DPI), dpi=_DPI, layout="constrained")


def save_figure(figure: Figure, path: str | Path) -> Path:
    """Write `figure` to `path` (type from its suffix) atomically, marked as leanseg's (`drawn_by_leanseg`);
    returns the path."""
    import matplotlib

    kind = chart_format(path)
    buffer = io.BytesIO()
    metadata = {"png": {"Software": CHART_MARK}, "svg": {"Creator": CHART_MARK}, "pdf": {"Creator": CHART_MARK}}
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "leanseg"}):  # SVG text stays text
        figure.savefig(buffer, format=kind, dpi=_DPI, facecolor="white", metadata=metadata[kind])
    return atomic_write_bytes(path, buffer.getvalue())


def drawn_by_leanseg(path: str | Path) -> bool:
    """Whether the existing file `path` is a chart leanseg drew (its metadata carries CHART_MARK): one a command
    may replace. Charts are small; the whole file is read."""
    try:
        return CHART_MARK.encode() in Path(path).read_bytes()
    except OSError:
        return False


def _tick_formatter(axis: object, fmt: TickFormat) -> None:
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda value, _pos: fmt(float(value))))  # type: ignore[attr-defined]


def _draw_hlines(ax: Axes, hlines: Sequence[tuple[float, str]], vertical: bool = False) -> None:
    for i, (value, label) in enumerate(hlines):
        draw = ax.axvline if vertical else ax.axhline
        draw(float(value), color=PALETTE[3], linestyle=_HLINE_STYLES[i % len(_HLINE_STYLES)], linewidth=1.2,
             label=label)


def _draw_marks(ax: Axes, marks: Sequence[tuple[float, str]], x_range: tuple[float, float]) -> None:
    """Dashed vertical lines; labels in four staggered rows along the top, kept inside the plot."""
    transform = ax.get_xaxis_transform()  # x in data, y in axes fraction
    x_lo, x_hi = x_range
    for row, (x, label) in enumerate(marks):
        ax.axvline(float(x), color=_MARK, linestyle=(0, (4, 4)), linewidth=0.8)
        near_right = x_hi > x_lo and (float(x) - x_lo) / (x_hi - x_lo) > 0.8
        ax.text(float(x), 0.97 - 0.055 * (row % 4), f" {label} ", transform=transform, fontsize=7, color=_MARK,
                ha="right" if near_right else "left", va="top", clip_on=True)


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
    """Draw each series `name -> (x, y)` (1-D, equal length) as a line; write the chart to `path`."""
    if not series:
        raise ValueError("line_chart needs at least one series")
    arrays = {}
    for name, (x, y) in series.items():
        xs, ys = np.asarray(x, np.float64).ravel(), np.asarray(y, np.float64).ravel()
        if xs.shape != ys.shape:
            raise ValueError(f"series {name!r}: x has {xs.size} values but y has {ys.size}")
        arrays[name] = (xs, ys)
    chart_format(path)  # refuse a bad suffix before drawing
    figure = _figure(size)
    ax = figure.add_subplot()
    for index, (name, (xs, ys)) in enumerate(arrays.items()):
        ax.plot(xs, ys, color=PALETTE[index % len(PALETTE)], linewidth=2, label=name,  # past ten: dashed, dotted
                linestyle=_LINE_STYLES[index // len(PALETTE) % len(_LINE_STYLES)],
                marker="o" if xs.size == 1 else None, markersize=3)
    finite_x = np.concatenate([xs[np.isfinite(xs)] for xs, _ in arrays.values()] + [np.asarray([m for m, _ in marks])])
    x_range = (float(finite_x.min()), float(finite_x.max())) if finite_x.size else (0.0, 1.0)
    _draw_marks(ax, marks, x_range)
    _draw_hlines(ax, hlines)
    if y_from_zero:
        low, high = ax.get_ylim()
        ax.set_ylim(min(low, 0.0), max(high, 0.0) if high > 0 or low < 0 else 1.0)
    ax.set(title=title, xlabel=x_label, ylabel=y_label)
    ax.grid(True, color="#e1e1e1", linewidth=0.8)
    _tick_formatter(ax.xaxis, x_format)
    _tick_formatter(ax.yaxis, y_format)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    return save_figure(figure, path)


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
    horizontal: bool = False,
) -> Path:
    """Bars `name -> value`, or grouped bars `group -> {series -> value}`, each value written at its end.

    `horizontal` lays the bars across with the names on the left, one row each (long names never
    overlap); `y_label` then names the value axis, which runs across, and `hlines` become vertical lines.
    """
    if not bars:
        raise ValueError("bar_chart needs at least one bar")
    grouped: dict[str, dict[str, float]] = {}
    for group, value in bars.items():
        grouped[group] = {k: float(v) for k, v in value.items()} if isinstance(value, Mapping) else {"": float(value)}
    series_names: list[str] = []
    for values in grouped.values():
        series_names += [name for name in values if name not in series_names]
    chart_format(path)
    figure = _figure(size)
    ax = figure.add_subplot()
    slot = 0.8 / len(series_names)
    positions = np.arange(len(grouped), dtype=np.float64)
    draw = ax.barh if horizontal else ax.bar
    for s, name in enumerate(series_names):
        offsets = positions - 0.4 + slot * (s + 0.5)
        heights = [grouped[group].get(name, math.nan) for group in grouped]
        shown = [(o, v) for o, v in zip(offsets, heights) if math.isfinite(v)]
        if not shown:
            continue
        container = draw([o for o, _ in shown], [v for _, v in shown], slot * 0.9, color=PALETTE[s % len(PALETTE)],
                         label=name or None)
        if value_format is not None:
            ax.bar_label(container, labels=[value_format(v) for _, v in shown], padding=2, fontsize=8)
    _draw_hlines(ax, hlines, vertical=horizontal)
    if horizontal:
        ax.set_yticks(positions, list(grouped))
        ax.invert_yaxis()  # the first bar on top, as it reads
        ax.set(title=title, xlabel=y_label, ylabel=x_label)
        ax.grid(True, axis="x", color="#e1e1e1", linewidth=0.8)
        _tick_formatter(ax.xaxis, y_format)
        ax.margins(x=0.12)  # room for the value labels
    else:
        ax.set_xticks(positions, list(grouped))
        ax.set(title=title, xlabel=x_label, ylabel=y_label)
        ax.grid(True, axis="y", color="#e1e1e1", linewidth=0.8)
        _tick_formatter(ax.yaxis, y_format)
        ax.margins(y=0.1)
    ax.set_axisbelow(True)
    if series_names != [""] or hlines:
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    return save_figure(figure, path)
