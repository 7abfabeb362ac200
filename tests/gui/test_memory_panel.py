"""The memory panel against the real MemoryMonitor: curves grow, Empty cache, Reset peak, job marks (a failed job's
too), and the engine's live tensors back at 0 after a cancelled job."""
from __future__ import annotations

import threading
from dataclasses import replace

import numpy as np
import pytest
from PySide6.QtCore import Qt

from leanseg.core.memory import MemoryMonitor, format_bytes
from leanseg.core.predict import Segmenter
from leanseg.gui.memory.panel import MemoryPanel

from .conftest import JOB_TIMEOUT_MS, write_image


def _labels_on_plot(panel: MemoryPanel) -> set[str]:
    """The texts of the labelled mark lines on the panel's plot."""
    labels = (getattr(line, "label", None) for line in panel._mark_lines)
    return {label.format for label in labels if label is not None}


@pytest.fixture
def monitor():
    monitor = MemoryMonitor("cpu", rate_hz=50.0, capacity_s=60.0)
    monitor.start()
    yield monitor
    monitor.close()


def test_curves_grow_while_the_monitor_samples(qtbot, monitor):
    panel = MemoryPanel(monitor, refresh_ms=20)
    qtbot.addWidget(panel)
    panel.show()
    curve = panel.curves["allocated"]
    qtbot.waitUntil(lambda: len(curve.xData) >= 3, timeout=10_000)
    first = len(curve.xData)
    qtbot.waitUntil(lambda: len(curve.xData) >= first + 5, timeout=10_000)
    times, allocated = curve.getOriginalDataset()
    assert np.all(np.diff(times) > 0)
    assert allocated.min() > 0  # a Python process has allocated something
    assert set(panel.curves) == {"allocated", "reserved", "engine_live"}
    assert panel.peak_line.isVisible() and panel.peak_label.text().startswith("peak ")


def test_empty_cache_calls_the_monitor_and_shows_what_it_freed(qtbot, monitor, monkeypatch):
    calls: list[int] = []
    real_empty_cache = monitor.empty_cache

    def spy() -> int:
        freed = real_empty_cache()
        calls.append(freed)
        return freed

    monkeypatch.setattr(monitor, "empty_cache", spy)
    panel = MemoryPanel(monitor, refresh_ms=20)
    qtbot.addWidget(panel)
    with qtbot.waitSignal(panel.cache_emptied, timeout=5_000) as blocker:
        qtbot.mouseClick(panel.empty_cache_button, Qt.MouseButton.LeftButton)
    assert len(calls) == 1 and blocker.args == [calls[0]]
    assert panel.freed_label.text() == f"Empty cache freed {format_bytes(calls[0])}"
    assert any(label.startswith("empty cache") for _, label in monitor.marks())


def test_reset_peak_marks_and_restarts_the_peak(qtbot, monitor):
    panel = MemoryPanel(monitor, refresh_ms=20)
    qtbot.addWidget(panel)
    qtbot.mouseClick(panel.reset_peak_button, Qt.MouseButton.LeftButton)
    assert any(label == "reset peak" for _, label in monitor.marks())
    qtbot.waitUntil(lambda: "reset peak" in _labels_on_plot(panel), timeout=5_000)


def test_window_marks_job_start_and_done_on_the_plot(qtbot, make_window, gui_tiny_checkpoint, small_image):
    window = make_window(gui_tiny_checkpoint)
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):
        window.open_image(small_image)
    labels = [label for _, label in window.monitor.marks()]
    assert "start" in labels and "done" in labels
    qtbot.waitUntil(lambda: {"start", "done"} <= _labels_on_plot(window.memory_panel), timeout=5_000)


def test_without_a_monitor_the_panel_says_so(qtbot):
    panel = MemoryPanel(None)
    qtbot.addWidget(panel)
    assert panel.source_label.text() == "no telemetry"
    assert not panel.empty_cache_button.isEnabled()


def test_engine_live_tensors_have_their_own_axis(qtbot, monitor):
    """A few MB of engine tensors beside a process heap of 100+ MB: the right axis is scaled to them."""
    from leanseg.core.memory import engine_live_bytes

    panel = MemoryPanel(monitor, refresh_ms=20)
    qtbot.addWidget(panel)
    panel.resize(900, 300)
    panel.show()
    engine_live_bytes.set(3_000_000)
    try:
        curve = panel.curves["engine_live"]
        qtbot.waitUntil(lambda: curve.yData is not None and curve.yData.max(initial=0) >= 3_000_000, timeout=10_000)
    finally:
        engine_live_bytes.set(0)
    live_top = panel.live_view.viewRange()[1][1]
    memory_top = panel.plot.getViewBox().viewRange()[1][1]
    assert 3_000_000 < live_top <= 10_000_000  # the curve spans a good part of its axis
    assert memory_top > 10 * live_top  # on the memory axis it would lie flat at 0
    assert curve in panel.live_view.addedItems and panel.plot.getPlotItem().getAxis("right").isVisible()


def _label_text_rects(panel: MemoryPanel) -> list:
    """Where the mark labels' text is drawn in the scene (each label's box less its text margin)."""
    rects = []
    for line in panel._mark_lines:
        if line.label is not None:
            margin = line.label.textItem.document().documentMargin()
            rects.append(line.label.sceneBoundingRect().adjusted(margin, margin, -margin, -margin))
    return rects


def _assert_labels_apart_inside_the_plot(panel: MemoryPanel) -> None:
    """No mark label's text covers another's, and each lies whole inside the plot (not cut off at its edge)."""
    rects = _label_text_rects(panel)
    plot_rect = panel.plot.getViewBox().sceneBoundingRect()
    for i, rect in enumerate(rects):
        assert plot_rect.contains(rect.center())
        assert rect.top() >= plot_rect.top() - 1 and rect.bottom() <= plot_rect.bottom() + 1
        for other in rects[i + 1:]:
            assert not rect.intersects(other), (rect, other)


@pytest.mark.parametrize(("height", "labels"), [
    (260, ("start", "done", "reset peak", "empty cache freed 0 B")),
    (150, ("start", "done", "reset peak")),  # a plot about 50 px high, as in the smallest memory dock
])
def test_marks_close_in_time_have_labels_that_do_not_overlap(qtbot, monitor, height, labels):
    panel = MemoryPanel(monitor, refresh_ms=20)
    qtbot.addWidget(panel)
    panel.resize(900, height)
    panel.show()
    qtbot.waitUntil(lambda: panel._x_start >= 0, timeout=10_000)
    for label in labels:
        monitor.mark(label)  # all within a few milliseconds: the same pixel on a 30 s axis
    qtbot.waitUntil(lambda: len(_labels_on_plot(panel)) == len(labels), timeout=5_000)
    _assert_labels_apart_inside_the_plot(panel)


def test_mark_labels_move_to_rows_that_fit_when_the_panel_is_lowered(qtbot, monitor):
    panel = MemoryPanel(monitor, refresh_ms=20)
    qtbot.addWidget(panel)
    panel.resize(900, 300)
    panel.show()
    qtbot.waitUntil(lambda: panel._x_start >= 0, timeout=10_000)
    for label in ("start", "done", "reset peak"):
        monitor.mark(label)
    qtbot.waitUntil(lambda: len(_labels_on_plot(panel)) == 3, timeout=5_000)
    panel.resize(900, 150)  # the rows of a 200 px plot, 30 px apart, would be 8 px apart in a 50 px one
    qtbot.waitUntil(lambda: panel.plot.getViewBox().height() < 60, timeout=5_000)
    # the labels follow the plot's new height
    qtbot.waitUntil(lambda: _assert_labels_apart_inside_the_plot(panel), timeout=5_000)


def test_a_mark_label_is_drawn_over_the_lines_that_can_cross_it(qtbot, monitor):
    """A label reaches right from its line, so only later marks' lines and the peak line can cross it: each
    label has a backdrop and stacks above those."""
    panel = MemoryPanel(monitor, refresh_ms=20)
    qtbot.addWidget(panel)
    panel.show()
    for label in ("start", "done", "start"):
        monitor.mark(label)
    qtbot.waitUntil(lambda: len(panel._mark_lines) == 3, timeout=5_000)
    heights = [line.zValue() for line in panel._mark_lines]
    assert heights == sorted(heights, reverse=True) and len(set(heights)) == 3
    assert min(heights) > max(panel.peak_line.zValue(), *(curve.zValue() for curve in panel.curves.values()))
    assert all(line.label.fill.color().alpha() > 0 for line in panel._mark_lines)


def test_an_error_mark_is_written_failed_with_what_follows_it(qtbot, monitor):
    panel = MemoryPanel(monitor, refresh_ms=20)
    qtbot.addWidget(panel)
    panel.show()
    for label in ("error", "error 3/10", "reset peak"):  # a job's end, a batch image's, and another mark
        monitor.mark(label)
    qtbot.waitUntil(lambda: len(_labels_on_plot(panel)) == 3, timeout=5_000)
    assert _labels_on_plot(panel) == {"failed", "failed 3/10", "reset peak"}


def test_the_two_peaks_say_what_they_count(qtbot, make_window, gui_tiny_checkpoint, small_image):
    window = make_window(gui_tiny_checkpoint)
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):
        window.open_image(small_image)
    job_peak = window.status_labels["peak"]
    assert job_peak.text().startswith("job peak process RSS ")
    assert "resident" in job_peak.toolTip() and "peak allocated" in job_peak.toolTip()
    assert "allocator" in window.memory_panel.peak_label.toolTip()
    assert "RSS" in window.memory_panel.peak_label.toolTip()


def test_a_failed_job_is_marked_failed(qtbot, make_window, gui_tiny_checkpoint, small_image, monkeypatch):
    window = make_window(gui_tiny_checkpoint)

    def fails(self, image, **kwargs):  # the model throws
        raise RuntimeError("shape mismatch in layer 3")

    monkeypatch.setattr(Segmenter, "segment", fails)
    with qtbot.waitSignal(window.job_ended, timeout=JOB_TIMEOUT_MS) as ended:
        window.open_image(small_image)
    assert ended.args == ["failed"]
    labels = [label for _, label in window.monitor.marks()]
    assert labels[-2:] == ["start", "error"]
    qtbot.waitUntil(lambda: {"start", "failed"} <= _labels_on_plot(window.memory_panel), timeout=5_000)


def test_a_cancelled_lean_job_leaves_no_live_tensors_on_the_chart(qtbot, make_window, gui_tiny_checkpoint, tmp_path):
    """Cancel stops the lean engine after a step (core's plan_runner): the engine's gauge goes back to 0."""
    window = make_window(gui_tiny_checkpoint)
    tiled = replace(window.controls.options(), engine="lean", tiling="fast", memory_budget=26_000_000,
                    mirror="off")
    window.controls.set_options(tiled)
    with qtbot.waitSignal(window.model_changed, timeout=JOB_TIMEOUT_MS):
        window.controller.configure(None, tiled)
    cancel_pressed = threading.Event()

    def hold_at_first_tile(job_id: int, event) -> None:  # type: ignore[no-untyped-def]
        if event.kind == "tile" and event.index == 0:  # the worker waits here until Cancel was pressed
            cancel_pressed.wait(timeout=JOB_TIMEOUT_MS / 1000)

    window.controller.worker.job_event.connect(hold_at_first_tile, Qt.ConnectionType.DirectConnection)
    window.open_image(write_image(tmp_path / "big.png", 512, 512))
    qtbot.waitUntil(lambda: window.controls.progress.format().startswith("tile 1 of "), timeout=JOB_TIMEOUT_MS)
    with qtbot.waitSignal(window.job_ended, timeout=JOB_TIMEOUT_MS) as ended:
        window.cancel_job()
        cancel_pressed.set()  # the next tile stops after its first step, which published its live bytes
    assert ended.args == ["cancelled"]
    panel = window.memory_panel
    qtbot.waitUntil(lambda: "cancelled" in _labels_on_plot(panel), timeout=5_000)
    qtbot.waitUntil(lambda: panel.curves["engine_live"].yData[-1] == 0, timeout=5_000)
