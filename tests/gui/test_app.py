"""The programs: `leanseg-gui IMAGE --screenshot PNG` segments, saves the window, exits; `leanseg gui` starts it."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from leanseg.core.assets import DEFAULT_MODEL_NAME
from leanseg.core.io.images import read_image

from ..core.video_samples import write_video
from .conftest import write_image


def _screenshot_run(path: Path, shot: Path, model: Path, settings: Path) -> subprocess.CompletedProcess[str]:
    settings.write_text("[inference]\nengine=eager\n")  # the quickest start; the engine has tests of its own
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    return subprocess.run(
        [sys.executable, "-m", "leanseg.gui.app", str(path), "--model", str(model), "--screenshot", str(shot),
         "--size", "1000x700", "--settings", str(settings)],
        capture_output=True, text=True, timeout=300, env=env,
    )


def test_screenshot_run_segments_saves_the_window_and_exits(tmp_path, gui_tiny_checkpoint, no_default_model):
    image = write_image(tmp_path / "street.png", 240, 320)
    shot = tmp_path / "shots" / "window.png"
    settings = tmp_path / "s.ini"
    settings.write_text("[inference]\nengine=eager\n")  # the quickest start; the engine has tests of its own
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run(
        [sys.executable, "-m", "leanseg.gui.app", str(image), "--model", str(gui_tiny_checkpoint),
         "--screenshot", str(shot), "--size", "1200x760", "--settings", str(settings)],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert done.returncode == 0, done.stderr
    assert f"screenshot {shot} (finished)" in done.stdout
    pixels = read_image(shot).pixels
    assert pixels.shape[:2] == (760, 1200)
    assert pixels.std() > 10  # a rendered window, not a blank picture


def test_leanseg_gui_starts_the_app_and_a_missing_input_is_a_clear_error(tmp_path):
    done = subprocess.run([sys.executable, "-m", "leanseg.core", "gui", str(tmp_path / "nope.png")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "nope.png: no such file or folder" in done.stderr


def test_leanseg_gui_help_is_the_apps_help_with_every_option():
    done = subprocess.run([sys.executable, "-m", "leanseg.core", "gui", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: leanseg gui [-h]")  # the command the user typed
    for option in ("--model", "--screenshot", "--size", "--settings"):
        assert option in done.stdout


def test_gui_command_runs_the_installed_entry_point():
    from leanseg.core.commands.gui import gui_command

    command = gui_command(["x.png"])
    assert command[0] == sys.executable and command[-1] == "x.png"
    assert "leanseg.gui.app" in command[2] and Path(command[0]).exists()


def test_screenshot_of_a_folder_runs_the_batch_and_saves_the_dialog(tmp_path, gui_tiny_checkpoint, no_default_model):
    folder = tmp_path / "photos"
    folder.mkdir()
    for index in range(2):
        write_image(folder / f"p{index}.png", 48, 64, seed=index)
    shot = tmp_path / "batch.png"
    done = _screenshot_run(folder, shot, gui_tiny_checkpoint, tmp_path / "s.ini")
    assert done.returncode == 0, done.stderr
    assert f"screenshot {shot} (finished)" in done.stdout
    assert sorted(p.name for p in (tmp_path / "photos_leanseg").glob("*_labels.png")) == ["p0_labels.png",
                                                                                         "p1_labels.png"]
    assert read_image(shot).pixels.std() > 10


def test_screenshot_of_a_folder_names_a_bad_file_once(tmp_path, gui_tiny_checkpoint, no_default_model):
    folder = tmp_path / "photos"
    folder.mkdir()
    write_image(folder / "p0.png", 48, 64)
    bad = folder / "text.png"
    bad.write_text("not an image")
    shot = tmp_path / "batch.png"
    done = _screenshot_run(folder, shot, gui_tiny_checkpoint, tmp_path / "s.ini")
    assert f"screenshot {shot} (1 of 2 image(s) failed)" in done.stdout
    assert f"leanseg-gui: {bad}: not an image" in done.stderr
    assert done.stderr.count(str(bad)) == 1, done.stderr  # not "text.png: text.png: not an image"


def test_screenshot_of_a_video_saves_the_panel_with_its_first_segmented_frame(tmp_path, gui_tiny_checkpoint,
                                                                              no_default_model):
    video = write_video(tmp_path / "clip.mp4", frames=5)
    shot = tmp_path / "video.png"
    done = _screenshot_run(video, shot, gui_tiny_checkpoint, tmp_path / "s.ini")
    assert done.returncode == 0, done.stderr
    assert f"screenshot {shot} (finished)" in done.stdout
    assert read_image(shot).pixels.std() > 10


def test_screenshot_of_a_video_says_why_the_overlay_has_no_model(tmp_path, no_default_model):
    bad = tmp_path / "mine.onnx"
    bad.write_bytes(b"not a model")
    shot = tmp_path / "video.png"
    done = _screenshot_run(write_video(tmp_path / "clip.mp4", frames=3), shot, bad, tmp_path / "s.ini")
    assert done.returncode == 1
    assert f"screenshot {shot} (failed)" in done.stdout
    assert f"leanseg-gui: Could not load the model for live segmentation: {bad}: not a model file" in done.stderr


def test_version_is_printed():
    done = subprocess.run([sys.executable, "-m", "leanseg.gui.app", "--version"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0
    assert done.stdout.startswith("leanseg-gui ") and done.stdout.split()[1][0].isdigit()


def test_screenshot_with_a_model_that_fails_shows_the_stand_in_and_exits_1(tmp_path, gui_tiny_checkpoint,
                                                                            no_default_model):
    shutil.copy(gui_tiny_checkpoint, no_default_model / "models" / DEFAULT_MODEL_NAME)  # the shipped stand-in
    bad = tmp_path / "mine.onnx"
    bad.write_bytes(b"not a model")
    shot = tmp_path / "window.png"
    done = _screenshot_run(write_image(tmp_path / "street.png", 96, 128), shot, bad, tmp_path / "s.ini")
    assert done.returncode == 1
    assert f"screenshot {shot} (finished with the shipped model: the model given could not be opened)" in done.stdout
    assert f"{bad}: " in done.stderr and "No model is loaded" not in done.stderr + done.stdout
    assert read_image(shot).pixels.std() > 10
