"""A file that cannot be opened while another image is shown: the image shown before stays, with its labels and
the status bar's fields about it, and every message says the file was not opened and which image is still shown."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
from PySide6.QtCore import Qt

from .conftest import JOB_TIMEOUT_MS, write_image


def _broken_png(tmp_path: Path) -> Path:
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n not really a png")
    return bad


def _fields(window) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {key: label.text() for key, label in window.status_labels.items()}


def test_a_file_that_fails_to_open_names_the_image_still_shown_everywhere(qtbot, make_window, gui_tiny_checkpoint,
                                                                          tmp_path, small_image):
    window = make_window(gui_tiny_checkpoint)
    window.resize(1280, 800)
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS) as segmented:
        window.open_image(small_image)
    result = segmented.args[0]
    before = _fields(window)
    with qtbot.waitSignal(window.job_ended, timeout=JOB_TIMEOUT_MS) as ended:
        window.open_image(_broken_png(tmp_path))
    assert ended.args == ["failed"]
    # what is shown: small.png and its labels, as before, and the title names it
    assert window.image.path == small_image and window.windowTitle().startswith("small.png")
    np.testing.assert_array_equal(window.viewer.labels, result.labels)
    assert window.viewer.overlay_item.isVisible() and not window.viewer.placeholder.isVisible()
    # the status bar's size, time and peak are still about it: its own run, not a run that failed
    assert _fields(window) == before and before["time"] == f"{result.seconds:.2f} s" and before["size"]
    # and nothing says a run failed: the file was not opened, and small.png is named as still shown
    assert window.controls.progress.format() == "not opened"
    message = window.statusBar().currentMessage()
    assert message.startswith("broken.png could not be opened; still showing small.png · truncated PNG"), message
    reason = window.controls.last_result.text()
    assert reason.startswith("Could not open the image") and reason.endswith("Still showing small.png.")
    assert "broken.png" in reason and window.controls.last_result.property("failed")
    assert window.error_box is not None and window.error_box.text().endswith("Still showing small.png.")
    assert window.statusBar().toolTip() == window.error_box.text()  # the whole of a cut line


def test_after_a_cancelled_run_a_failed_open_shows_no_older_runs_time(qtbot, make_window, gui_tiny_checkpoint,
                                                                      tmp_path, small_image):
    window = make_window(gui_tiny_checkpoint)
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):
        window.open_image(small_image)
    assert window.status_labels["time"].text()
    cancel_pressed = threading.Event()

    def hold_at_start(job_id: int, event) -> None:  # type: ignore[no-untyped-def]
        if event.kind == "start":  # on the worker: wait until Cancel was pressed
            cancel_pressed.wait(timeout=JOB_TIMEOUT_MS / 1000)

    window.controller.worker.job_event.connect(hold_at_start, Qt.ConnectionType.DirectConnection)
    other = write_image(tmp_path / "other.png", 64, 80, seed=1)
    try:
        with qtbot.waitSignal(window.image_shown, timeout=JOB_TIMEOUT_MS):
            window.open_image(other)
        with qtbot.waitSignal(window.job_ended, timeout=JOB_TIMEOUT_MS) as ended:
            window.cancel_job()
            cancel_pressed.set()
    finally:
        cancel_pressed.set()
        window.controller.worker.job_event.disconnect(hold_at_start)
    assert ended.args == ["cancelled"] and window.viewer.labels is None
    assert window.status_labels["time"].text() == "" and window.status_labels["peak"].text() == ""  # not small.png's
    with qtbot.waitSignal(window.job_ended, timeout=JOB_TIMEOUT_MS):
        window.open_image(_broken_png(tmp_path))
    assert window.status_labels["size"].text().startswith("80 × 64")  # other.png's, which is still shown
    assert window.status_labels["time"].text() == "" and window.status_labels["peak"].text() == ""
    assert window.statusBar().currentMessage().startswith("broken.png could not be opened; still showing other.png")


def test_a_file_that_fails_to_open_with_no_image_shown_is_named_in_the_viewer(qtbot, make_window,
                                                                              gui_tiny_checkpoint, tmp_path):
    window = make_window(gui_tiny_checkpoint)
    with qtbot.waitSignal(window.job_ended, timeout=JOB_TIMEOUT_MS):
        window.open_image(_broken_png(tmp_path))
    placeholder = window.viewer.placeholder
    assert placeholder.isVisible() and placeholder.text().startswith("broken.png could not be opened: truncated PNG")
    assert "Open an image" in placeholder.text()  # and what to do instead
    assert window.controls.progress.format() == "not opened"
    assert window.statusBar().currentMessage().startswith("broken.png could not be opened · truncated PNG")
    assert "Still showing" not in window.controls.last_result.text()
    assert window.status_labels["size"].text() == "" and window.windowTitle() == "leanseg"
