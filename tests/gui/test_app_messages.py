"""What the app tells the user: the status bar after a job, transparency, a bad remembered model, thin strips."""
from __future__ import annotations

import shutil
from dataclasses import replace

import cv2
import numpy as np
from PySide6.QtWidgets import QVBoxLayout, QWidget

from leanseg.core.assets import DEFAULT_MODEL_NAME
from leanseg.gui.main_window.settings import AppSettings
from leanseg.gui.main_window.window import MainWindow
from leanseg.gui.messages import status_line
from leanseg.gui.viewer.view import MIN_SHOWN_PX, SegmentationViewer

from .conftest import JOB_TIMEOUT_MS, write_image


def test_the_status_bar_says_how_the_job_ended(qtbot, make_window, gui_tiny_checkpoint, small_image):
    window = make_window(gui_tiny_checkpoint)
    with qtbot.waitSignal(window.job_ended, timeout=JOB_TIMEOUT_MS):
        window.open_image(small_image)
        assert window.statusBar().currentMessage() == "Opening small.png…"
    message = window.statusBar().currentMessage()
    assert message.startswith("small.png: segmented in ") and "Opening" not in message


def test_transparency_is_named_not_dropped_silently(qtbot, make_window, gui_tiny_checkpoint, tmp_path):
    rgba = np.full((40, 60, 4), 200, np.uint8)
    rgba[:, :30, 3] = 0  # the left half transparent
    path = tmp_path / "logo.png"
    cv2.imwrite(str(path), cv2.cvtColor(rgba, cv2.COLOR_RGBA2BGRA))
    window = make_window(gui_tiny_checkpoint)
    with qtbot.waitSignal(window.job_ended, timeout=JOB_TIMEOUT_MS):
        window.open_image(path)
    assert "alpha channel ignored" in window.status_labels["size"].text()
    assert "alpha channel ignored" in window.statusBar().currentMessage()


def test_an_opaque_rgba_image_has_no_alpha_note(qtbot, make_window, gui_tiny_checkpoint, tmp_path):
    path = tmp_path / "opaque.png"
    cv2.imwrite(str(path), np.full((40, 60, 4), 255, np.uint8))
    window = make_window(gui_tiny_checkpoint)
    with qtbot.waitSignal(window.job_ended, timeout=JOB_TIMEOUT_MS):
        window.open_image(path)
    assert "alpha" not in window.status_labels["size"].text()


def test_a_bad_remembered_model_is_named_in_the_window_and_the_app_goes_on(qtbot, settings_path, no_default_model,
                                                                           tmp_path):
    bad = tmp_path / "broken.safetensors"
    bad.write_bytes(b"\x00" * 64)
    settings = AppSettings(settings_path)
    settings.set_text("model/path", str(bad))
    settings.sync()
    window = MainWindow(settings=AppSettings(settings_path))
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.error_shown, timeout=JOB_TIMEOUT_MS):
        window.show()
    assert window.banner.isVisible()
    text = window.banner.text.text()
    assert "could not be opened" in text and str(bad) in text
    assert window.model_requested is None and window.error_box is None  # no model, no modal box: it goes on
    image = write_image(tmp_path / "after.png", 32, 48)
    with qtbot.waitSignal(window.image_shown, timeout=JOB_TIMEOUT_MS):
        window.open_image(image)
    assert window.statusBar().currentMessage().startswith("Opened after.png; open a model")


def test_a_5000_by_1_strip_is_fitted_and_visible(qtbot):
    holder = QWidget()  # closed by qtbot; pyqtgraph's GraphicsView.close() on its own crashes at teardown
    qtbot.addWidget(holder)
    viewer = SegmentationViewer()
    QVBoxLayout(holder).addWidget(viewer)
    holder.resize(800, 500)
    holder.show()
    qtbot.waitExposed(holder)
    strip = np.zeros((1, 5000, 3), np.uint8)
    strip[0, :, 0] = np.linspace(0, 255, 5000).astype(np.uint8)
    viewer.set_image(strip)

    def drawn_fitted() -> bool:  # the view applies its new range when Qt next lays it out
        shown = viewer.image_item.mapRectToDevice(viewer.image_item.boundingRect())
        return 0.9 * viewer.width() <= shown.width() <= viewer.width() + 1  # all of its length

    qtbot.waitUntil(drawn_fitted, timeout=5_000)
    shown = viewer.image_item.mapRectToDevice(viewer.image_item.boundingRect())
    assert shown.height() >= MIN_SHOWN_PX - 1  # kept in proportion it would be 0.16 px tall
    assert viewer.stretch > 1
    viewer.set_image(np.zeros((300, 400, 3), np.uint8))  # an ordinary image: back to true proportions
    assert viewer.stretch == 1.0 and viewer.view.state["aspectLocked"]


def test_the_refusal_stays_up_while_the_shipped_model_stands_in(qtbot, settings_path, no_default_model,
                                                                 gui_tiny_checkpoint, tmp_path):
    """A model asked for on the command line fails: the shipped one opens instead, and the banner keeps
    naming the file and the reason until the user opens another model."""
    shutil.copy(gui_tiny_checkpoint, no_default_model / "models" / DEFAULT_MODEL_NAME)
    bad = tmp_path / "mine.onnx"
    bad.write_bytes(b"not an onnx model")
    window = MainWindow(settings=AppSettings(settings_path), model_path=bad)
    qtbot.addWidget(window)
    ended: list[str] = []
    window.job_ended.connect(ended.append)
    window.show()
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):  # opened as the app's command line does
        window.open_image(write_image(tmp_path / "street.png", 32, 48))
    assert ended == ["finished"]  # segmented by the stand-in, not failed for want of a model
    assert window.error_box is None and "No model is loaded" not in window.statusBar().currentMessage()
    assert window.model_status is not None and window.model_status.path.name == DEFAULT_MODEL_NAME
    assert window.banner.isVisible()
    text = window.banner.text.text()
    assert "could not be opened" in text and str(bad) in text and "Using the shipped model" in text
    # the same bad file again: refused, and the banner says the stand-in is still in use, also after a change
    # of options (which reloads the stand-in)
    with qtbot.waitSignal(window.error_shown, timeout=JOB_TIMEOUT_MS):
        window.open_model(bad)
    text = window.banner.text.text()
    assert window.banner.isVisible() and "Still using the shipped model" in text
    assert text.count(DEFAULT_MODEL_NAME) == 1 and "still using" not in text  # said once
    with qtbot.waitSignal(window.model_changed, timeout=JOB_TIMEOUT_MS):
        window.controls.engine.setCurrentIndex(1 - window.controls.engine.currentIndex())
    assert window.banner.isVisible() and str(bad) in window.banner.text.text()
    with qtbot.waitSignal(window.model_changed, timeout=JOB_TIMEOUT_MS):
        window.open_model(gui_tiny_checkpoint)  # a model the user asked for: the refusal is old news
    assert not window.banner.isVisible() and window.refusal_notice == ""


def test_an_image_waiting_for_a_stand_in_that_fails_too_ends_failed(qtbot, settings_path, no_default_model,
                                                                    tmp_path):
    (no_default_model / "models" / DEFAULT_MODEL_NAME).write_bytes(b"\x00" * 64)  # a damaged install
    bad = tmp_path / "mine.onnx"
    bad.write_bytes(b"not an onnx model")
    window = MainWindow(settings=AppSettings(settings_path), model_path=bad)
    qtbot.addWidget(window)
    window.show()
    with qtbot.waitSignal(window.job_ended, timeout=JOB_TIMEOUT_MS) as ended:
        window.open_image(write_image(tmp_path / "street.png", 32, 48))
    assert ended.args == ["failed"]
    assert window.model_status is None and "Open a model file" in window.banner.text.text()


def test_a_long_error_is_cut_at_a_word_with_an_ellipsis_and_whole_in_the_tooltip(qtbot, make_window):
    window = make_window()
    for key, text in (("device", "cpu"), ("model", "camvid_mobileunet.safetensors · 11 classes"),
                      ("size", "480 × 360 · 8-bit"), ("time", "0.33 s")):
        window.status_labels[key].setText(text)  # the permanent fields a loaded image has beside the message
    qtbot.wait(50)  # let the status bar lay them out
    message = ("/tmp/m/bad.pt: a torch.save file (a state dict or a pickled module): it holds weights, not the "
               "network; export the network with torch.export.save or torch.onnx.export and open that file "
               "(see the README's section on bringing your own model for a worked example with a small UNet)")
    window.show_status_error(message)
    bar = window.statusBar()
    line = bar.currentMessage()
    whole = status_line(message)
    assert bar.fontMetrics().horizontalAdvance(whole) > bar.width()  # the test's premise: it cannot fit
    assert line.endswith("…") and line != whole
    kept = line.removesuffix("…")
    assert whole.startswith(kept) and whole[len(kept)] == " "  # cut between two words, not inside one
    fields_left = min(label.x() for label in window.status_labels.values() if label.isVisible())
    assert bar.fontMetrics().horizontalAdvance(line) <= fields_left  # it fits left of the permanent fields
    assert bar.toolTip() == message


def test_a_cut_error_is_cut_again_when_the_window_is_resized(qtbot, make_window):
    window = make_window()
    window.status_labels["device"].setText("cpu")
    window.status_labels["model"].setText("camvid_mobileunet.safetensors · 11 classes")
    bar = window.statusBar()
    window.resize(1000, 700)
    qtbot.waitUntil(lambda: window.width() == 1000)
    message = ("/tmp/m/bad.pt: a torch.save file (a state dict or a pickled module): it holds weights, not the "
               "network; export the network with torch.export.save or torch.onnx.export and open that file")
    whole = status_line(message)
    window.show_status_error(message, 10000)
    first = bar.currentMessage()
    assert first.endswith("…")  # the test's premise: it does not fit at 1000 px

    window.resize(bar.fontMetrics().horizontalAdvance(whole) + 600, 700)  # wide enough for all of it
    qtbot.waitUntil(lambda: bar.currentMessage() == whole)
    assert bar.toolTip() == message

    window.resize(max(window.minimumSizeHint().width(), 700), 700)  # narrower than at first
    qtbot.waitUntil(lambda: bar.currentMessage() != whole)
    line = bar.currentMessage()
    assert line.endswith("…") and len(line) < len(first) and whole.startswith(line.removesuffix("…"))
    fields_left = min(label.x() for label in window.status_labels.values() if label.isVisible())
    assert bar.fontMetrics().horizontalAdvance(line) <= fields_left  # it fits left of the permanent fields
    assert bar.toolTip() == message


def test_a_short_error_is_shown_whole(qtbot, make_window):
    window = make_window()
    window.show_status_error("/tmp/x.png: not an image")
    assert window.statusBar().currentMessage() == "Not an image · x.png"


def test_the_status_bar_says_segmenting_with_progress_once_the_image_is_open(qtbot, make_window,
                                                                              gui_tiny_checkpoint, tmp_path):
    window = make_window(gui_tiny_checkpoint)
    tiled = replace(window.controls.options(), engine="eager", tiling="fast", memory_budget=33_000_000,
                    mirror="off")  # several tiles
    window.controls.set_options(tiled)
    with qtbot.waitSignal(window.model_changed, timeout=JOB_TIMEOUT_MS):
        window.controller.configure(None, tiled)
    messages: list[str] = []
    window.statusBar().messageChanged.connect(messages.append)
    with qtbot.waitSignal(window.job_ended, timeout=JOB_TIMEOUT_MS):
        window.open_image(write_image(tmp_path / "big.png", 512, 512))
    assert messages[0] == "Opening big.png…"
    assert messages[1] == "Segmenting big.png…"  # once the image is open: no longer "Opening"
    tiles = [message for message in messages if message.startswith("Segmenting big.png: tile ")]
    assert tiles[0] == f"Segmenting big.png: tile 1 of {tiles[0].split(' of ')[1]}" and len(tiles) >= 2
    assert messages[-1].startswith("big.png: segmented in ")
