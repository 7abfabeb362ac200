"""A model without a card (or a checkpoint without colours) is drawn with the fixed default palette:
every class tells apart from every other, and the same index keeps its colour."""
from __future__ import annotations

import itertools

import pytest

from leanseg.core.model.card import default_palette
from leanseg.core.model.checkpoint import default_info
from leanseg.core.model.config import MobileUNetConfig


@pytest.mark.parametrize("count", [2, 5, 11, 20])
def test_no_two_classes_look_alike(count: int) -> None:
    colours = default_palette(count)
    assert len(colours) == count and all(0 <= c <= 255 for colour in colours for c in colour)
    closest = min(sum((a - b) ** 2 for a, b in zip(x, y)) ** 0.5 for x, y in itertools.combinations(colours, 2))
    assert closest >= 50, closest  # RGB distance: the random palette it replaced had pairs 28 apart at 12


def test_a_class_keeps_its_colour_whatever_the_count() -> None:
    assert default_palette(20)[:11] == default_palette(11)


def test_checkpoints_without_colours_use_the_same_palette() -> None:
    info = default_info(MobileUNetConfig(num_classes=7))
    assert info.class_colours == default_palette(7)
