"""`leanseg video` keeps the input's frame size: exactly in .avi, padded to even (and said) in .mp4."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from leanseg.core.io.video_writer import VideoWriter

from .video_samples import count_frames, frame_pixels

WIDTH, HEIGHT = 367, 241  # odd both ways, as in the issue


def _odd_video(path: Path, frames: int = 3) -> Path:
    """A 367x241 MJPEG AVI written by OpenCV's own writer (FFmpeg would round the size down to even)."""
    writer = cv2.VideoWriter(str(path), cv2.CAP_OPENCV_MJPEG, cv2.VideoWriter.fourcc(*"MJPG"), 10.0, (WIDTH, HEIGHT))
    assert writer.isOpened()
    for index in range(frames):
        writer.write(cv2.cvtColor(frame_pixels(index, WIDTH, HEIGHT), cv2.COLOR_RGB2BGR))
    writer.release()
    assert count_frames(path)[2] == (WIDTH, HEIGHT)
    return path


def _leanseg(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "leanseg.core", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("suffix, size, padded", [(".avi", (WIDTH, HEIGHT), False),
                                                  (".mp4", (WIDTH + 1, HEIGHT + 1), True)])
def test_video_command_keeps_odd_sizes(tmp_path: Path, tiny_checkpoint: Path, suffix: str,
                                       size: tuple[int, int], padded: bool) -> None:
    source = _odd_video(tmp_path / "odd.avi")
    out = tmp_path / f"seg{suffix}"
    done = _leanseg("video", str(source), "--out", str(out), "--labels-dir", str(tmp_path / "labels"),
                    "--model", str(tiny_checkpoint), "--device", "cpu", "--engine", "eager", "--no-csv")
    assert done.returncode == 0, done.stderr
    assert count_frames(out) == (3, 10.0, size)
    note = f"{out.name} is {WIDTH + 1}x{HEIGHT + 1}: this codec needs even sizes"
    assert (note in done.stdout) == padded, done.stdout
    for label_png in (tmp_path / "labels").iterdir():
        assert cv2.imread(str(label_png), cv2.IMREAD_UNCHANGED).shape == (HEIGHT, WIDTH)


def test_padding_repeats_the_last_column_and_row(tmp_path: Path) -> None:
    frame = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
    frame[:, -1] = (255, 255, 255)  # a white last column, a white last row
    frame[-1, :] = (255, 255, 255)
    with VideoWriter(tmp_path / "pad.mp4", 10.0, WIDTH, HEIGHT) as writer:
        assert writer.encoded_size == (WIDTH + 1, HEIGHT + 1) and writer.padding_note
        for _ in range(2):
            writer.write(frame)
    capture = cv2.VideoCapture(str(tmp_path / "pad.mp4"))
    ok, decoded = capture.read()
    capture.release()
    assert ok and decoded.shape == (HEIGHT + 1, WIDTH + 1, 3)
    assert decoded[HEIGHT // 2, -1].mean() > 150 and decoded[-1, WIDTH // 2].mean() > 150  # white, repeated
    assert decoded[HEIGHT // 2, WIDTH // 2].mean() < 60
    with VideoWriter(tmp_path / "exact.avi", 10.0, WIDTH, HEIGHT) as writer:
        assert writer.encoded_size == (WIDTH, HEIGHT) and writer.padding_note == ""


def test_video_no_overlay_writes_only_the_csv_and_labels(tmp_path: Path, tiny_checkpoint: Path) -> None:
    source = _odd_video(tmp_path / "odd.avi", frames=2)
    common = ["--model", str(tiny_checkpoint), "--device", "cpu", "--engine", "eager"]
    done = _leanseg("video", str(source), "--out", str(tmp_path / "seg.mp4"), "--no-overlay",
                    "--labels-dir", str(tmp_path / "labels"), *common)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "seg.mp4").exists() and len((tmp_path / "seg.csv").read_text().splitlines()) == 1 + 2
    assert len(list((tmp_path / "labels").iterdir())) == 2
    nothing = _leanseg("video", str(source), "--out", str(tmp_path / "x.mp4"), "--no-overlay", "--no-csv", *common)
    assert nothing.returncode == 2 and "nothing to write" in nothing.stderr
