"""Why a run failed stays in the window, in the app's words: the Inference panel keeps the reason until the next
run, and advice names the app's fields (Memory budget), not the command line's flags."""
from __future__ import annotations

from .conftest import JOB_TIMEOUT_MS, write_image


def test_a_budget_too_small_is_explained_in_the_panel_until_the_next_run(qtbot, make_window, gui_tiny_checkpoint,
                                                                          tmp_path):
    window = make_window(gui_tiny_checkpoint)
    controls = window.controls
    with qtbot.waitSignal(window.model_changed, timeout=JOB_TIMEOUT_MS):
        controls.memory_budget.setValue(1)  # 1 MB: less than the image's own pixels
    big = write_image(tmp_path / "big.png", 900, 1200)
    with qtbot.waitSignal(window.job_ended, timeout=JOB_TIMEOUT_MS) as ended:
        window.open_image(big)
    assert ended.args == ["failed"]
    assert controls.progress.format() == "failed"
    reason = controls.last_result.text()
    assert reason.startswith("Last run failed: the memory budget 1.0 MB cannot hold a 1200x900 image")
    assert "raise Memory budget (Inference panel) to at least" in reason
    assert "--memory-budget" not in reason and "--memory-budget" not in window.error_box.text()
    assert controls.last_result.property("failed") is True and controls.last_result.isVisible()
    window.error_box.close()
    window.statusBar().clearMessage()  # the status bar's message is gone after 10 s; the panel's stays
    assert controls.last_result.text() == reason

    with qtbot.waitSignal(window.job_ended, timeout=JOB_TIMEOUT_MS) as ended:
        controls.memory_budget.setValue(0)  # auto: the image is segmented again, and fits
    assert ended.args == ["finished"]
    assert controls.last_result.text().startswith("Last run: ")
    assert controls.last_result.property("failed") is False
