"""The window at a small size: the controls keep their height (the side panel scrolls) and all their width, the
memory plot gives way before the image and the Segment button do (also when a dock is reopened), folding away to
the figures line where it would be lower than useful, gets its height back when the window grows or the dock is
floated, keeps a dragged height but not one a dock's move left it, and shows fewer numbers, never overlapping, and
whole axis titles; the status message takes the room the fields beside it can give; long
class names are elided and their shares stay in view."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QSize, Qt
from PySide6.QtWidgets import QStyle

from leanseg.gui.main_window.memory_dock import MEMORY_HEIGHT
from leanseg.gui.memory.panel import PLOT_MIN_HEIGHT, MemoryPanel
from leanseg.gui.viewer.last_run import LAST_RUN_LINES
from leanseg.gui.viewer.legend import NAME_ROLE, SHARE_ROLE, OverlayPanel

from .conftest import JOB_TIMEOUT_MS, LONG_RUN, tick_labels


def test_at_1024_by_640_the_controls_keep_their_height_and_the_image_keeps_room(qtbot, make_window,
                                                                                gui_tiny_checkpoint):
    window = make_window(gui_tiny_checkpoint)
    window.resize(1440, 900)
    qtbot.waitUntil(lambda: window.size().height() == 900)
    window.resize(1024, 640)
    memory_dock = window.memory_dock
    controls = window.controls
    scroll = window.docks[0].widget()
    qtbot.waitUntil(lambda: memory_dock.height() < MEMORY_HEIGHT)  # the memory plot gives way...
    progress_bottom = controls.progress.mapTo(scroll.viewport(), QPoint(0, controls.progress.height())).y()
    assert progress_bottom <= scroll.viewport().height()  # ...to the controls down to Segment and its progress
    for box in (controls.device, controls.engine, controls.precision, controls.memory_budget, controls.tiling):
        assert box.height() >= box.minimumSizeHint().height()
    assert scroll.widget() is controls  # a short panel scrolls instead of squashing its boxes
    assert window.viewer.width() > 0.4 * window.width()
    assert window.viewer.height() > 0.5 * window.height()


def _axis_titles_whole(plot) -> bool:  # type: ignore[no-untyped-def]
    """Whether the memory plot's vertical axes draw their titles whole: from top to bottom inside the plot."""
    rects = [plot.getPlotItem().getAxis(side).label.sceneBoundingRect() for side in ("left", "right")]
    return all(rect.top() >= 0 and rect.bottom() <= plot.height() for rect in rects)


def drag_memory_separator(qtbot, window, height: int) -> None:  # type: ignore[no-untyped-def]
    """Drag the separator above the memory dock with the mouse, as a user does, until the dock is `height` high."""
    dock = window.memory_dock
    extent = window.style().pixelMetric(QStyle.PixelMetric.PM_DockWidgetSeparatorExtent, None, window)
    grip = QPoint(dock.geometry().center().x(), dock.geometry().top() - (extent + 1) // 2)
    assert window.childAt(grip) is None  # the premise: the window's own separator, not a widget, is under it
    release_at = grip - QPoint(0, height - dock.height())
    qtbot.mousePress(window, Qt.MouseButton.LeftButton, pos=grip)
    qtbot.mouseMove(window, release_at)
    qtbot.waitUntil(lambda: dock.height() == height)  # QMainWindow moves the separator on a timer, button held
    qtbot.mouseRelease(window, Qt.MouseButton.LeftButton, pos=release_at)


def _window_segmenting(qtbot, make_window, checkpoint, image, width: int, height: int):  # type: ignore[no-untyped-def]
    """A main window of `width` x `height` that has segmented `image`."""
    window = make_window(checkpoint)
    window.resize(width, height)
    qtbot.waitUntil(lambda: window.size() == QSize(width, height))
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):
        window.open_image(image)
    return window


def test_the_memory_dock_gets_its_height_back_when_the_window_grows_again(qtbot, app_style, make_window,
                                                                          gui_tiny_checkpoint, small_image):
    window = _window_segmenting(qtbot, make_window, gui_tiny_checkpoint, small_image, 1280, 800)
    memory_dock = window.memory_dock
    qtbot.waitUntil(lambda: memory_dock.height() == MEMORY_HEIGHT)
    window.resize(700, 500)
    qtbot.waitUntil(lambda: memory_dock.height() < MEMORY_HEIGHT - 60)  # the premise: a low window squeezes it
    window.resize(1280, 800)
    qtbot.waitUntil(lambda: memory_dock.height() == MEMORY_HEIGHT)
    plot = window.memory_panel.plot
    qtbot.waitUntil(lambda: _axis_titles_whole(plot))
    left = plot.getPlotItem().getAxis("left")
    assert left.label.toPlainText() == "memory (MB)"  # its words back with the room
    drag_memory_separator(qtbot, window, 320)
    assert window.memory_dock_height.wanted == 320
    window.resize(1000, 600)
    qtbot.waitUntil(lambda: memory_dock.height() < 320)
    window.resize(1280, 800)
    qtbot.waitUntil(lambda: memory_dock.height() == 320)  # the height the user gave it, not a new window's


def test_at_900_by_600_the_segment_button_and_its_progress_stay_in_view(qtbot, app_style, make_window,
                                                                        gui_tiny_checkpoint, small_image):
    window = _window_segmenting(qtbot, make_window, gui_tiny_checkpoint, small_image, 900, 600)
    controls = window.controls
    viewport = window.docks[0].widget().viewport()

    def in_view(widget) -> bool:  # type: ignore[no-untyped-def]
        return widget.mapTo(viewport, QPoint(0, widget.height())).y() <= viewport.height()

    qtbot.waitUntil(lambda: in_view(controls.segment) and in_view(controls.progress))
    memory_dock = window.memory_dock
    assert memory_dock.height() < MEMORY_HEIGHT  # it gave way, as far as room() asks (or down to its least)
    assert memory_dock.height() <= max(window.memory_dock_height.room(), memory_dock.minimumSizeHint().height())
    qtbot.waitUntil(lambda: _axis_titles_whole(window.memory_panel.plot))  # a low plot: "(MB)", not "memory (M"
    window.resize(700, 500)  # lower still: the panel scrolls, and a window as low as this one keeps the dock up
    qtbot.waitUntil(lambda: window.memory_dock.height() == window.memory_dock.minimumSizeHint().height())
    window.resize(900, 600)
    qtbot.waitUntil(lambda: in_view(controls.segment) and in_view(controls.progress))


@pytest.mark.parametrize("closed", ["Memory", "Inference"])
def test_a_dock_closed_in_a_tall_window_and_reopened_in_a_low_one_leaves_segment_in_view(
        qtbot, app_style, make_window, gui_tiny_checkpoint, small_image, closed):
    window = _window_segmenting(qtbot, make_window, gui_tiny_checkpoint, small_image, 900, 800)
    dock = next(dock for dock in window.docks if dock.windowTitle() == closed)
    qtbot.waitUntil(lambda: window.memory_dock.height() == MEMORY_HEIGHT)
    dock.toggleViewAction().trigger()  # View > Memory (or Inference): closed
    qtbot.waitUntil(lambda: not dock.isVisible())
    window.resize(900, 600)
    qtbot.waitUntil(lambda: window.size() == QSize(900, 600))
    dock.toggleViewAction().trigger()  # and opened again
    qtbot.waitUntil(lambda: dock.isVisible())
    controls = window.controls
    viewport = window.docks[0].widget().viewport()

    def in_view(widget) -> bool:  # type: ignore[no-untyped-def]
        return widget.mapTo(viewport, QPoint(0, widget.height())).y() <= viewport.height()

    qtbot.waitUntil(lambda: in_view(controls.segment) and in_view(controls.progress))
    assert window.memory_dock.height() < MEMORY_HEIGHT  # the memory plot gave way again
    assert window.memory_dock_height.wanted == MEMORY_HEIGHT  # and gets its height back in a taller window
    window.resize(900, 800)
    qtbot.waitUntil(lambda: window.memory_dock.height() == MEMORY_HEIGHT)


def _segment_in_view(window) -> bool:  # type: ignore[no-untyped-def]
    """Whether the Inference panel shows Segment and its progress bar whole."""
    viewport = window.docks[0].widget().viewport()
    return all(widget.mapTo(viewport, QPoint(0, widget.height())).y() <= viewport.height()
               for widget in (window.controls.segment, window.controls.progress))


def _plot_useful_or_folded(panel: MemoryPanel) -> bool:
    return panel.plot.isHidden() or panel.plot.height() >= PLOT_MIN_HEIGHT


def test_at_800_by_500_the_memory_plot_folds_away_before_segment_leaves_view(qtbot, app_style, make_window,
                                                                            gui_tiny_checkpoint, small_image):
    window = _window_segmenting(qtbot, make_window, gui_tiny_checkpoint, small_image, 1280, 800)
    memory_dock, panel = window.memory_dock, window.memory_panel
    qtbot.waitUntil(lambda: memory_dock.height() == MEMORY_HEIGHT and panel.plot.isVisible())
    window.resize(800, 500)  # the window's least width is a little more
    qtbot.waitUntil(lambda: window.height() == 500)
    qtbot.waitUntil(lambda: _segment_in_view(window))
    assert panel.plot.isHidden()  # no 20 px plot: the figures line alone
    assert panel.now_label.isVisible() and panel.peak_label.isVisible() and panel.empty_cache_button.isVisible()
    assert memory_dock.height() == memory_dock.minimumSizeHint().height() < MEMORY_HEIGHT / 2
    window.resize(900, 600)  # the plot comes back only where it has a useful height
    qtbot.waitUntil(lambda: window.height() == 600)
    qtbot.waitUntil(lambda: _segment_in_view(window))
    assert _plot_useful_or_folded(panel)
    window.resize(1280, 800)
    qtbot.waitUntil(lambda: memory_dock.height() == MEMORY_HEIGHT and panel.plot.isVisible())
    assert panel.plot.height() > PLOT_MIN_HEIGHT


def test_the_memory_dock_floated_from_a_low_window_gets_its_height_and_plot_back(qtbot, app_style, make_window,
                                                                                gui_tiny_checkpoint, small_image):
    window = _window_segmenting(qtbot, make_window, gui_tiny_checkpoint, small_image, 1280, 800)
    memory_dock, panel = window.memory_dock, window.memory_panel
    window.resize(800, 500)
    qtbot.waitUntil(lambda: window.height() == 500)
    qtbot.waitUntil(lambda: memory_dock.height() < 150)  # the premise: squeezed
    memory_dock.setFloating(True)
    qtbot.waitUntil(lambda: memory_dock.isFloating() and memory_dock.height() >= MEMORY_HEIGHT)
    qtbot.waitUntil(lambda: panel.plot.isVisible() and panel.plot.height() > PLOT_MIN_HEIGHT)
    memory_dock.setFloating(False)  # docked again in the low window: squeezed again, Segment in view
    qtbot.waitUntil(lambda: not memory_dock.isFloating() and memory_dock.height() < 150)
    qtbot.waitUntil(lambda: _segment_in_view(window))
    assert _plot_useful_or_folded(panel)


def test_moving_the_overlay_dock_to_the_bottom_and_back_keeps_the_memory_docks_given_height(
        qtbot, app_style, make_window):
    window = make_window()
    window.resize(900, 600)
    qtbot.waitUntil(lambda: window.size() == QSize(900, 600))
    memory_dock, overlay_dock = window.memory_dock, window.docks[1]
    qtbot.waitUntil(lambda: memory_dock.height() < MEMORY_HEIGHT)  # the premise: a low window squeezes it
    window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, overlay_dock)  # as a dock dragged there
    central = window.centralWidget()
    qtbot.waitUntil(lambda: overlay_dock.geometry().top() > central.geometry().bottom())  # laid out there
    assert window.memory_dock_height.wanted == MEMORY_HEIGHT  # a layout's change, not the user's drag
    window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, overlay_dock)  # and back
    qtbot.waitUntil(lambda: overlay_dock.geometry().left() > central.geometry().right())
    assert window.memory_dock_height.wanted == MEMORY_HEIGHT
    window.resize(1280, 800)
    qtbot.waitUntil(lambda: memory_dock.height() == MEMORY_HEIGHT)  # a new window's height, nothing else


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


def test_at_1100_by_720_after_a_run_the_inference_panel_fits_its_controls(qtbot, app_style, make_window,
                                                                          gui_tiny_checkpoint, small_image):
    window = make_window(gui_tiny_checkpoint)
    window.resize(1100, 720)
    qtbot.waitUntil(lambda: window.size() == QSize(1100, 720))
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):
        window.open_image(small_image)
    controls = window.controls
    controls.show_last_run(LONG_RUN, tooltip="RSS")  # as long as the shipped model's, whatever the tiny one says
    window.resizeDocks([window.memory_dock], [240], Qt.Orientation.Vertical)  # as a new window has it
    scroll = window.docks[0].widget()
    qtbot.waitUntil(lambda: scroll.verticalScrollBar().isVisible())  # the premise: the panel scrolls
    viewport = scroll.viewport()
    assert not scroll.horizontalScrollBar().isVisible()
    assert controls.width() <= viewport.width()
    for box in (controls.open_model, controls.device, controls.engine, controls.precision, controls.memory_budget,
                controls.tiling, controls.mirror, controls.multiscale, controls.segment, controls.cancel,
                controls.progress):
        right = box.mapTo(viewport, QPoint(box.width(), 0)).x()
        assert right <= viewport.width(), box  # nothing cut off at the panel's right edge
        assert box.width() >= box.minimumSizeHint().width(), box
    assert controls.multiscale.width() >= controls.multiscale.sizeHint().width()  # "Multi-scale averaging" whole
    shown = controls.last_result.text()
    assert shown.endswith("…") and shown.count("\n") < LAST_RUN_LINES and LONG_RUN in controls.last_result.toolTip()


def test_at_1100_by_720_the_status_message_is_whole_and_the_fields_give_way(qtbot, app_style, make_window):
    window = make_window()
    window.resize(1100, 720)
    qtbot.waitUntil(lambda: window.size() == QSize(1100, 720))
    fields = window.status_labels
    for key, text in (("device", "cpu"), ("model", "camvid_mobileunet.safetensors · 11 classes"),
                      ("size", "480 × 360 · 8-bit"), ("time", "0.26 s"),
                      ("peak", "job peak process RSS 613.4 MB (+56.6 MB)")):
        fields[key].setText(text)  # what the trial's window had beside its message
    bar = window.statusBar()
    qtbot.waitUntil(lambda: all(field.shown_text() == field.text() and field.width() == field.sizeHint().width()
                                for field in fields.values()))  # no message: whole, and laid out
    message = "camvid_0016E5_07959.png: segmented in 0.26 s"
    wholes = sum(field.sizeHint().width() + 6 for field in fields.values())  # with QStatusBar's spacing
    assert bar.fontMetrics().horizontalAdvance(message) + wholes > bar.width()  # the premise: not all fit whole
    bar.showMessage(message)
    assert bar.currentMessage() == message
    fields_left = min(field.x() for field in fields.values())
    assert bar.fontMetrics().horizontalAdvance(message) <= fields_left - 8  # QStatusBar's margins: all of it shows
    squeezed = [field for field in fields.values() if field.shown_text() != field.text()]
    assert squeezed and all(field.shown_text().endswith("…") for field in squeezed)
    assert all(field.text() in field.toolTip() for field in squeezed)  # whole in the tooltip
    assert fields["peak"].text() == "job peak process RSS 613.4 MB (+56.6 MB)"
    bar.clearMessage()  # the fields have the room back
    assert all(field.shown_text() == field.text() for field in fields.values())


def test_a_low_memory_plot_shows_fewer_numbers_never_overlapping(qtbot):
    panel = MemoryPanel()
    qtbot.addWidget(panel)
    panel.plot.setYRange(0, 300e6, padding=0)  # bytes, as the monitor's
    panel.live_view.setYRange(0, 6e6, padding=0)
    item = panel.plot.getPlotItem()
    panel.show()
    qtbot.waitExposed(panel)
    for height in (110, 240):  # the dock in a 700x480 window (as low as the panel goes), and its usual height
        panel.resize(825, height)
        qtbot.waitUntil(lambda height=height: panel.height() == max(height, panel.minimumSizeHint().height()))
        if height == 110:  # the premise: an axis with room for one number, not pyqtgraph's three
            qtbot.waitUntil(lambda: item.getAxis("left").height() < 40)
        qtbot.waitUntil(lambda: _axis_titles_whole(panel.plot))  # low: the units alone, "(MB)", not "memory (M"
        for side in ("left", "right"):
            labels = tick_labels(item.getAxis(side))
            assert labels, (side, height)  # one number at least
            rects = sorted((rect for _text, rect in labels), key=lambda rect: rect.top())
            for upper, lower in zip(rects, rects[1:]):
                assert upper.bottom() <= lower.top(), (side, height, labels)
    assert len(tick_labels(item.getAxis("left"))) >= 2  # at the usual height, the usual ticks
    assert [item.getAxis(side).label.toPlainText() for side in ("left", "right")] == ["memory (MB)",
                                                                                      "engine live (MB)"]
    panel.plot.setYRange(0, 1.2e6, padding=0)  # a small model's memory: the lone number is 0.5 MB, not "0"
    panel.resize(825, 110)
    qtbot.waitUntil(lambda: item.getAxis("left").height() < 40)
    texts = [text for text, _rect in tick_labels(item.getAxis("left"))]
    assert texts and all(float(text) > 0 for text in texts), texts
