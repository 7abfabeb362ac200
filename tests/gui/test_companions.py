"""The main window's hooks: a folder opens the batch dialog; a saved result opens with its labels as overlay."""
from __future__ import annotations

import numpy as np

from leanseg.core.io.outputs import write_png

from .conftest import JOB_TIMEOUT_MS, write_image


def test_open_folder_shows_the_batch_dialog_for_that_folder(qtbot, make_window, gui_tiny_checkpoint, tmp_path):
    window = make_window(gui_tiny_checkpoint)
    folder = tmp_path / "photos"
    folder.mkdir()
    write_image(folder / "a.png", 32, 48)
    window.open_folder(folder)
    dialog = window.batch_dialog
    qtbot.waitUntil(dialog.isVisible, timeout=5_000)
    assert dialog.in_edit.text() == str(folder)
    assert dialog.model_path == gui_tiny_checkpoint
    dialog.close()


def test_a_saved_result_opens_with_its_labels_without_segmenting(qtbot, make_window, gui_tiny_checkpoint, tmp_path,
                                                                 small_image):
    window = make_window(gui_tiny_checkpoint)
    labels = (np.arange(72 * 96).reshape(72, 96) % 4).astype(np.uint8)
    labels_path = write_png(tmp_path / "small_labels.png", labels)
    starts: list[int] = []
    window.controller.worker.job_event.connect(lambda job_id, event: starts.append(job_id))
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):
        window.open_labelled(small_image, labels_path)
    np.testing.assert_array_equal(window.viewer.overlay_item.image, labels)
    assert starts == []  # shown, not segmented again
