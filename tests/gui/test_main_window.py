"""The main window end to end: open -> segment on the worker -> overlay; cancel; errors; drag and drop."""
from __future__ import annotations

import os
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QMessageBox

from leanseg.core.io.images import read_image
from leanseg.core.memory import format_bytes
from leanseg.core.model.checkpoint import load_checkpoint
from leanseg.core.predict import Segmenter

from .conftest import JOB_TIMEOUT_MS, drop_path, write_image


def test_open_image_segments_and_overlay_holds_the_labels(qtbot, make_window, gui_tiny_checkpoint, small_image):
    window = make_window(gui_tiny_checkpoint)
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS) as blocker:
        window.open_image(small_image)
    result = blocker.args[0]
    expected = Segmenter(load_checkpoint(gui_tiny_checkpoint), window.controls.options()).segment(
        read_image(small_image))
    assert result.labels.shape == (72, 96)
    np.testing.assert_array_equal(window.viewer.overlay_item.image, result.labels)
    np.testing.assert_array_equal(result.labels, expected.labels)
    assert window.viewer.image_item.image.shape == (72, 96, 3)
    assert window.viewer.overlay_item.isVisible()
    assert window.status_labels["size"].text().startswith("96 × 72")
    assert "s" in window.status_labels["time"].text() and "peak" in window.status_labels["peak"].text()
    assert 0 < result.start_bytes <= result.peak_bytes
    assert f"(+{format_bytes(result.peak_bytes - result.start_bytes)})" in window.status_labels["peak"].text()
    assert window.controls.cancel.isEnabled() is False
    bar = window.controls.progress
    assert bar.format() == f"done · {result.seconds:.2f} s" and bar.value() == bar.maximum()
    assert str(small_image.resolve()) in window.settings.recent_files()
    shares = [window.overlay_panel.legend.item(i).text() for i in range(4)]
    assert all("%" in text for text in shares)


def test_cancel_takes_effect_within_one_tile_and_leaves_no_overlay(qtbot, make_window, gui_tiny_checkpoint,
                                                                     tmp_path):
    window = make_window(gui_tiny_checkpoint)
    tiled = replace(window.controls.options(), engine="eager", tiling="fast", memory_budget=33_000_000,
                    mirror="off")  # 2x4 tiles
    window.controls.set_options(tiled)
    with qtbot.waitSignal(window.model_changed, timeout=JOB_TIMEOUT_MS):
        window.controller.configure(None, tiled)
    tiles: list[int] = []  # appended on the worker thread, as the tiles run
    cancel_pressed = threading.Event()

    def hold_at_second_tile(job_id: int, event) -> None:  # type: ignore[no-untyped-def]
        # Direct connection: the worker waits here until Cancel was pressed, so the count below is exact.
        if event.kind == "tile":
            tiles.append(event.index)
            if len(tiles) == 2:
                cancel_pressed.wait(timeout=JOB_TIMEOUT_MS / 1000)

    window.controller.worker.job_event.connect(hold_at_second_tile, Qt.ConnectionType.DirectConnection)
    window.open_image(write_image(tmp_path / "big.png", 512, 512))
    qtbot.waitUntil(lambda: window.controls.progress.format().startswith("tile 2 of "), timeout=JOB_TIMEOUT_MS)
    assert window.controls.cancel.isEnabled()
    tiles_at_cancel = len(tiles)
    with qtbot.waitSignal(window.job_ended, timeout=JOB_TIMEOUT_MS) as blocker:
        window.cancel_job()
        cancel_pressed.set()
    assert blocker.args == ["cancelled"]
    assert tiles_at_cancel == 2 and len(tiles) <= tiles_at_cancel + 1  # the tile running at Cancel, no more
    assert window.result is None and window.viewer.labels is None
    assert not window.controls.cancel.isEnabled()
    assert window.controls.progress.format() == "cancelled"


def test_opening_a_new_image_cancels_the_running_one(qtbot, make_window, gui_tiny_checkpoint, tmp_path, small_image):
    window = make_window(gui_tiny_checkpoint)
    big = write_image(tmp_path / "big.png", 768, 768)
    with qtbot.waitSignal(window.controller.worker.job_event, timeout=JOB_TIMEOUT_MS,
                          check_params_cb=lambda job_id, event: event.kind == "start"):
        window.open_image(big)
    first = window.controller.current.job_id
    with qtbot.waitSignals([window.controller.worker.job_cancelled, window.segmented], timeout=JOB_TIMEOUT_MS,
                           check_params_cbs=[lambda job_id: job_id == first, None]):
        window.open_image(small_image)
    assert window.image.path == small_image
    assert window.viewer.overlay_item.image.shape == (72, 96)


def test_a_bad_image_gives_a_message_and_the_app_goes_on(qtbot, make_window, gui_tiny_checkpoint, tmp_path,
                                                         small_image):
    window = make_window(gui_tiny_checkpoint)
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n not really a png")
    with qtbot.waitSignal(window.error_shown, timeout=JOB_TIMEOUT_MS) as blocker:
        window.open_image(bad)
    assert "broken.png" in blocker.args[0] and "truncated PNG" in blocker.args[0]
    assert window.error_box is not None and window.error_box.isVisible()
    assert window.error_box.windowTitle() == "Cannot open image"  # reading failed: nothing was segmented
    assert window.controls.last_result.text().startswith("Could not open the image")
    assert not window.controls.cancel.isEnabled()
    window.error_box.close()
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):
        window.open_image(small_image)


def test_a_bad_model_file_is_refused_and_the_old_model_stays(qtbot, make_window, gui_tiny_checkpoint, tmp_path,
                                                             small_image):
    window = make_window(gui_tiny_checkpoint)
    bad = tmp_path / "junk.safetensors"
    bad.write_bytes(b"\x00" * 64)
    with qtbot.waitSignal(window.error_shown, timeout=JOB_TIMEOUT_MS) as blocker:
        window.open_model(bad)
    assert "junk.safetensors" in blocker.args[0] and "still using tiny.safetensors" in blocker.args[0]
    assert window.model_status.path == gui_tiny_checkpoint
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):
        window.open_image(small_image)


def test_without_a_default_model_the_app_says_so_and_still_shows_images(qtbot, make_window, small_image):
    window = make_window()
    assert window.banner.isVisible()
    assert "No default model is installed" in window.banner.text.text()
    with qtbot.waitSignal(window.image_shown, timeout=JOB_TIMEOUT_MS):
        window.open_image(small_image)
    assert window.viewer.pixels.shape == (72, 96, 3)
    assert not window.controls.segment.isEnabled()
    assert window.viewer.labels is None


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # QDragEnterEvent has only the QPoint form
def test_drag_and_drop_routes_images_folders_and_videos(qtbot, make_window, gui_tiny_checkpoint, small_image,
                                                        tmp_path, monkeypatch):
    window = make_window(gui_tiny_checkpoint)
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):
        drop_path(window, small_image)
    assert window.image.path == small_image
    opened: list[tuple[str, Path]] = []
    monkeypatch.setattr(window, "open_folder", lambda path: opened.append(("folder", path)))
    monkeypatch.setattr(window, "open_video", lambda path: opened.append(("video", path)))
    video = tmp_path / "clip.mp4"
    video.write_bytes(b"")
    drop_path(window, tmp_path)
    drop_path(window, video)
    assert opened == [("folder", tmp_path), ("video", video)]


def test_legend_click_hides_a_class_and_overlay_controls_work(qtbot, make_window, gui_tiny_checkpoint, small_image):
    window = make_window(gui_tiny_checkpoint)
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS) as blocker:
        window.open_image(small_image)
    labels = blocker.args[0].labels
    legend = window.overlay_panel.legend
    item = legend.item(0)
    qtbot.mouseClick(legend.viewport(), Qt.MouseButton.LeftButton, pos=legend.visualItemRect(item).center())
    assert legend.hidden == frozenset({0})
    assert window.viewer.overlay_item.lut[0, 3] == 0 and window.viewer.overlay_item.lut[1, 3] == 255
    np.testing.assert_array_equal(window.viewer.overlay_item.image, labels)  # drawing changes, labels don't
    window.overlay_panel.opacity.setValue(30)
    assert abs(window.viewer.overlay_item.opacity() - 0.3) < 1e-6
    window.overlay_panel.show_overlay.setChecked(False)
    assert not window.viewer.overlay_item.isVisible() and not window.menu_actions.show_overlay.isChecked()
    name = window.model_status.info.class_names[int(labels[5, 7])]
    assert window.viewer.readout_at(7, 5).endswith(name)
    assert window.viewer.readout_at(500, 5) == ""


def test_save_labels_and_overlay(qtbot, make_window, gui_tiny_checkpoint, small_image, tmp_path):
    window = make_window(gui_tiny_checkpoint)
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS) as blocker:
        window.open_image(small_image)
    labels_path = window.save_labels(tmp_path / "out" / "labels.png")
    overlay_path = window.save_overlay(tmp_path / "out" / "overlay.png")
    np.testing.assert_array_equal(read_image(labels_path).pixels, blocker.args[0].labels)
    assert read_image(overlay_path).pixels.shape == (72, 96, 3)

    bare = window.save_labels(tmp_path / "out" / "saved labels ü")  # typed without .png: it is added
    assert bare == tmp_path / "out" / "saved labels ü.png" and bare.is_file()
    assert not (tmp_path / "out" / "saved labels ü").exists()
    np.testing.assert_array_equal(read_image(bare).pixels, blocker.args[0].labels)
    assert window.save_overlay(tmp_path / "out" / "overlay.v2") == tmp_path / "out" / "overlay.v2.png"
    assert window.statusBar().currentMessage() == f"Saved {tmp_path / 'out' / 'overlay.v2.png'}"


def test_saving_over_the_open_image_is_refused_and_the_image_kept(qtbot, make_window, gui_tiny_checkpoint,
                                                                 small_image, tmp_path):
    window = make_window(gui_tiny_checkpoint)
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):
        window.open_image(small_image)
    original = small_image.read_bytes()
    link = tmp_path / "link.png"
    link.symlink_to(small_image)
    hard = tmp_path / "hard.png"
    os.link(small_image, hard)
    for target in (small_image, small_image.with_suffix(""), link, hard):  # "small" becomes small.png
        assert window.save_labels(target) is None and window.save_overlay(target) is None
        assert "is the image that is open, and an input is never overwritten" in window.last_error
    assert small_image.read_bytes() == original


def test_the_save_dialog_refuses_the_open_image_before_any_question_and_asks_once_to_replace(
        qtbot, make_window, gui_tiny_checkpoint, small_image, tmp_path, monkeypatch):
    window = make_window(gui_tiny_checkpoint)
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):
        window.open_image(small_image)
    picked: list[Path] = []
    questions: list[str] = []
    answers: list[QMessageBox.StandardButton] = []

    def pick_file(*_args, options, **_kwargs) -> tuple[str, str]:  # type: ignore[no-untyped-def]
        assert options & QFileDialog.Option.DontConfirmOverwrite  # Qt's own question would come first
        return str(picked[-1]), "PNG images (*.png)"

    def answer(_parent, _title: str, text: str, *_buttons) -> QMessageBox.StandardButton:  # type: ignore[no-untyped-def]
        questions.append(text)
        return answers.pop(0)

    monkeypatch.setattr(QFileDialog, "getSaveFileName", pick_file)
    monkeypatch.setattr(QMessageBox, "question", answer)
    original = small_image.read_bytes()
    picked.append(small_image)
    assert window.save_labels() is None and not questions  # refused, never asked "Replace it?"
    assert "is the image that is open" in window.last_error and small_image.read_bytes() == original

    mine = tmp_path / "mine.png"
    mine.write_bytes(b"the user's own file")
    picked.append(mine)
    answers.append(QMessageBox.StandardButton.No)
    assert window.save_overlay() is None and mine.read_bytes() == b"the user's own file"
    answers.append(QMessageBox.StandardButton.Yes)
    assert window.save_overlay() == mine and mine.read_bytes().startswith(b"\x89PNG")
    assert questions == ["mine.png already exists. Replace it?"] * 2


def test_changing_the_engine_resegments_with_the_new_options(qtbot, make_window, gui_tiny_checkpoint, small_image):
    window = make_window(gui_tiny_checkpoint)
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):
        window.open_image(small_image)
    other = "lean" if window.controls.options().engine == "eager" else "eager"
    with qtbot.waitSignals([window.model_changed, window.segmented], timeout=JOB_TIMEOUT_MS):
        window.controls.engine.setCurrentIndex(window.controls.engine.findData(other))
    assert window.model_status.options.engine == other
    assert window.model_status.options == window.controls.options()


def test_out_of_memory_is_reported_with_its_recovery_and_the_app_goes_on(qtbot, make_window, gui_tiny_checkpoint,
                                                                        small_image, monkeypatch):
    window = make_window(gui_tiny_checkpoint)
    real_segment = Segmenter.segment

    def out_of_memory(self, image, **kwargs):  # what torch raises when an allocation fails
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(Segmenter, "segment", out_of_memory)
    with qtbot.waitSignal(window.error_shown, timeout=JOB_TIMEOUT_MS) as blocker:
        window.open_image(small_image)
    assert blocker.args[0].startswith("Out of memory on cpu while segmenting a 96x72 image. Recovered")
    assert window.error_box.windowTitle() == "Segmentation failed"
    assert "memory budget" in blocker.args[0]
    assert not window.controls.cancel.isEnabled()
    monkeypatch.setattr(Segmenter, "segment", real_segment)
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):
        window.segment_current()


def test_a_16_bit_grey_tiff_is_shown_auto_contrasted(qtbot, make_window, gui_tiny_checkpoint, tmp_path):
    import tifffile

    window = make_window(gui_tiny_checkpoint)
    dim = (np.arange(40 * 50).reshape(40, 50) % 300 + 1000).astype(np.uint16)  # 1000..1299 of 65535
    tifffile.imwrite(tmp_path / "dim.tif", dim)
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):
        window.open_image(tmp_path / "dim.tif")
    shown = window.viewer.pixels
    assert shown.dtype == np.uint8 and shown.shape == (40, 50, 3)
    assert shown.min() <= 5 and shown.max() >= 250  # stretched to the full range, not near-black
    assert "50 × 40 · 16-bit, 12-bit values (largest 1299): 4095 is white" == \
        window.status_labels["size"].text()
