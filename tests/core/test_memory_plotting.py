"""core.plotting: charts are real PNGs with the series drawn in their colours."""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from leanseg.core.plotting import PALETTE, bar_chart, line_chart, nice_ticks


def _read_rgb(path: Path) -> np.ndarray:
    pixels = cv2.imread(str(path), cv2.IMREAD_COLOR)
    assert pixels is not None, f"{path} is not a readable image"
    return cv2.cvtColor(pixels, cv2.COLOR_BGR2RGB)


def _count_colour(pixels: np.ndarray, rgb: tuple[int, int, int]) -> int:
    return int(np.all(pixels == np.array(rgb, np.uint8), axis=-1).sum())


def test_nice_ticks_cover_the_range_with_round_steps() -> None:
    ticks = nice_ticks(0.0, 437.0)
    assert ticks[0] <= 0.0 and ticks[-1] >= 437.0
    steps = np.diff(ticks)
    assert np.allclose(steps, steps[0]) and steps[0] in (50.0, 100.0)


def test_line_chart_draws_each_series_marks_and_hlines(tmp_path: Path) -> None:
    t = np.linspace(0, 10, 100)
    out = line_chart({"allocated": (t, t * 10), "reserved": (t, np.full_like(t, 120.0))},
                     tmp_path / "sub" / "chart.png", title="Memory", x_label="time (s)", y_label="MB",
                     marks=[(2.0, "start"), (8.0, "done")], hlines=[(90.0, "budget")], size=(640, 400))
    pixels = _read_rgb(out)
    assert pixels.shape == (400, 640, 3)
    assert _count_colour(pixels, PALETTE[0]) > 200  # the rising line
    assert _count_colour(pixels, PALETTE[1]) > 200  # the flat line
    assert not list(out.parent.glob(".*.tmp")), "atomic write left a temp file"


def test_line_chart_accepts_nan_gaps_and_a_single_point(tmp_path: Path) -> None:
    y = np.array([1.0, 2.0, np.nan, 4.0, 5.0])
    line_chart({"gappy": (np.arange(5), y), "one": ([2.0], [3.0])}, tmp_path / "gaps.png")
    assert _read_rgb(tmp_path / "gaps.png").shape == (540, 960, 3)


def test_line_chart_rejects_mismatched_series(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'bad'.*3 values.*2"):
        line_chart({"bad": ([1, 2, 3], [1, 2])}, tmp_path / "bad.png")
    with pytest.raises(ValueError, match="at least one series"):
        line_chart({}, tmp_path / "none.png")


def test_bar_chart_single_and_grouped(tmp_path: Path) -> None:
    single = _read_rgb(bar_chart({"eager": 810.0, "lean": 180.0}, tmp_path / "single.png", title="Peak",
                                 y_label="MB"))
    assert _count_colour(single, PALETTE[0]) > 1000  # both bars in the first colour
    grouped = _read_rgb(bar_chart({"1024": {"eager": 810.0, "lean": 180.0}, "2048": {"eager": 3200.0}},
                                  tmp_path / "grouped.png", hlines=[(1000.0, "budget")]))
    eager, lean = _count_colour(grouped, PALETTE[0]), _count_colour(grouped, PALETTE[1])
    assert eager > 4 * lean > 0  # eager bars are much taller than the single lean bar
