"""The memory chart's mark-label layout on its own: rows, merging of marks at one instant, marks with no room."""
from __future__ import annotations

from leanseg.gui.memory.mark_labels import MERGED_MAX, place_labels


def _width(text: str) -> float:
    return 10.0 * len(text)  # px: a fixed-pitch stand-in for the font's metrics


def test_labels_take_the_top_free_row_and_never_share_a_row_span() -> None:
    marks = [(0.0, "start"), (0.1, "done"), (0.2, "start"), (10.0, "done")]
    placed = place_labels(marks, rows=3, x_start=0.0, seconds_per_px=0.01, width_px=_width)
    assert {index: label.row for index, label in placed.items()} == {0: 0, 1: 1, 2: 2, 3: 0}
    spans = [(marks[i][0], marks[i][0] + _width(label.text) * 0.01, label.row) for i, label in placed.items()]
    for a in spans:
        for b in spans:
            assert a is b or a[2] != b[2] or a[1] <= b[0] or b[1] <= a[0]


def test_a_mark_with_no_row_joins_one_at_the_same_instant_else_goes_unlabelled() -> None:
    marks = [(0.0, "start"), (0.0, "done"), (0.02, "start"), (0.5, "reset peak")]
    placed = place_labels(marks, rows=1, x_start=0.0, seconds_per_px=0.01, width_px=_width)
    assert list(placed) == [0]
    assert placed[0].text == "start · done" and placed[0].marks == [0, 1, 2]  # 'start' is not written twice
    many = [(0.0, f"mark {i}") for i in range(6)]
    joined = place_labels(many, rows=1, x_start=0.0, seconds_per_px=0.01, width_px=_width)[0]
    assert len(joined.texts) == MERGED_MAX and joined.marks == list(range(6))


def test_marks_left_of_the_axis_take_no_row() -> None:
    marks = [(1.0, "start"), (2.0, "done"), (31.0, "start")]
    placed = place_labels(marks, rows=1, x_start=1.5, seconds_per_px=0.5, width_px=_width)
    assert list(placed) == [1, 2] and placed[1].row == 0 and placed[2].row == 0
