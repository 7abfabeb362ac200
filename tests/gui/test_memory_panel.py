"""The memory panel against the real MemoryMonitor: curves grow, Empty cache, Reset peak, job marks."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt

from leanseg.core.memory import MemoryMonitor, format_bytes
from leanseg.gui.memory.panel import MemoryPanel

from .conftest import JOB_TIMEOUT_MS


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
