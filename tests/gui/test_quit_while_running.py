"""Closing the main window while a batch or a video export runs asks first (Quit stops it, Cancel keeps it going);
while only a single image is segmented it closes at once."""
from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import Qt

from leanseg.gui.batch.texts import default_output_folder

from ..core.video_samples import count_frames
from .conftest import JOB_TIMEOUT_MS, answer_next_box, write_image

SAMPLE = Path(__file__).resolve().parents[2] / "assets" / "samples" / "camvid_val.mp4"
VIDEO_TIMEOUT_MS = 3 * JOB_TIMEOUT_MS


def test_closing_mid_batch_asks_and_cancel_keeps_it_running_quit_stops_it(qtbot, make_window, gui_tiny_checkpoint,
                                                                           image_folder):
    folder = image_folder
    window = make_window(gui_tiny_checkpoint)
    window.open_folder(folder)
    dialog = window.batch_dialog
    second_image, release = threading.Event(), threading.Event()

    def hold_second_image(event) -> None:  # type: ignore[no-untyped-def]
        if event.kind == "info" and event.index == 1:  # on the batch thread, until the test lets it go
            second_image.set()
            release.wait(JOB_TIMEOUT_MS / 1000)

    batch_thread = dialog.batch_thread
    batch_thread.runner.job_event.connect(hold_second_image, Qt.ConnectionType.DirectConnection)
    dialog.start()
    assert second_image.wait(JOB_TIMEOUT_MS / 1000)
    qtbot.waitUntil(lambda: dialog.progress.value() == 1, timeout=5_000)
    asked: list[str] = []
    answer_next_box("Cancel", asked)
    assert window.close() is False
    assert asked == ["Quit leanseg?\nA batch is running: 1 of 4 images done. Quit and stop it?\n"
                     "The images done are kept: run the batch on photos again (output folder photos_leanseg) and "
                     "it resumes where it stopped."]
    assert window.isVisible() and dialog.running and batch_thread.runner_thread.isRunning()
    answer_next_box("Quit", asked, before_pressing=release.set)
    assert window.close() is True
    assert len(asked) == 2
    assert not batch_thread.runner_thread.isRunning() and not dialog.running and not dialog.isVisible()
    done = sorted(p.name for p in default_output_folder(folder).glob("*_labels.png"))
    assert 1 <= len(done) < 4  # stopped: what was done is kept, the rest was not segmented


def test_closing_mid_export_asks_and_quit_stops_it_with_a_playable_file(qtbot, make_window, gui_tiny_checkpoint,
                                                                        tmp_path):
    window = make_window(gui_tiny_checkpoint)
    window.open_video(SAMPLE)
    panel = window.video_panel
    third_frame, release = threading.Event(), threading.Event()

    def hold_third_frame(event) -> None:  # type: ignore[no-untyped-def]
        if event.kind == "frame" and event.index == 2:  # on the export thread, until the test lets it go
            third_frame.set()
            release.wait(VIDEO_TIMEOUT_MS / 1000)

    panel.export.job_event.connect(hold_third_frame, Qt.ConnectionType.DirectConnection)
    output = tmp_path / "out.mp4"
    assert panel.export_to(output)
    assert third_frame.wait(VIDEO_TIMEOUT_MS / 1000)
    qtbot.waitUntil(lambda: panel.progress.value() == 3, timeout=5_000)
    asked: list[str] = []
    answer_next_box("Quit", asked, before_pressing=release.set)
    assert window.close() is True
    count = panel.progress.maximum()
    assert asked == [f"Quit leanseg?\nA video export is running: 3 of {count} frames exported. Quit and stop it?\n"
                     "The exported video keeps the frames written so far, and plays."]
    assert panel.export._thread is None and panel.playback._thread is None
    assert 3 <= count_frames(output)[0] < count  # stopped, and finalised: it plays


def test_closing_while_one_image_is_segmented_asks_nothing(qtbot, make_window, gui_tiny_checkpoint, tmp_path):
    window = make_window(gui_tiny_checkpoint)
    window.open_image(write_image(tmp_path / "street.png", 360, 480))
    assert window._busy
    asked: list[str] = []
    answering = answer_next_box("Quit", asked)  # were a box to open, it would be noted here
    closed = window.close()
    answering.stop()
    assert closed is True and asked == [] and not window.controller.worker_thread.isRunning()
