"""The window at a small size: the controls keep their height (the side panel scrolls), the memory plot gives
way before the image does; long class names are elided and their shares stay in view."""
from __future__ import annotations

import numpy as np

from leanseg.gui.main_window.window import MEMORY_SHARE
from leanseg.gui.viewer.legend import NAME_ROLE, SHARE_ROLE, OverlayPanel


def test_at_1024_by_640_the_controls_keep_their_height_and_the_image_keeps_room(qtbot, make_window,
                                                                                gui_tiny_checkpoint):
    window = make_window(gui_tiny_checkpoint)
    window.resize(1440, 900)
    qtbot.waitUntil(lambda: window.size().height() == 900)
    window.resize(1024, 640)
    memory_dock = window.memory_dock
    qtbot.waitUntil(lambda: memory_dock.height() <= 640 * MEMORY_SHARE + 1)
    controls = window.controls
    for box in (controls.device, controls.engine, controls.precision, controls.memory_budget, controls.tiling):
        assert box.height() >= box.minimumSizeHint().height()
    scroll = window.docks[0].widget()
    assert scroll.widget() is controls  # a short panel scrolls instead of squashing its boxes
    assert window.viewer.width() > 0.4 * window.width()
    assert window.viewer.height() > 0.5 * window.height()


def _has_text(image, x0: int, x1: int, y0: int, y1: int) -> bool:  # type: ignore[no-untyped-def]
    """Whether any pixel in the box differs from the list's empty background (below the rows)."""
    empty = image.pixelColor(x0, image.height() - 5)
    return any(image.pixelColor(x, y) != empty for x in range(x0, x1) for y in range(y0, y1))


def test_long_class_names_are_elided_and_every_share_stays_in_view(qtbot):
    panel = OverlayPanel()
    qtbot.addWidget(panel)
    panel.resize(250, 300)
    panel.show()
    qtbot.waitExposed(panel)
    long_name = "a very long class name for the road surface markings painted on the carriageway"
    legend = panel.legend
    legend.set_classes(["sky", long_name, "car"], [(128, 128, 128), (128, 0, 0), (60, 0, 128)])
    legend.set_labels(np.array([[0, 1, 1, 2]], np.uint8))
    assert legend.horizontalScrollBar().maximum() == 0  # nothing hides behind a sideways scroll
    row = legend.item(1)
    assert row.data(SHARE_ROLE) == "50.0 %" and row.data(NAME_ROLE) == long_name
    assert long_name in row.toolTip() and "50.0 %" in row.toolTip()
    image = legend.viewport().grab().toImage()
    width = legend.viewport().width()
    for index in range(3):  # each share is painted at the row's right end, long name or short
        rect = legend.visualItemRect(legend.item(index))
        assert rect.right() < width
        assert _has_text(image, width - 30, width - 4, rect.top() + 4, rect.bottom() - 4)
