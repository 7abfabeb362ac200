"""Why a run failed stays in the window, in the app's words: the Inference panel keeps the reason until the next
run, a newer error or an image opened since, and advice names the app's fields (Memory budget), not the command
line's flags."""
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


def test_a_newer_error_or_an_opened_image_takes_down_an_old_failure(qtbot, make_window, gui_tiny_checkpoint, tmp_path,
                                                                   small_image):
    text = tmp_path / "text.png"
    text.write_text("not an image")
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\x00" * 64)
    window = make_window(gui_tiny_checkpoint)
    controls = window.controls
    with qtbot.waitSignal(window.error_shown, timeout=JOB_TIMEOUT_MS):
        window.open_image(text)
    assert controls.last_result.text().startswith("Could not open the image")
    assert controls.last_result.property("failed")
    with qtbot.waitSignal(window.error_shown, timeout=JOB_TIMEOUT_MS):
        window.open_model(junk)
    assert "junk.safetensors" in window.last_error  # the status bar and the message say the model's error...
    assert "text.png" not in controls.last_result.text()  # ...and the panel no longer the image's
    assert controls.last_result.property("failed") is False and controls.progress.format() == "ready"

    without_model = make_window()
    with qtbot.waitSignal(without_model.error_shown, timeout=JOB_TIMEOUT_MS):
        without_model.open_image(text)
    assert without_model.controls.last_result.property("failed")
    with qtbot.waitSignal(without_model.image_shown, timeout=JOB_TIMEOUT_MS):
        without_model.open_image(small_image)  # opened, not segmented: no run replaces the reason
    assert without_model.controls.last_result.text() == "" and not without_model.controls.last_result.property("failed")
