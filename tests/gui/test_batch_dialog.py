"""The batch dialog offscreen: run, results table, Cancel then Resume, open a result, open the output folder."""
from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pytest
import tifffile
from PySide6.QtCore import QObject, Qt, QUrl, Slot
from PySide6.QtGui import QColor, QDesktopServices
from PySide6.QtWidgets import QHeaderView

from leanseg.core.events import JobEvent
from leanseg.core.io.outputs import OutputPathError
from leanseg.core.jobs.batch import require_writable_output
from leanseg.core.jobs.records import ImageRecord
from leanseg.core.predict import InferenceOptions
from leanseg.gui.batch import count as count_module
from leanseg.gui.batch.dialog import BatchDialog
from leanseg.gui.batch.results_table import COLUMNS
from leanseg.gui.batch.texts import default_output_folder

from ..core.unwritable import make_unwritable
from .conftest import JOB_TIMEOUT_MS, answer_next_box, write_image

OPTIONS = InferenceOptions(device="cpu", engine="eager")


def _dialog(qtbot, checkpoint: Path, folder: Path) -> BatchDialog:  # type: ignore[no-untyped-def]
    dialog = BatchDialog(None, checkpoint, OPTIONS, in_dir=folder)
    qtbot.addWidget(dialog)
    dialog.show()
    return dialog


def _table(dialog: BatchDialog) -> dict[str, tuple[str, str]]:
    """file -> (status, message) as the table shows them."""
    rows = {}
    for row in range(dialog.table.rowCount()):
        rows[dialog.table.item(row, 0).text()] = (dialog.table.item(row, 3).text(), dialog.table.item(row, 4).text())
    return rows


def test_a_batch_runs_fills_the_table_and_reports_bad_files(qtbot, gui_tiny_checkpoint, image_folder) -> None:
    (image_folder / "broken.jpg").write_text("not a JPEG")
    dialog = _dialog(qtbot, gui_tiny_checkpoint, image_folder)
    assert dialog.out_edit.text() == str(default_output_folder(image_folder))
    assert dialog.start_button.text() == "Start" and not dialog.cancel_button.isEnabled()
    events = []
    dialog.job_event.connect(events.append)
    with qtbot.waitSignal(dialog.batch_finished, timeout=JOB_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)
        assert dialog.cancel_button.isEnabled() and not dialog.in_edit.isEnabled()
    summary = blocker.args[0]
    assert not summary.cancelled and len(summary.ok) == 4 and len(summary.failed) == 1
    rows = _table(dialog)
    assert len(rows) == 5 and rows["p0.png"][0] == "ok"
    assert rows["broken.jpg"][0] == "failed" and "not an image" in rows["broken.jpg"][1]
    assert str(image_folder) not in rows["broken.jpg"][1]  # the File column names it; the tooltip has the path
    assert dialog.progress.value() == 5 and dialog.progress.maximum() == 5
    assert "Done: 4 segmented" in dialog.status.text() and "1 failed" in dialog.status.text()
    labels = cv2.imread(str(default_output_folder(image_folder) / "p3_labels.png"), cv2.IMREAD_UNCHANGED)
    assert labels.shape == (48, 64)
    assert (default_output_folder(image_folder) / "p3_overlay.png").is_file()
    assert {"start", "image", "error", "done"} <= {e.kind for e in events}
    assert dialog.start_button.text() == "Retry failed" and dialog.start_button.isEnabled()  # all else is done


def test_once_all_is_done_nothing_says_resume_and_names_are_shown_whole(qtbot, gui_tiny_checkpoint,
                                                                       image_folder) -> None:
    long_name = "camvid_0016E5_07959_with_a_long_name.png"
    write_image(image_folder / long_name, 48, 64, seed=9)
    (image_folder / "notes.txt").write_text("not an image")
    dialog = _dialog(qtbot, gui_tiny_checkpoint, image_folder)
    with qtbot.waitSignal(dialog.batch_finished, timeout=JOB_TIMEOUT_MS) as blocker:
        dialog.start()
    assert blocker.args[0].all_ok and blocker.args[0].left_out == ["notes.txt"]
    assert "Left out 1 file that is not an image: notes.txt." in dialog.status.text()
    assert dialog.start_button.text() == "Run again" and "added or changed" in dialog.start_button.toolTip()
    dialog.probs.setChecked(True)  # other outputs than the folder holds: they cannot resume it
    assert dialog.start_button.text() == "Start over" and "other outputs" in dialog.start_button.toolTip()
    dialog.probs.setChecked(False)
    assert dialog.start_button.text() == "Run again"
    dialog.overwrite.setChecked(True)
    assert dialog.start_button.text() == "Start over"

    name_width = dialog.table.fontMetrics().horizontalAdvance(long_name)
    qtbot.waitUntil(lambda: dialog.table.columnWidth(0) > name_width, timeout=5_000)
    header = dialog.table.horizontalHeader()
    last = len(COLUMNS) - 1
    assert COLUMNS[last] == "Message" and header.sectionResizeMode(last) == QHeaderView.ResizeMode.Stretch
    assert header.visualIndex(last) == last


def test_cancel_then_resume_finishes_without_redoing(qtbot, gui_tiny_checkpoint, image_folder) -> None:
    dialog = _dialog(qtbot, gui_tiny_checkpoint, image_folder)
    progress_texts = []
    cancel_clicked = threading.Event()

    def hold_second_image(event) -> None:  # type: ignore[no-untyped-def]
        # On the batch thread (direct connection): the second image waits until the user has pressed
        # Cancel, however fast a 4-image batch of tiny images runs.
        if event.kind == "info" and event.index == 1:
            cancel_clicked.wait(timeout=JOB_TIMEOUT_MS / 1000)

    def press_cancel_on_second_image(event) -> None:  # type: ignore[no-untyped-def]
        if event.kind == "info":
            progress_texts.append(dialog.status.text())
            if event.index == 1:
                qtbot.mouseClick(dialog.cancel_button, Qt.MouseButton.LeftButton)
                cancel_clicked.set()

    dialog.batch_thread.runner.job_event.connect(hold_second_image, Qt.ConnectionType.DirectConnection)
    dialog.job_event.connect(press_cancel_on_second_image)
    with qtbot.waitSignal(dialog.batch_finished, timeout=JOB_TIMEOUT_MS) as blocker:
        dialog.start()
    first = blocker.args[0]
    assert first.cancelled and 1 <= len(first.records) < 4
    assert "press Resume" in dialog.status.text() and dialog.start_button.text() == "Resume"
    assert progress_texts[0] == "0 of 4 · p0.png"  # no rate or ETA before an image was segmented
    dialog.batch_thread.runner.job_event.disconnect(hold_second_image)
    dialog.job_event.disconnect(press_cancel_on_second_image)

    with qtbot.waitSignal(dialog.batch_finished, timeout=JOB_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(dialog.start_button, Qt.MouseButton.LeftButton)
    second = blocker.args[0]
    assert not second.cancelled and second.all_ok
    assert second.finished_before == len(first.records) and len(second.records) == 4 - len(first.records)
    rows = _table(dialog)
    assert len(rows) == 4
    assert sum(status == "done before" for status, _ in rows.values()) == len(first.records)
    assert (dialog.progress.value(), dialog.progress.maximum(), dialog.progress.text()) == (4, 4, "4 of 4")


def test_activating_a_row_asks_to_open_the_image_with_its_labels(qtbot, gui_tiny_checkpoint, image_folder) -> None:
    dialog = _dialog(qtbot, gui_tiny_checkpoint, image_folder)
    with qtbot.waitSignal(dialog.batch_finished, timeout=JOB_TIMEOUT_MS):
        dialog.start()
    row = next(r for r in range(dialog.table.rowCount()) if dialog.table.item(r, 0).text() == "p2.png")
    rect = dialog.table.visualItemRect(dialog.table.item(row, 1))
    with qtbot.waitSignal(dialog.open_result, timeout=5000) as blocker:
        qtbot.mouseClick(dialog.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
        qtbot.mouseDClick(dialog.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    image_path, labels_path = blocker.args
    assert image_path == image_folder / "p2.png"
    assert labels_path == default_output_folder(image_folder) / "p2_labels.png"
    assert np.asarray(cv2.imread(str(labels_path), cv2.IMREAD_UNCHANGED)).shape == (48, 64)
    dialog.table.setCurrentCell(0, 0)  # the keyboard works too: Enter on the selected row
    with qtbot.waitSignal(dialog.open_result, timeout=5000) as blocker:
        qtbot.keyClick(dialog.table, Qt.Key.Key_Return)
    assert blocker.args[0] == image_folder / dialog.table.item(0, 0).text()


class _UrlCatcher(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[QUrl] = []

    @Slot(QUrl)
    def open(self, url: QUrl) -> None:
        self.urls.append(url)


def test_open_output_folder_hands_the_folder_to_the_desktop(qtbot, gui_tiny_checkpoint, image_folder) -> None:
    dialog = _dialog(qtbot, gui_tiny_checkpoint, image_folder)
    assert not dialog.open_output_button.isEnabled()  # nothing there yet
    with qtbot.waitSignal(dialog.batch_finished, timeout=JOB_TIMEOUT_MS):
        dialog.start()
    catcher = _UrlCatcher()
    QDesktopServices.setUrlHandler("file", catcher, "open")
    try:
        assert dialog.open_output_button.isEnabled()
        qtbot.mouseClick(dialog.open_output_button, Qt.MouseButton.LeftButton)
    finally:
        QDesktopServices.unsetUrlHandler("file")
    assert [Path(u.toLocalFile()) for u in catcher.urls] == [default_output_folder(image_folder).resolve()]


def test_bad_choices_are_explained_and_nothing_starts(qtbot, gui_tiny_checkpoint, tmp_path) -> None:
    dialog = _dialog(qtbot, gui_tiny_checkpoint, tmp_path / "missing")
    with qtbot.waitSignal(dialog.batch_failed, timeout=5000) as blocker:
        dialog.start()
    assert "does not exist" in blocker.args[0] and not dialog.running
    dialog.in_edit.setText("")
    with qtbot.waitSignal(dialog.batch_failed, timeout=5000) as blocker:
        dialog.start()
    assert "Choose an input folder" in blocker.args[0]


def test_main_window_folder_to_batch_to_viewer(qtbot, make_window, gui_tiny_checkpoint, image_folder) -> None:
    """File > Open folder opens this dialog; a finished row opens in the viewer with its saved labels."""
    window = make_window(gui_tiny_checkpoint)
    window.open_folder(image_folder)
    dialog = window.batch_dialog
    qtbot.waitUntil(dialog.isVisible, timeout=5_000)
    with qtbot.waitSignal(dialog.batch_finished, timeout=JOB_TIMEOUT_MS) as blocker:
        dialog.start()
    assert blocker.args[0].all_ok
    row = next(r for r in range(dialog.table.rowCount()) if dialog.table.item(r, 0).text() == "p1.png")
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):
        dialog.open_row(row)
    saved = cv2.imread(str(default_output_folder(image_folder) / "p1_labels.png"), cv2.IMREAD_UNCHANGED)
    np.testing.assert_array_equal(window.viewer.overlay_item.image, saved)
    assert window.image.path == image_folder / "p1.png"
    dialog.close()


def test_other_outputs_start_over_and_a_refused_resume_says_what_to_tick(qtbot, gui_tiny_checkpoint,
                                                                          image_folder) -> None:
    dialog = _dialog(qtbot, gui_tiny_checkpoint, image_folder)
    with qtbot.waitSignal(dialog.batch_finished, timeout=JOB_TIMEOUT_MS):
        dialog.start()
    out = default_output_folder(image_folder)
    dialog.probs.setChecked(True)  # the folder holds results without probabilities
    assert dialog.start_button.text() == "Start over"
    with qtbot.waitSignal(dialog.batch_finished, timeout=JOB_TIMEOUT_MS) as blocker:
        dialog.start()
    assert blocker.args[0].all_ok and len(blocker.args[0].ok) == 4  # every image redone, with its probabilities
    assert all((out / f"p{i}_probs.npy").is_file() for i in range(4))
    assert dialog.start_button.text() == "Run again"

    dialog.set_model(gui_tiny_checkpoint, replace(OPTIONS, mirror="flip"))  # other labels: refused, explained
    failures: list[str] = []
    dialog.batch_failed.connect(failures.append)
    dialog.start()
    qtbot.waitUntil(lambda: bool(failures) and not dialog.running, timeout=JOB_TIMEOUT_MS)
    text = dialog.status.text()
    assert "mirror" in text and "tick Redo everything to redo them" in text and "--overwrite" not in text, text
    dialog.overwrite.setChecked(True)
    assert dialog.start_button.text() == "Start over"
    with qtbot.waitSignal(dialog.batch_finished, timeout=JOB_TIMEOUT_MS) as blocker:
        dialog.start()
    assert blocker.args[0].all_ok


def test_the_model_line_names_the_averaging_the_batch_runs_with(qtbot, gui_tiny_checkpoint, image_folder) -> None:
    dialog = _dialog(qtbot, gui_tiny_checkpoint, image_folder)
    assert dialog.model_label.text() == "Model: tiny.safetensors · cpu · engine eager · fp32"
    dialog.set_model(gui_tiny_checkpoint, replace(OPTIONS, mirror="flip", scales=(0.75, 1.0, 1.25)))
    assert dialog.model_label.text() == ("Model: tiny.safetensors · cpu · engine eager · fp32 · mirror averaging"
                                         " · multi-scale averaging at 0.75 1 1.25")
    assert dialog.options.scales == (0.75, 1.0, 1.25)  # what the batch runs with


def _cell_colour(table, row: int, column: int) -> QColor:  # type: ignore[no-untyped-def]
    """The colour painted in the middle of an empty cell."""
    image = table.viewport().grab().toImage()
    return image.pixelColor(table.visualRect(table.model().index(row, column)).center())


def _is_red(colour: QColor) -> bool:
    return colour.red() > colour.green() + 50 and colour.red() > colour.blue() + 50


def test_failed_rows_are_marked_and_next_failed_finds_them(qtbot, gui_tiny_checkpoint, image_folder) -> None:
    for name in ("a_broken.jpg", "z_broken.png"):
        (image_folder / name).write_text("not an image")
    dialog = _dialog(qtbot, gui_tiny_checkpoint, image_folder)
    assert not dialog.next_failed_button.isEnabled()
    with qtbot.waitSignal(dialog.batch_finished, timeout=JOB_TIMEOUT_MS):
        dialog.start()
    table = dialog.table
    failed = table.failed_rows()
    assert sorted(table.item(row, 0).text() for row in failed) == ["a_broken.jpg", "z_broken.png"]
    ok_row = next(row for row in range(table.rowCount()) if row not in failed)
    for row in failed:  # tinted apart from the ok rows, the whole message in the tooltip
        assert table.item(row, 3).background().color() != table.item(ok_row, 3).background().color()
        assert str(image_folder) in table.item(row, 4).toolTip()
    assert table.currentRow() == failed[0]  # the first failure is selected and in view when the run ends
    assert _is_red(_cell_colour(table, failed[0], COLUMNS.index("Seconds")))  # red when selected too, not blue
    assert _is_red(_cell_colour(table, failed[1], COLUMNS.index("Seconds")))
    table.selectRow(ok_row)
    assert not _is_red(_cell_colour(table, ok_row, COLUMNS.index("Seconds")))  # selection colour of an ok row
    table.selectRow(failed[0])
    assert dialog.next_failed_button.isEnabled() and dialog.next_failed_button.text() == "Next failed (2)"
    qtbot.mouseClick(dialog.next_failed_button, Qt.MouseButton.LeftButton)
    assert table.currentRow() == failed[1]
    qtbot.mouseClick(dialog.next_failed_button, Qt.MouseButton.LeftButton)
    assert table.currentRow() == failed[0]  # round again


def test_another_folder_clears_the_last_ones_results_and_a_missing_one_is_quoted(qtbot, gui_tiny_checkpoint,
                                                                                 image_folder, tmp_path) -> None:
    dialog = _dialog(qtbot, gui_tiny_checkpoint, image_folder)
    with qtbot.waitSignal(dialog.batch_finished, timeout=JOB_TIMEOUT_MS):
        dialog.start()
    assert dialog.table.rowCount() == 4 and dialog.start_button.text() == "Run again"
    missing = tmp_path / "does not exist"
    dialog.in_edit.setText(str(missing))
    assert dialog.table.rowCount() == 0 and dialog.progress.value() == 0 and dialog.progress.text() == ""
    assert dialog.out_edit.text() == str(default_output_folder(missing))  # the output follows the input
    assert dialog.start_button.text() == "Start" and "Done" not in dialog.status.text()
    with qtbot.waitSignal(dialog.batch_failed, timeout=5000) as blocker:
        dialog.start()
    assert blocker.args[0] == f'Input folder "{missing}" does not exist or is not a folder'


def test_closing_the_main_window_mid_batch_stops_the_batch_and_its_thread(qtbot, make_window, gui_tiny_checkpoint,
                                                                           image_folder) -> None:
    window = make_window(gui_tiny_checkpoint)
    window.open_folder(image_folder)
    dialog = window.batch_dialog
    qtbot.waitUntil(dialog.isVisible, timeout=5_000)
    second_image = threading.Event()

    def hold_second_image(event) -> None:  # type: ignore[no-untyped-def]
        if event.kind == "info" and event.index == 1:  # on the batch thread: the window closes meanwhile
            second_image.set()
            threading.Event().wait(1.0)

    batch_thread = dialog.batch_thread
    batch_thread.runner.job_event.connect(hold_second_image, Qt.ConnectionType.DirectConnection)
    dialog.start()
    assert second_image.wait(JOB_TIMEOUT_MS / 1000)
    asked: list[str] = []
    answer_next_box("Quit", asked)  # closing asks first while a batch runs
    window.close()
    assert len(asked) == 1
    assert not batch_thread.runner_thread.isRunning() and not dialog.running and not dialog.isVisible()
    done = sorted(p.name for p in default_output_folder(image_folder).glob("*_labels.png"))
    assert len(done) < 4  # cancelled: the images after the held one were not segmented


def test_a_segmented_rows_message_is_its_note_and_the_status_names_what_was_left_out(
        qtbot, gui_tiny_checkpoint, image_folder) -> None:
    tifffile.imwrite(image_folder / "stack.tif", np.zeros((3, 48, 64), np.uint8), photometric="minisblack")
    (image_folder / "day").mkdir()
    write_image(image_folder / "day" / "d0.png", 48, 64, seed=7)
    write_image(image_folder / ".hidden.png", 48, 64, seed=8)
    dialog = _dialog(qtbot, gui_tiny_checkpoint, image_folder)
    with qtbot.waitSignal(dialog.batch_finished, timeout=JOB_TIMEOUT_MS) as blocker:
        dialog.start()
    assert blocker.args[0].all_ok
    rows = _table(dialog)
    assert rows["stack.tif"] == ("ok", "first of 3 pages") and rows["p0.png"] == ("ok", "")
    status = dialog.status.text()
    assert "Left out 1 sub-folder that holds images: day/; tick Include sub-folders to segment it too." in status
    assert "Left out 1 hidden image (its name begins with a dot): .hidden.png." in status


def test_an_unwritable_output_folder_is_said_as_the_cli_says_and_cleared_by_another(
        qtbot, gui_tiny_checkpoint, image_folder, tmp_path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    dialog = _dialog(qtbot, gui_tiny_checkpoint, image_folder)
    dialog.out_edit.setText(str(locked))
    undo = make_unwritable(locked)
    try:
        with pytest.raises(OutputPathError) as refused:  # what `leanseg batch` says (tests/core/test_batch_cli.py)
            require_writable_output(dialog.settings())
        with qtbot.waitSignal(dialog.batch_failed, timeout=JOB_TIMEOUT_MS) as blocker:
            dialog.start()
    finally:
        undo()
    said = str(refused.value).replace(str(locked), f'"{locked}"')  # the app quotes the folders it names
    assert blocker.args[0] == said[:1].upper() + said[1:]
    assert "Errno" not in dialog.status.text() and "cannot write the output folder" in dialog.status.text()
    qtbot.keyClicks(dialog.out_edit, "2")  # the user types another folder: the error is about the last one
    assert "cannot write" not in dialog.status.text() and dialog.status.text() == "Ready: press Start."


def test_activating_a_failed_row_says_why_it_failed(qtbot, gui_tiny_checkpoint, image_folder) -> None:
    (image_folder / "empty.png").write_bytes(b"")
    dialog = _dialog(qtbot, gui_tiny_checkpoint, image_folder)
    with qtbot.waitSignal(dialog.batch_finished, timeout=JOB_TIMEOUT_MS):
        dialog.start()
    opened: list[object] = []
    dialog.open_result.connect(lambda *paths: opened.append(paths))
    row = next(r for r in range(dialog.table.rowCount()) if dialog.table.item(r, 0).text() == "empty.png")
    rect = dialog.table.visualItemRect(dialog.table.item(row, 1))
    qtbot.mouseClick(dialog.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.mouseDClick(dialog.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert "empty.png: file is empty (0 bytes)" in dialog.status.text() and not opened
    (default_output_folder(image_folder) / "p1_labels.png").unlink()  # a segmented row whose labels are gone
    dialog.open_row(next(r for r in range(dialog.table.rowCount()) if dialog.table.item(r, 0).text() == "p1.png"))
    assert "p1.png: its labels file p1_labels.png is no longer in the output folder" in dialog.status.text()
    assert not opened


def test_a_folder_whose_images_are_all_in_sub_folders_says_to_tick_the_checkbox(qtbot, gui_tiny_checkpoint,
                                                                                 tmp_path) -> None:
    (tmp_path / "shoot" / "day").mkdir(parents=True)
    write_image(tmp_path / "shoot" / "day" / "a.png", 48, 64, seed=0)
    dialog = _dialog(qtbot, gui_tiny_checkpoint, tmp_path / "shoot")
    with qtbot.waitSignal(dialog.batch_failed, timeout=JOB_TIMEOUT_MS) as blocker:
        dialog.start()
    assert "tick Include sub-folders to look in its sub-folders" in blocker.args[0]
    assert "--recursive" not in blocker.args[0] and not dialog.running
    dialog.recursive.setChecked(True)
    with qtbot.waitSignal(dialog.batch_finished, timeout=JOB_TIMEOUT_MS) as done:
        dialog.start()
    assert [record.status for record in done.args[0].records] == ["ok"]


def test_a_dialog_opened_on_a_folder_says_which_button_to_press(qtbot, make_window, gui_tiny_checkpoint,
                                                                  image_folder) -> None:
    window = make_window(gui_tiny_checkpoint)
    window.open_folder(image_folder)
    assert window.batch_dialog.status.text() == "Ready: press Start."
    empty = BatchDialog(None, gui_tiny_checkpoint, OPTIONS)
    qtbot.addWidget(empty)
    empty.show()  # closed, so its batch thread ends, when the test does
    assert empty.status.text() == "Choose a folder and press Start."
    qtbot.keyClicks(empty.in_edit, str(image_folder))
    assert empty.status.text() == "Ready: press Start."
    with qtbot.waitSignal(empty.batch_finished, timeout=JOB_TIMEOUT_MS):
        empty.start()
    reopened = _dialog(qtbot, gui_tiny_checkpoint, image_folder)  # its output folder holds a manifest
    assert reopened.status.text() == "Ready: press Resume." == f"Ready: press {reopened.start_button.text()}."


def test_a_file_that_fails_at_once_gives_no_rate_and_no_eta(qtbot, gui_tiny_checkpoint, image_folder) -> None:
    (image_folder / "broken.png").write_bytes(b"not a PNG")  # read, and failed, before p0..p3
    dialog = _dialog(qtbot, gui_tiny_checkpoint, image_folder)
    said: list[tuple[str, str]] = []
    dialog.job_event.connect(lambda event: said.append((event.kind, dialog.status.text())))
    with qtbot.waitSignal(dialog.batch_finished, timeout=JOB_TIMEOUT_MS):
        dialog.start()
    assert ("error", "1 of 5 · broken.png") in said  # not '… · 9.10 images/s · ETA 00:00' with 4 left
    segmented = [text for kind, text in said if kind == "image"]
    assert len(segmented) == 4 and all("images/s · ETA " in text for text in segmented)


def test_the_rate_counts_segmented_images_over_the_runs_time(qtbot, gui_tiny_checkpoint, image_folder,
                                                             monkeypatch) -> None:
    """A run of 4 whose first file fails at once and whose second takes 2 s: 0.50 images/s, 2 left in 4 s."""
    dialog = _dialog(qtbot, gui_tiny_checkpoint, image_folder)
    now = [100.0]

    class Clock:
        @staticmethod
        def monotonic() -> float:
            return now[0]

    monkeypatch.setattr(count_module, "time", Clock)
    failed = ImageRecord(source="broken.png", status="error", error="broken.png: not an image").to_json()
    done = ImageRecord(source="p0.png", status="ok", width=64, height=48, seconds=1.9).to_json()
    for at, event in ((100.0, JobEvent("start", "4 image(s)", count=4, data={"total": 4, "finished_before": []})),
                      (100.01, JobEvent("error", "not an image", index=0, count=4, path="broken.png", data=failed)),
                      (100.01, JobEvent("info", "segmenting p0.png", index=1, count=4, path="p0.png",
                                        data={"stage": "segmenting"})),
                      (102.0, JobEvent("image", "p0.png", index=1, count=4, path="p0.png", data=done))):
        now[0] = at
        dialog._on_event(event)
        if event.kind != "start":
            assert ("ETA" in dialog.status.text()) is (event.kind == "image")
    assert dialog.status.text() == "2 of 4 · p0.png · 0.50 images/s · ETA 00:04"
    assert dialog.progress.value() == 2 and dialog.table.rowCount() == 2
