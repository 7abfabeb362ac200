"""Where the memory chart's mark labels go: rows across the plot, written so that no label covers another.

Marks are laid out oldest first, each on the top row where the labels before it have ended. A mark that finds no
row joins the label placed last when that is SAME_INSTANT_PX before it ("done · start", up to MERGED_MAX texts);
otherwise it gets no label (its line and tooltip stay). Marks left of the time axis take no row: their label
would be cut at the axis.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

SAME_INSTANT_PX = 4  # a mark that finds no free row joins the label of one this close before it ("done · start")
MERGED = " · "  # between the texts of marks that share a label
MERGED_MAX = 3  # the most texts one label carries; a text it has already is not repeated


@dataclass
class PlacedLabel:
    """A label on `row` (0: the top one) for the marks at `marks` (indices, the first its own), with their
    `texts` (each once, at most MERGED_MAX)."""

    row: int
    texts: list[str]
    marks: list[int] = field(default_factory=list)

    @property
    def text(self) -> str:
        return MERGED.join(self.texts)


def place_labels(marks: Sequence[tuple[float, str]], rows: int, x_start: float, seconds_per_px: float,
                 width_px: Callable[[str], float]) -> dict[int, PlacedLabel]:
    """The labels to show for `marks` ((time in s, text), oldest first) on `rows` rows of a plot whose time axis
    starts at `x_start`, `seconds_per_px` wide per pixel; `width_px(text)` is the room a label takes, a gap to
    the next included. Keyed by the index of the mark that owns the label; a mark not in it shows no label."""
    row_ends = [float("-inf")] * rows  # time where the last label of each row ends
    placed: dict[int, PlacedLabel] = {}
    last = -1  # the mark whose label was placed last
    for index, (time, text) in enumerate(marks):
        if time < x_start:
            continue
        free = [row for row, end in enumerate(row_ends) if end <= time]
        if free:
            last = index
            placed[index] = PlacedLabel(free[0], [text], [index])
        elif last >= 0 and time - marks[last][0] <= SAME_INSTANT_PX * seconds_per_px:
            joined = placed[last]  # the label placed last ends its row, so it may grow
            joined.marks.append(index)
            if text not in joined.texts and len(joined.texts) < MERGED_MAX:
                joined.texts.append(text)
        else:
            continue
        label = placed[last]
        row_ends[label.row] = marks[last][0] + width_px(label.text) * seconds_per_px
    return placed
