"""Settings survive a restart of the window: choices, overlay, geometry, the memory dock's height (an unusable one
gives the default), recent files, folders, model."""
from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QByteArray, QSize

from leanseg.core.engine.multiscale import SUGGESTED_SCALES
from leanseg.gui.main_window.memory_dock import MEMORY_HEIGHT
from leanseg.gui.main_window.settings import MAX_RECENT_FILES, AppSettings
from leanseg.gui.main_window.window import MainWindow

from .conftest import JOB_TIMEOUT_MS, write_image
from .test_layout import drag_memory_separator


def test_settings_survive_a_restart_of_the_window(qtbot, make_window, gui_tiny_checkpoint, small_image,
                                                  settings_path):
    first = make_window(gui_tiny_checkpoint)
    with qtbot.waitSignal(first.segmented, timeout=JOB_TIMEOUT_MS):
        first.open_image(small_image)
    controls = first.controls
    controls.blockSignals(True)  # choose without re-segmenting each time
    controls.engine.setCurrentIndex(controls.engine.findData("eager"))
    controls.precision.setCurrentIndex(controls.precision.findData("bf16"))
    controls.tiling.setCurrentIndex(controls.tiling.findData("exact"))
    controls.memory_budget.setValue(512)
    assert controls.mirror.isChecked()  # a fresh window averages with the mirror image
    controls.mirror.setChecked(False)
    controls.blockSignals(False)
    first.overlay_panel.opacity.setValue(30)
    first.overlay_panel.show_overlay.setChecked(False)
    first.resize(790, 640)  # within the offscreen screen (800x800): Qt clamps restored geometry to it
    qtbot.waitUntil(lambda: first.size() == QSize(790, 640))
    saved_size = first.size()
    first.close()

    second = MainWindow(settings=AppSettings(settings_path))  # no model given: the remembered one
    qtbot.addWidget(second)
    with qtbot.waitSignal(second.model_changed, timeout=JOB_TIMEOUT_MS) as blocker:
        second.show()
    assert blocker.args[0].path == gui_tiny_checkpoint
    options = second.controls.options()
    assert (options.engine, options.precision, options.tiling, options.memory_budget, options.mirror) == (
        "eager", "bf16", "exact", 512_000_000, "off")
    assert second.overlay_panel.opacity.value() == 30
    assert not second.overlay_panel.show_overlay.isChecked()
    assert second.size() == saved_size
    assert second.settings.recent_files()[0] == str(small_image.resolve())
    assert second.settings.last_dir("image") == str(small_image.parent)


def test_multiscale_averaging_survives_a_restart_and_an_unreadable_value_is_left_out(qtbot, make_window,
                                                                                     settings_path):
    first = make_window()  # no model: choices only
    assert not first.controls.multiscale.isChecked()
    first.controls.multiscale.setChecked(True)
    first.close()
    assert AppSettings(settings_path).text("inference/scales") == "0.75 1 1.25"

    second = MainWindow(settings=AppSettings(settings_path))
    qtbot.addWidget(second)
    assert second.controls.multiscale.isChecked() and second.controls.options().scales == SUGGESTED_SCALES
    second.close()

    for unreadable in ("big", "0.75, 1", "1 1", "9"):  # not numbers, a list, twice the same, out of range
        settings = AppSettings(settings_path)
        settings.set_text("inference/scales", unreadable)
        settings.set_text("inference/tiling", "fast")
        settings.sync()
        third = MainWindow(settings=AppSettings(settings_path))
        qtbot.addWidget(third)
        options = third.controls.options()
        assert (options.scales, options.tiling) == ((1.0,), "fast"), unreadable  # the other choices are kept
        assert not third.controls.multiscale.isChecked()
        third.close()


def test_the_memory_docks_height_survives_a_restart_in_a_low_window(qtbot, make_window, settings_path):
    first = make_window()
    first.resize(790, 780)  # within the offscreen screen (800x800)
    qtbot.waitUntil(lambda: first.size() == QSize(790, 780))
    drag_memory_separator(qtbot, first, 300)
    first.resize(790, 500)
    qtbot.waitUntil(lambda: first.memory_dock.height() < 300)  # closed while a low window squeezes it
    first.close()

    second = MainWindow(settings=AppSettings(settings_path))
    qtbot.addWidget(second)
    second.show()
    qtbot.waitUntil(lambda: second.size() == QSize(790, 500))
    second.resize(790, 780)
    qtbot.waitUntil(lambda: second.memory_dock.height() == 300)  # the height the user gave it, not the squeezed one


@pytest.mark.parametrize("saved", ["nan", "inf", "-5"])
def test_an_unusable_saved_memory_dock_height_gives_the_default(qtbot, settings_path, no_default_model, saved):
    settings = AppSettings(settings_path)
    settings.set_text("window/memory_height", saved)  # a settings file edited by hand, or from another version
    settings.sync()
    window = MainWindow(settings=AppSettings(settings_path))
    qtbot.addWidget(window)
    window.show()
    assert window.memory_dock_height.wanted == MEMORY_HEIGHT
    qtbot.waitUntil(lambda: window.memory_dock.height() == MEMORY_HEIGHT)


def test_recent_files_are_capped_and_skip_missing_files(tmp_path, settings_path):
    settings = AppSettings(settings_path)
    paths = [write_image(tmp_path / f"im{i}.png", 8, 8) for i in range(MAX_RECENT_FILES + 3)]
    for path in paths:
        settings.add_recent_file(path)
    settings.add_recent_file(paths[-1])  # again: stays first, once
    paths[-2].unlink()
    recent = AppSettings(settings_path).recent_files()
    assert recent[0] == str(paths[-1].resolve())
    assert str(paths[-2].resolve()) not in recent
    assert len(recent) == MAX_RECENT_FILES - 1
    settings.set_blob("window/geometry", QByteArray(b""))
    assert settings.blob("window/geometry") is None
    assert settings.last_dir("nothing") == str(Path.home())
