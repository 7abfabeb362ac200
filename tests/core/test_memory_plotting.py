"""core.plotting (matplotlib): charts are real PNG / SVG / PDF files with the series drawn in their colours."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import cv2
import numpy as np
import pytest

from leanseg.core.plotting import PALETTE, bar_chart, chart_format, line_chart


def _read_rgb(path: Path) -> np.ndarray:
    pixels = cv2.imread(str(path), cv2.IMREAD_COLOR)
    assert pixels is not None, f"{path} is not a readable image"
    return cv2.cvtColor(pixels, cv2.COLOR_BGR2RGB)


def _count_colour(pixels: np.ndarray, hex_colour: str, tolerance: int = 8) -> int:
    rgb = np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)], np.int16)
    return int((np.abs(pixels.astype(np.int16) - rgb).max(axis=-1) <= tolerance).sum())


def test_line_chart_draws_each_series_marks_and_hlines(tmp_path: Path) -> None:
    t = np.linspace(0, 10, 100)
    out = line_chart({"allocated": (t, t * 10), "reserved": (t, np.full_like(t, 120.0))},
                     tmp_path / "sub" / "chart.png", title="Memory", x_label="time (s)", y_label="MB",
                     marks=[(2.0, "start"), (8.0, "done")], hlines=[(90.0, "budget")], size=(640, 400))
    pixels = _read_rgb(out)
    assert pixels.shape == (400, 640, 3)
    assert _count_colour(pixels, PALETTE[0]) > 200  # the rising line
    assert _count_colour(pixels, PALETTE[1]) > 200  # the flat line
    assert _count_colour(pixels, PALETTE[3], tolerance=60) > 100  # the budget line (thin, antialiased)
    assert not list(out.parent.glob(".*.tmp")), "atomic write left a temp file"


def test_svg_keeps_text_as_text_and_pdf_is_a_pdf(tmp_path: Path) -> None:
    t = np.linspace(0, 1, 20)
    svg = line_chart({"allocated": (t, t)}, tmp_path / "chart.svg", title="Memory on cpu",
                     marks=[(0.5, "tile 1/2")], hlines=[(0.8, "budget")])
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")
    texts = " ".join(t.text or "" for t in root.iter() if t.tag.endswith("text"))
    assert "Memory on cpu" in texts and "tile 1/2" in texts and "budget" in texts and "allocated" in texts
    pdf = bar_chart({"eager": 810.0, "lean": 180.0}, tmp_path / "peak.pdf", title="Peak")
    assert pdf.read_bytes().startswith(b"%PDF")


def test_chart_type_comes_from_the_suffix(tmp_path: Path) -> None:
    assert [chart_format(f"x.{s}") for s in ("png", "SVG", "pdf")] == ["png", "svg", "pdf"]
    with pytest.raises(ValueError, match=r"chart\.jpg.*\.png, \.svg, \.pdf"):
        line_chart({"a": ([0, 1], [0, 1])}, tmp_path / "chart.jpg")
    assert not (tmp_path / "chart.jpg").exists()


def test_line_chart_accepts_nan_gaps_and_a_single_point(tmp_path: Path) -> None:
    y = np.array([1.0, 2.0, np.nan, 4.0, 5.0])
    line_chart({"gappy": (np.arange(5), y), "one": ([2.0], [3.0])}, tmp_path / "gaps.png")
    assert _read_rgb(tmp_path / "gaps.png").shape == (540, 960, 3)


def test_line_chart_rejects_mismatched_series(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'bad'.*3 values.*2"):
        line_chart({"bad": ([1, 2, 3], [1, 2])}, tmp_path / "bad.png")
    with pytest.raises(ValueError, match="at least one series"):
        line_chart({}, tmp_path / "none.png")


def test_bar_chart_single_grouped_and_horizontal(tmp_path: Path) -> None:
    single = _read_rgb(bar_chart({"eager": 810.0, "lean": 180.0}, tmp_path / "single.png", title="Peak",
                                 y_label="MB"))
    assert _count_colour(single, PALETTE[0]) > 1000  # both bars in the first colour
    grouped = _read_rgb(bar_chart({"1024": {"eager": 810.0, "lean": 180.0}, "2048": {"eager": 3200.0}},
                                  tmp_path / "grouped.png", hlines=[(1000.0, "budget")]))
    eager, lean = _count_colour(grouped, PALETTE[0]), _count_colour(grouped, PALETTE[1])
    assert eager > 4 * lean > 0  # eager bars are much taller than the single lean bar
    across = _read_rgb(bar_chart({"a long configuration name": 100.0, "short": 25.0}, tmp_path / "across.png",
                                 horizontal=True))
    blue = np.all(np.abs(across.astype(np.int16) - (31, 119, 180)) <= 8, axis=-1)
    rows, cols = np.nonzero(blue)
    assert cols.max() - cols.min() > rows.max() - rows.min()  # the long bar runs across


def test_profile_writes_svg_charts_with_chart_format(tmp_path: Path) -> None:
    from leanseg.core.profile import write_lab
    from leanseg.core.profile.lab import LabResult

    result = LabResult("tiny", 32, "cpu", [{"name": "eval no_grad", "peak_bytes": 5_000_000, "seconds": 0.1},
                                           {"name": "engine fp32", "peak_bytes": 2_000_000, "seconds": 0.2}])
    written = write_lab(result, tmp_path, chart_format="svg")
    assert sorted(p.name for p in written) == ["memory_lab.json", "memory_lab_peak.svg", "memory_lab_time.svg"]
    assert ET.parse(tmp_path / "memory_lab_peak.svg").getroot().tag.endswith("svg")


def test_series_past_the_ten_colours_are_dashed_not_lookalikes(tmp_path: Path) -> None:
    x = np.arange(3.0)
    ten = {f"s{i}": (x, x + i) for i in range(10)}
    svg = line_chart(ten, tmp_path / "ten.svg")
    assert "stroke-dasharray" not in svg.read_text()  # ten series: one colour each, all solid
    twelve = line_chart({**ten, "s10": (x, x + 10), "s11": (x, x + 11)}, tmp_path / "twelve.svg")
    dashed = [e for e in ET.parse(twelve).getroot().iter() if "stroke-dasharray" in (e.get("style") or "")]
    assert len(dashed) == 4  # the two series that reuse a colour, each as a line and in the legend
