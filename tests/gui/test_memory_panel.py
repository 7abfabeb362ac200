"""The memory panel against the real MemoryMonitor: curves grow, Empty cache, Reset peak, job marks (a failed job's
too), and the engine's live tensors back at 0 after a cancelled job; mark labels that never cover each other, on a
monitor whose clock the test moves."""
from __future__ import annotations

import threading
from dataclasses import replace

import numpy as np
import pytest
from PySide6.QtCore import QEvent, QPointF, Qt
from PySide6.QtGui import QHelpEvent
from PySide6.QtWidgets import QApplication, QToolTip

from leanseg.core.memory import MemoryMonitor, format_bytes
from leanseg.core.predict import Segmenter
from leanseg.gui.memory.mark_labels import MERGED
from leanseg.gui.memory.panel import MARK_ROWS, MemoryPanel

from .conftest import JOB_TIMEOUT_MS, write_image


def _shown_labels(panel: MemoryPanel) -> list:  # type: ignore[type-arg]
    """The mark labels the panel's plot shows now."""
    labels = (getattr(line, "label", None) for line in panel._mark_lines)
    return [label for label in labels if label is not None and label.isVisible()]


def _labels_on_plot(panel: MemoryPanel) -> set[str]:
    """The texts the plot's mark labels show, one for each mark ("done · start" is two)."""
    return {text for label in _shown_labels(panel) for text in label.toPlainText().split(MERGED)}


class SteppedMonitor:
    """A monitor whose clock the test moves (`now`), with marks where the test puts them."""

    source = "test clock"

    def __init__(self) -> None:
        self.now = 1.0
        self._marks: list[tuple[float, str]] = []

    def snapshot(self) -> dict[str, np.ndarray]:
        times = np.arange(0.0, self.now + 1e-9, 0.1)
        flat = np.full(len(times), 50e6)
        return {"time": times, "allocated": flat, "reserved": flat, "engine_live": np.zeros(len(times)),
                "peak": flat}

    def marks(self) -> list[tuple[float, str]]:
        return list(self._marks)

    def mark(self, label: str, at: float | None = None) -> None:
        """Mark `at` seconds, or now; a mark at the time of the one before comes a microsecond after it."""
        time = self.now if at is None else at
        if self._marks and time <= self._marks[-1][0]:
            time = self._marks[-1][0] + 1e-6
        self._marks.append((time, label))

    def reset_peak(self) -> None:
        pass

    def empty_cache(self) -> int:
        return 0


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
    """Where the shown mark labels' text is drawn in the scene (each label's box less its text margin)."""
    rects = []
    for label in _shown_labels(panel):
        margin = label.textItem.document().documentMargin()
        rects.append(label.sceneBoundingRect().adjusted(margin, margin, -margin, -margin))
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
    (150, ("start", "done", "reset peak")),  # about the least panel with a plot (PLOT_MIN_HEIGHT)
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


def _stepped_panel(qtbot, width: int, height: int) -> tuple[MemoryPanel, SteppedMonitor]:  # type: ignore[no-untyped-def]
    """A shown panel of `width` x `height` on a SteppedMonitor, refreshed by the test alone."""
    monitor = SteppedMonitor()
    panel = MemoryPanel(monitor, refresh_ms=600_000)  # type: ignore[arg-type]
    qtbot.addWidget(panel)
    panel.resize(width, height)
    panel.show()
    qtbot.waitExposed(panel)
    qtbot.waitUntil(lambda: panel.plot.getViewBox().width() > width - 200)
    return panel, monitor


@pytest.mark.parametrize("width", [1400, 880])  # the plot of a 1440 px window and of a 900 px one
def test_seven_quick_jobs_leave_labels_that_never_cover_each_other(qtbot, width):
    """The review's case: seven small images, one after another, 14 marks in under a second."""
    panel, monitor = _stepped_panel(qtbot, width, 240)
    monitor.now = 5.0
    times = [2.4 + 0.065 * index for index in range(14)]
    for index, time in enumerate(times):
        monitor.mark("start" if index % 2 == 0 else "done", at=time)
    panel.refresh()
    assert len(panel._mark_lines) == 14
    _assert_labels_apart_inside_the_plot(panel)
    assert len(_shown_labels(panel)) < 14  # the premise: not all 14 fit, some lines stand alone
    assert _labels_on_plot(panel) == {"start", "done"}
    for index, (line, time) in enumerate(zip(panel._mark_lines, times)):  # each mark's label, there to read
        assert line.toolTip() == f"{'start' if index % 2 == 0 else 'done'} at {time:.2f} s"
    merged = [label for label in _shown_labels(panel) if MERGED in label.toPlainText()]
    assert merged and all(label.toolTip().count("\n") >= 1 for label in merged)  # a shared label lists its marks
    alone = panel._mark_lines[-1]
    assert not alone.label.isVisible()  # the premise: the last mark has no label of its own
    assert _tooltip_at(panel, panel.plot.getViewBox().mapViewToScene(QPointF(alone.value(), 1e6))) \
        == f"done at {times[-1]:.2f} s"  # hovering its line says what it was


def _tooltip_at(panel: MemoryPanel, scene_point: QPointF) -> str:
    """The tooltip the plot shows for the mouse resting at `scene_point`."""
    view_point = panel.plot.mapFromScene(scene_point)
    viewport = panel.plot.viewport()
    QApplication.sendEvent(viewport, QHelpEvent(QEvent.Type.ToolTip, view_point, viewport.mapToGlobal(view_point)))
    return QToolTip.text()


def test_labels_that_would_collide_in_a_lowered_plot_hide_and_come_back(qtbot):
    panel, monitor = _stepped_panel(qtbot, 900, 300)
    texts = ["start", "done", "reset peak", "cancelled"]
    for text in texts:
        monitor.mark(text, at=0.5)  # the same instant: a row each
    panel.refresh()
    assert sorted(label.toPlainText() for label in _shown_labels(panel)) == sorted(texts)
    _assert_labels_apart_inside_the_plot(panel)
    panel.resize(900, panel.minimumSizeHint().height())  # a plot of about 40 px: rows for two labels
    qtbot.waitUntil(lambda: panel.plot.getViewBox().height() < 50)
    assert len(panel._row_heights()) < len(texts)  # the premise: fewer rows than labels
    _assert_labels_apart_inside_the_plot(panel)
    assert _labels_on_plot(panel) == set(texts)  # those with no row joined the label beside them
    panel.resize(900, 300)
    qtbot.waitUntil(lambda: panel.plot.getViewBox().height() > 150)
    assert sorted(label.toPlainText() for label in _shown_labels(panel)) == sorted(texts)  # each on its own again
    _assert_labels_apart_inside_the_plot(panel)


def test_marks_scrolled_off_the_left_give_up_their_labels_and_rows(qtbot):
    panel, monitor = _stepped_panel(qtbot, 900, 300)
    monitor.now = 17.8
    early = ["start", "done", "reset peak", "cancelled"]
    for text in early:
        monitor.mark(text, at=17.0)  # all four rows, each label a second or more long on this axis
    monitor.mark("failed", at=17.6)  # 16 px on: no row left for it
    panel.refresh()
    assert panel._x_start == 0.0
    late_line = panel._mark_lines[-1]
    assert not late_line.label.isVisible()  # the premise
    monitor.now = 40.0  # the time axis jumps to 17.5 - 47.5 s: the first four marks are left of it
    panel.refresh()
    assert panel._x_start > 17.0
    assert not any(line.label.isVisible() for line in panel._mark_lines[:4])  # no label cut at the axis
    assert late_line.label.isVisible() and late_line.label.orthoPos == MARK_ROWS[0]  # on the top row, freed
    _assert_labels_apart_inside_the_plot(panel)
