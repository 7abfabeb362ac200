"""A changed setting re-runs the shown image: a typed memory budget once typing is done, and a failure of that run
said in the panel, with the keyboard left where the user is typing."""
from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from .conftest import JOB_TIMEOUT_MS, write_image

MB = 1_000_000


def _segmented_street(qtbot, make_window, checkpoint, tmp_path):  # type: ignore[no-untyped-def]
    """A window that has segmented a 480x360 image: 1 MB is too small a budget for it, 1024 MB is plenty."""
    window = make_window(checkpoint)
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):
        window.open_image(write_image(tmp_path / "street.png", 360, 480))
    return window


def _type_budget(window, digits: str) -> None:  # type: ignore[no-untyped-def]
    """Select the budget's text and type `digits` over it, without pressing Enter."""
    edit = window.controls.memory_budget.lineEdit()
    edit.selectAll()
    QTest.keyClicks(edit, digits)


def test_a_typed_memory_budget_runs_once_when_enter_is_pressed(qtbot, make_window, gui_tiny_checkpoint, tmp_path):
    window = _segmented_street(qtbot, make_window, gui_tiny_checkpoint, tmp_path)
    sent = []
    window.controls.options_changed.connect(sent.append)
    last_job = window.controller.current.job_id
    _type_budget(window, "1024")
    assert sent == [] and window.controller.current.job_id == last_job  # nothing ran at 1, 10 or 102 MB
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):
        QTest.keyClick(window.controls.memory_budget.lineEdit(), Qt.Key.Key_Return)
    assert [options.memory_budget for options in sent] == [1024 * MB]
    assert window.controller.current.job_id == last_job + 1
    assert window.model_status.options.memory_budget == 1024 * MB


def test_a_budget_too_small_is_said_in_the_panel_and_typing_stays_in_the_box(qtbot, make_window,
                                                                              gui_tiny_checkpoint, tmp_path):
    window = _segmented_street(qtbot, make_window, gui_tiny_checkpoint, tmp_path)
    budget = window.controls.memory_budget
    window.activateWindow()
    budget.setFocus()
    qtbot.waitUntil(budget.hasFocus, timeout=5_000)
    _type_budget(window, "1")
    with qtbot.waitSignal(window.error_shown, timeout=JOB_TIMEOUT_MS) as failure:
        QTest.keyClick(budget.lineEdit(), Qt.Key.Key_Return)
    assert "raise Memory budget (Inference panel) to at least" in failure.args[0]
    assert window.error_box is None and budget.hasFocus()
    assert QApplication.activeModalWidget() is None
    last_run = window.controls.last_result
    assert last_run.property("failed") and "to at least" in last_run.toolTip()
    assert window.controls.progress.format() == "failed"
    _type_budget(window, "1024")  # still in the box: the user types a budget that fits
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):
        QTest.keyClick(budget.lineEdit(), Qt.Key.Key_Return)
    assert not last_run.property("failed") and last_run.text().startswith("Last run:")


def test_a_failed_runs_box_closes_when_a_later_run_succeeds(qtbot, make_window, gui_tiny_checkpoint, tmp_path,
                                                            small_image):
    window = _segmented_street(qtbot, make_window, gui_tiny_checkpoint, tmp_path)
    tight = replace(window.controls.options(), memory_budget=1 * MB)
    window.controls.set_options(tight)  # set, not typed: no run of its own
    with qtbot.waitSignal(window.model_changed, timeout=JOB_TIMEOUT_MS):
        window.controller.configure(None, tight)
    with qtbot.waitSignal(window.error_shown, timeout=JOB_TIMEOUT_MS):
        window.segment_current()  # Segment pressed: its failure is a box
    assert window.error_box is not None and window.error_box.isVisible()
    assert window.error_box.windowTitle() == "Segmentation failed"
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):
        window.open_image(small_image)  # e.g. a batch result opened from its dialog: 96x72 fits in 1 MB
    assert not window.error_box.isVisible()
