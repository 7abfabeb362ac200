"""The video panel offscreen: open the sample video, play with a live overlay, seek, export with cancel."""
from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtWidgets import QFileDialog, QMessageBox

from leanseg.core.engine.multiscale import SUGGESTED_SCALES
from leanseg.core.predict import InferenceOptions
from leanseg.gui.video.panel import NEW_MODEL_NOTE, SIDE_WIDTH_PX, VideoPanel
from leanseg.gui.video.player import ShownFrame
from leanseg.gui.video.window import video_options

from ..core.video_samples import count_frames, write_video
from .conftest import JOB_TIMEOUT_MS, drop_path

VIDEO_TIMEOUT_MS = 3 * JOB_TIMEOUT_MS  # a model load, the tiler's first call and frames of 360x480, on a busy machine
SAMPLE = Path(__file__).resolve().parents[2] / "assets" / "samples" / "camvid_val.mp4"


@pytest.fixture
def panel(qtbot, gui_tiny_checkpoint: Path) -> VideoPanel:  # type: ignore[no-untyped-def]
    widget = VideoPanel(model_path=gui_tiny_checkpoint, options=InferenceOptions(device="cpu", engine="eager"))
    qtbot.addWidget(widget)
    widget.show()
    yield widget
    widget.shutdown()


def test_play_seek_and_cancelled_export_of_the_sample(qtbot, panel: VideoPanel, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with qtbot.waitSignal(panel.frame_shown, timeout=VIDEO_TIMEOUT_MS) as first:
        assert panel.open_video(SAMPLE)
    assert first.args[0].index == 0 and first.args[0].labels is not None
    assert panel.viewer.labels is not None and panel.viewer.overlay_shown
    assert panel.slider.maximum() == 100 and "480x360, 101 frames at 15.00 fps" in panel.info_label.text()
    # which model segments, and its classes with the shown frame's share of each
    assert panel.model_label.text().replace("\n", " · ") == "Model: tiny.safetensors · 4 classes"  # 1 or 2 lines
    shares = [panel.legend.item(i).text() for i in range(panel.legend.count())]
    assert len(shares) == 4 and all("%" in text for text in shares), shares

    seen: list[ShownFrame] = []
    panel.frame_shown.connect(seen.append)
    qtbot.mouseClick(panel.play_button, Qt.MouseButton.LeftButton)
    # 6.7 s of video: on a busy machine one slow inference may take us to the end, so one frame is enough
    qtbot.waitUntil(lambda: len(seen) >= 3 or (bool(seen) and not panel.playback.playing), timeout=VIDEO_TIMEOUT_MS)
    indices = [f.index for f in seen]
    assert indices == sorted(indices) and indices[0] >= 1  # forward, possibly skipping frames
    assert panel.viewer.labels is seen[-1].labels  # the overlay follows the frames
    assert panel.viewer.pixels is seen[-1].rgb
    assert seen[-1].labels is not None and seen[-1].index > 0
    if panel.playback.playing:
        assert panel.play_button.text() == "Pause"
        assert "live" in panel.rate_label.text() and "fps" in panel.rate_label.text()

    panel.pause()
    qtbot.waitUntil(lambda: panel.play_button.text() == "Play", timeout=VIDEO_TIMEOUT_MS)
    with qtbot.waitSignal(panel.frame_shown, timeout=VIDEO_TIMEOUT_MS, check_params_cb=lambda f: f.index == 60):
        panel.slider.setValue(60)  # UI -> player
    assert panel.position_label.text().startswith("frame 61 / 101")
    assert panel.viewer.labels is not None and panel.viewer.labels.shape == (360, 480)

    out = tmp_path / "export.mp4"

    cancel_clicked = threading.Event()

    def hold_after_three(event) -> None:  # type: ignore[no-untyped-def]
        # On the export thread (direct connection): wait for the Cancel click, so a fast export
        # cannot finish before the queued event reaches the panel.
        if event.kind == "frame" and event.index == 2:
            cancel_clicked.wait(timeout=VIDEO_TIMEOUT_MS / 1000)

    def cancel_after_three(event) -> None:  # type: ignore[no-untyped-def]
        if event.kind == "frame" and event.index == 2:
            qtbot.mouseClick(panel.cancel_button, Qt.MouseButton.LeftButton)
            cancel_clicked.set()

    panel.export.job_event.connect(hold_after_three, Qt.ConnectionType.DirectConnection)
    panel.job_event.connect(cancel_after_three)
    with qtbot.waitSignal(panel.export_finished, timeout=VIDEO_TIMEOUT_MS) as done:
        assert panel.export_to(out)
        assert not panel.export_button.isEnabled() and panel.cancel_button.isEnabled()
    summary = done.args[0]
    assert summary.cancelled and 3 <= summary.frames_done < 101
    assert count_frames(out) == (summary.frames_done, 15.0, (480, 360))  # finalised: it plays
    assert "Cancelled after" in panel.export_label.text()
    assert panel.export_button.isEnabled() and not panel.cancel_button.isEnabled()
    assert panel.progress.value() >= 3


def test_playback_skips_frames_when_inference_is_slower_than_the_video(
    qtbot, panel: VideoPanel, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    fast = write_video(tmp_path / "fast.avi", frames=2000, fps=200.0, fourcc="MJPG")  # 10 s at 200 fps
    with qtbot.waitSignal(panel.frame_shown, timeout=VIDEO_TIMEOUT_MS):
        assert panel.open_video(fast)
    seen: list[ShownFrame] = []
    panel.frame_shown.connect(seen.append)
    panel.play()
    qtbot.waitUntil(lambda: len(seen) >= 4 or not panel.playback.playing, timeout=VIDEO_TIMEOUT_MS)
    panel.pause()
    assert len(seen) >= 2 and seen[-1].skipped > 0  # inference (ms) is slower than 5 ms a frame
    assert all(0 < f.fps < 200 for f in seen[1:])
    assert all(b.index - a.index >= 1 for a, b in zip(seen, seen[1:]))


def test_full_export_and_bad_files(qtbot, panel: VideoPanel, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    errors: list[str] = []
    panel.error_shown.connect(errors.append)
    text = tmp_path / "notes.mp4"
    text.write_text("not a video\n" * 40)
    assert not panel.open_video(text)
    assert errors and str(text) in errors[-1] and "not a video" in errors[-1]
    assert not panel.play_button.isEnabled() and not panel.export_button.isEnabled()

    clip = write_video(tmp_path / "clip.mp4", frames=5, fps=10.0)
    with qtbot.waitSignal(panel.frame_shown, timeout=VIDEO_TIMEOUT_MS):
        assert panel.open_video(clip)
    with qtbot.waitSignal(panel.export_finished, timeout=VIDEO_TIMEOUT_MS) as done:
        panel.export_to(tmp_path / "out" / "clip_segmented.mp4")
    assert done.args[0].complete and done.args[0].frames_done == 5
    assert count_frames(tmp_path / "out" / "clip_segmented.mp4")[0] == 5
    assert len((tmp_path / "out" / "clip_segmented.csv").read_text().splitlines()) == 6
    assert "Exported 5 frame(s)" in panel.export_label.text()
    assert isinstance(panel.last_frame.labels, np.ndarray)

    broken = tmp_path / "broken.mp4"  # after an export: nothing of clip.mp4 may stay beside the error
    broken.write_bytes(clip.read_bytes()[:600])
    assert not panel.open_video(broken)
    assert panel.source is None and panel.last_frame is None and panel.viewer.pixels is None
    assert panel.viewer.placeholder.isVisible() and panel.viewer.placeholder.text() == "broken.mp4 could not be opened"
    assert panel.windowTitle().startswith("broken.mp4 (could not open)")
    assert panel.info_label.text() == "broken.mp4: not opened" and "clip" not in panel.position_label.text()
    assert panel.progress.text() == "" and panel.progress.value() < panel.progress.minimum()
    assert panel.export_label.text() == errors[-1] and str(broken) in errors[-1]
    assert not panel.play_button.isEnabled() and not panel.export_button.isEnabled()


def test_a_model_the_overlay_cannot_use_is_one_line_naming_the_file_and_why(
    qtbot, gui_tiny_checkpoint: Path, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    widget = VideoPanel(model_path=gui_tiny_checkpoint, options=InferenceOptions(device="cuda:99"))  # no such GPU
    qtbot.addWidget(widget)
    with qtbot.waitSignal(widget.error_shown, timeout=VIDEO_TIMEOUT_MS) as failed:
        assert widget.open_video(write_video(tmp_path / "clip.mp4", frames=3, fps=10.0))
    widget.shutdown()
    message = failed.args[0]
    assert message.startswith(f"Could not load the model for live segmentation: {gui_tiny_checkpoint}: ValueError: ")
    assert "cuda:99" in message and "\n" not in message


def _open_clip(qtbot, panel: VideoPanel, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    clip = write_video(tmp_path / "clip.mp4", frames=3, fps=10.0)
    with qtbot.waitSignal(panel.frame_shown, timeout=VIDEO_TIMEOUT_MS):
        assert panel.open_video(clip)
    return clip


def _folder_bytes(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def test_export_refuses_the_input_and_a_users_csv_unless_told_to_overwrite(
    qtbot, panel: VideoPanel, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    errors: list[str] = []
    panel.error_shown.connect(errors.append)
    clip = _open_clip(qtbot, panel, tmp_path)
    users_csv = tmp_path / "result.csv"
    users_csv.write_text("my own notes\n")
    before = _folder_bytes(tmp_path)

    for overwrite in (False, True):  # the input video is never replaced
        assert not panel.export_to(clip, overwrite=overwrite)
        assert str(clip) in errors[-1] and "is the input video" in errors[-1]
    assert not panel.export_to(tmp_path / "result.mp4")
    assert str(users_csv) in errors[-1] and "class-fraction CSV" in errors[-1] and "not written by" in errors[-1]
    assert "answer Yes" in errors[-1] and "--overwrite" not in errors[-1]  # the app's way, not the CLI's option
    assert errors[-1] in panel.export_label.text()
    assert not panel.exporting and panel.export_button.isEnabled()
    assert _folder_bytes(tmp_path) == before  # nothing written, nothing replaced, no ledger

    with qtbot.waitSignal(panel.export_finished, timeout=VIDEO_TIMEOUT_MS) as done:
        assert panel.export_to(tmp_path / "result.mp4", overwrite=True)
    assert done.args[0].complete and done.args[0].frames_done == 3
    assert count_frames(tmp_path / "result.mp4")[0] == 3
    assert len(users_csv.read_text().splitlines()) == 4 and "my own notes" not in users_csv.read_text()
    assert clip.read_bytes() == before["clip.mp4"]


def test_choose_export_asks_once_before_replacing_a_users_files(
    qtbot, panel: VideoPanel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    errors: list[str] = []
    panel.error_shown.connect(errors.append)
    clip = _open_clip(qtbot, panel, tmp_path)
    picked: list[Path] = []
    dialog_options: list[QFileDialog.Option] = []
    questions: list[str] = []
    answers: list[QMessageBox.StandardButton] = []

    def pick_file(*_args, options, **_kwargs) -> tuple[str, str]:  # type: ignore[no-untyped-def]
        dialog_options.append(options)
        return str(picked[-1]), "MP4 video (*.mp4)"

    def answer(_parent, _title: str, text: str, *_buttons) -> QMessageBox.StandardButton:  # type: ignore[no-untyped-def]
        questions.append(text)
        return answers.pop(0)

    monkeypatch.setattr(QFileDialog, "getSaveFileName", pick_file)
    monkeypatch.setattr(QMessageBox, "question", answer)

    picked.append(clip)  # the input: an error, never a question
    panel.choose_export()
    assert not questions and str(clip) in errors[-1] and "is the input video" in errors[-1]
    assert dialog_options[-1] & QFileDialog.Option.DontConfirmOverwrite  # Qt's own question would be a second one

    users_video, users_csv = tmp_path / "mine.mp4", tmp_path / "mine.csv"
    users_video.write_bytes(b"my own video")
    users_csv.write_text("my own notes\n")
    before = _folder_bytes(tmp_path)
    picked.append(users_video)
    answers.append(QMessageBox.StandardButton.No)
    panel.choose_export()
    assert len(questions) == 1 and str(users_video) in questions[0] and str(users_csv) in questions[0]
    assert not panel.exporting and _folder_bytes(tmp_path) == before

    answers.append(QMessageBox.StandardButton.Yes)
    with qtbot.waitSignal(panel.export_finished, timeout=VIDEO_TIMEOUT_MS) as done:
        panel.choose_export()
    assert len(questions) == 2 and done.args[0].frames_done == 3
    assert count_frames(users_video)[0] == 3 and len(users_csv.read_text().splitlines()) == 4

    with qtbot.waitSignal(panel.export_finished, timeout=VIDEO_TIMEOUT_MS) as again:
        panel.choose_export()  # the files are ours now: no question
    assert len(questions) == 2 and again.args[0].complete


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # QDragEnterEvent has only the QPoint form
def test_main_window_opens_a_dropped_video_in_the_panel(qtbot, make_window, gui_tiny_checkpoint) -> None:  # type: ignore[no-untyped-def]
    window = make_window(gui_tiny_checkpoint)
    frames: list[ShownFrame] = []
    drop_path(window, SAMPLE)  # File > Open video ends in the same window.open_video
    panel = window.video_panel
    panel.frame_shown.connect(frames.append)
    qtbot.waitUntil(lambda: bool(frames), timeout=VIDEO_TIMEOUT_MS)
    assert panel.isVisible() and panel.source == SAMPLE
    assert panel.model_path == gui_tiny_checkpoint and frames[0].labels is not None
    assert panel.viewer.labels is not None
    window.close()  # stops the panel's threads
    assert panel.playback._thread is None


def test_video_runs_without_mirror_or_multiscale_averaging() -> None:
    options = InferenceOptions(device="cpu", mirror="flip", scales=SUGGESTED_SCALES)  # the main window's choices
    assert video_options(options) == replace(options, mirror="off", scales=(1.0,))


def test_a_new_model_takes_the_old_overlay_with_it_and_a_long_name_keeps_the_width(
        qtbot, panel: VideoPanel, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from leanseg.core.model import MobileUNet
    from leanseg.core.model.checkpoint import default_info, save_checkpoint

    from .conftest import TINY

    three = replace(TINY, num_classes=3)
    other = save_checkpoint(tmp_path / f"{'a_model_with_a_very_long_file_name_' * 3}3.safetensors",
                            MobileUNet(three).eval(), default_info(three))
    with qtbot.waitSignal(panel.frame_shown, timeout=VIDEO_TIMEOUT_MS):
        assert panel.open_video(SAMPLE)
    old = panel.last_frame
    assert panel.viewer.labels is not None and panel.legend.count() == 4
    video_width = panel.viewer.width()
    with qtbot.waitSignal(panel.frame_shown, timeout=VIDEO_TIMEOUT_MS,
                          check_params_cb=lambda shown: shown.labels is not None) as redrawn:
        panel.set_model(other, panel.options)
        # the legend has the new classes at once: the old model's overlay must not stand under it
        assert panel.legend.count() == 3 and panel.viewer.labels is None
        assert panel.rate_label.text() == NEW_MODEL_NOTE
        qtbot.wait(50)
        assert panel.viewer.width() == video_width  # the long name is cut, not widening its column
        panel._on_frame(old)  # a frame the old model segmented, still on its way: drawn bare
        assert panel.viewer.labels is None
    assert redrawn.args[0].model_serial == panel.playback.model_serial
    assert panel.viewer.labels is redrawn.args[0].labels and int(panel.viewer.labels.max()) < 3
    label = panel.model_label
    assert "…" in label.text() and label.text().endswith("\n3 classes") and other.name in label.toolTip()


def test_the_model_name_is_shown_whole_wrapped_not_cut_in_the_middle(qtbot, app_style, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from leanseg.core.model import MobileUNet
    from leanseg.core.model.checkpoint import default_info, save_checkpoint

    from .conftest import TINY

    shipped_name = save_checkpoint(tmp_path / "camvid_mobileunet.safetensors", MobileUNet(TINY).eval(),
                                   default_info(TINY))
    panel = VideoPanel(model_path=shipped_name, options=InferenceOptions(device="cpu", engine="eager"))
    qtbot.addWidget(panel)
    panel.show()
    label = panel.model_label
    assert label.text().replace("\u200b", "") == "Model: camvid_mobileunet.safetensors\n4 classes"
    assert str(shipped_name) in label.toolTip()
    assert label.height() <= 3 * label.fontMetrics().lineSpacing() + 4  # the name on two lines, the classes below
    very_long = save_checkpoint(tmp_path / f"{'a_model_with_a_very_long_file_name_' * 3}3.safetensors",
                                MobileUNet(TINY).eval(), default_info(TINY))
    panel.set_model(very_long, panel.options)  # out of room: cut at the end of its stem, the extension kept
    shown = label.text().replace("\u200b", "")
    assert shown.startswith("Model: a_model_with_a_very_long_") and shown.endswith("….safetensors\n4 classes")
    assert str(very_long) in label.toolTip()
    one_word = save_checkpoint(tmp_path / "DeepLabV3PlusMobileNetV3LargeCityscapesFinetunedOnMyStreets.safetensors",
                               MobileUNet(TINY).eval(), default_info(TINY))
    panel.set_model(one_word, panel.options)  # nowhere to wrap: cut to the column, not past its edge
    shown = label.text().replace("\u200b", "")
    assert shown.startswith("Model: DeepLab") and shown.endswith("….safetensors\n4 classes")
    wrapped = label.fontMetrics().boundingRect(QRect(0, 0, SIDE_WIDTH_PX, 10_000), Qt.TextFlag.TextWordWrap,
                                               label.text())
    assert wrapped.width() <= SIDE_WIDTH_PX
