"""The window at a small size: the controls keep their height (the side panel scrolls), the memory plot gives
way before the image does."""
from __future__ import annotations

from leanseg.gui.main_window.window import MEMORY_SHARE


def test_at_1024_by_640_the_controls_keep_their_height_and_the_image_keeps_room(qtbot, make_window,
                                                                                gui_tiny_checkpoint):
    window = make_window(gui_tiny_checkpoint)
    window.resize(1440, 900)
    qtbot.waitUntil(lambda: window.size().height() == 900)
    window.resize(1024, 640)
    memory_dock = window.docks[2]
    qtbot.waitUntil(lambda: memory_dock.height() <= 640 * MEMORY_SHARE + 1)
    controls = window.controls
    for box in (controls.device, controls.engine, controls.precision, controls.memory_budget, controls.tiling):
        assert box.height() >= box.minimumSizeHint().height()
    scroll = window.docks[0].widget()
    assert scroll.widget() is controls  # a short panel scrolls instead of squashing its boxes
    assert window.viewer.width() > 0.4 * window.width()
    assert window.viewer.height() > 0.5 * window.height()
