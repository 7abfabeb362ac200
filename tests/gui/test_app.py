"""The programs: `leanseg-gui IMAGE --screenshot PNG` segments, saves the window, exits; `leanseg gui` starts it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from leanseg.core.io.images import read_image

from .conftest import write_image


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


def test_gui_command_runs_the_installed_entry_point():
    from leanseg.core.commands.gui import gui_command

    command = gui_command(["x.png"])
    assert command[0] == sys.executable and command[-1] == "x.png"
    assert "leanseg.gui.app" in command[2] and Path(command[0]).exists()
