"""Video reading and writing on real files: metadata, prefetching, damage, errors, finalisation."""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from leanseg.core.io.video import VideoReader, VideoReadError, probe_video
from leanseg.core.io.video_writer import VideoWriteError, VideoWriter

from .video_samples import HEIGHT, WIDTH, count_frames, frame_pixels, grey_level, truncate, write_video


@pytest.mark.parametrize(("fourcc", "suffix"), [("mp4v", ".mp4"), ("MJPG", ".avi")])
def test_probe_reports_size_fps_and_frame_count(tmp_path: Path, fourcc: str, suffix: str) -> None:
    path = write_video(tmp_path / f"clip{suffix}", frames=7, fps=12.5, fourcc=fourcc)
    info = probe_video(path)
    assert (info.width, info.height, info.frame_count) == (WIDTH, HEIGHT, 7)
    assert info.fps == pytest.approx(12.5)
    assert info.container == suffix.lstrip(".")
    assert "64x48, 7 frames at 12.50 fps" in info.describe()


def test_reader_yields_every_frame_in_order_as_rgb(tmp_path: Path) -> None:
    path = write_video(tmp_path / "clip.mp4", frames=9, fps=10.0)
    with VideoReader(path, prefetch=2) as reader:
        frames = list(reader)
    assert [f.index for f in frames] == list(range(9))
    assert [f.seconds for f in frames] == pytest.approx([i / 10 for i in range(9)])
    assert all(f.rgb.shape == (HEIGHT, WIDTH, 3) and f.rgb.dtype == np.uint8 for f in frames)
    levels = [grey_level(f.rgb) for f in frames]
    assert levels == pytest.approx([20.0 * i for i in range(9)], abs=4)
    assert reader.stop_note == ""


def test_reader_every_and_start(tmp_path: Path) -> None:
    path = write_video(tmp_path / "clip.avi", frames=10, fourcc="MJPG")
    with VideoReader(path, every=3) as reader:
        assert reader.frames_to_read == 4
        assert [f.index for f in reader] == [0, 3, 6, 9]
    with VideoReader(path, start=4) as reader:
        frames = list(reader)
    assert [f.index for f in frames] == [4, 5, 6, 7, 8, 9]
    assert grey_level(frames[0].rgb) == pytest.approx(80.0, abs=4)


def test_reader_closes_early_without_hanging(tmp_path: Path) -> None:
    path = write_video(tmp_path / "clip.mp4", frames=20)
    reader = VideoReader(path, prefetch=1)
    first = next(iter(reader))
    assert first.index == 0
    reader.close()  # the decoding thread is blocked on a full queue; close must still return
    reader.close()
    assert reader._thread is not None and not reader._thread.is_alive()


@pytest.mark.parametrize(("fourcc", "suffix"), [("MJPG", ".avi"), ("mp4v", ".mkv")])
def test_truncated_midway_yields_frames_before_the_damage_and_says_where(
    tmp_path: Path, fourcc: str, suffix: str
) -> None:
    whole = write_video(tmp_path / f"whole{suffix}", frames=20, fourcc=fourcc)
    cut = truncate(whole, tmp_path / f"cut{suffix}", 0.5)
    with VideoReader(cut) as reader:
        frames = list(reader)
    assert 0 < len(frames) < 20
    assert [f.index for f in frames] == list(range(len(frames)))
    assert reader.stopped_at == len(frames)
    assert f"stopped at frame {len(frames)} of 20" in reader.stop_note
    assert str(cut) in reader.stop_note and "truncated or damaged" in reader.stop_note


def test_truncated_mp4_without_index_is_a_clear_error(tmp_path: Path) -> None:
    whole = write_video(tmp_path / "whole.mp4", frames=10)
    cut = truncate(whole, tmp_path / "cut.mp4", 0.6)
    with pytest.raises(VideoReadError) as err:
        probe_video(cut)
    assert str(cut) in str(err.value)
    assert "truncated MP4" in str(err.value) and "'mdat' box" in str(err.value)


@pytest.mark.parametrize(("fourcc", "suffix"), [("mp4v", ".mp4"), ("MJPG", ".avi")])
def test_video_with_no_frames_is_a_clear_error(tmp_path: Path, fourcc: str, suffix: str) -> None:
    path = write_video(tmp_path / f"empty{suffix}", frames=0, fourcc=fourcc)
    with pytest.raises(VideoReadError, match="no .*frames") as err:
        VideoReader(path)
    assert str(path) in str(err.value)


def test_non_videos_are_clear_errors(tmp_path: Path) -> None:
    text = tmp_path / "notes.mp4"
    text.write_text("hello\n" * 200)  # FFmpeg itself would open this as ANSI art
    image = tmp_path / "photo.avi"
    cv2.imwrite(str(tmp_path / "photo.png"), frame_pixels(1))
    image.write_bytes((tmp_path / "photo.png").read_bytes())
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    cases = {text: "not a video", image: "is a PNG image, not a video", empty: "empty (0 bytes)",
             tmp_path / "missing.mp4": "no such file", tmp_path: "is a folder"}
    for path, reason in cases.items():
        with pytest.raises(VideoReadError) as err:
            probe_video(path)
        assert str(err.value).startswith(str(path)) and reason in str(err.value)


def test_writer_finalises_on_error_and_never_exposes_a_partial_file(tmp_path: Path) -> None:
    out = tmp_path / "out" / "seg.mp4"
    with pytest.raises(RuntimeError, match="boom"), VideoWriter(out, 10.0, WIDTH, HEIGHT) as writer:
        for index in range(5):
            writer.write(frame_pixels(index))
            assert not out.exists() and writer.partial_path.exists()
        raise RuntimeError("boom")
    assert not writer.partial_path.exists()
    assert count_frames(out) == (5, 10.0, (WIDTH, HEIGHT))


def test_writer_with_no_frames_leaves_no_file(tmp_path: Path) -> None:
    out = tmp_path / "seg.mp4"
    with VideoWriter(out, 10.0, WIDTH, HEIGHT) as writer:
        pass
    assert writer.close() is None
    assert list(tmp_path.iterdir()) == []


def test_writer_rejects_bad_frames_and_types(tmp_path: Path) -> None:
    out = tmp_path / "seg.mp4"
    with VideoWriter(out, 10.0, WIDTH, HEIGHT) as writer, pytest.raises(VideoWriteError, match="expected"):
        writer.write(np.zeros((HEIGHT + 1, WIDTH, 3), np.uint8))
    with pytest.raises(VideoWriteError, match="unsupported output type '.gif'"):
        VideoWriter(tmp_path / "seg.gif", 10.0, WIDTH, HEIGHT)
    with pytest.raises(VideoWriteError, match="frame rate"):
        VideoWriter(out, 0.0, WIDTH, HEIGHT)


def test_writer_round_trip_avi(tmp_path: Path) -> None:
    out = tmp_path / "seg.avi"
    with VideoWriter(out, 15.0, WIDTH, HEIGHT) as writer:
        for index in range(4):
            writer.write(frame_pixels(index))
    with VideoReader(out) as reader:
        levels = [grey_level(f.rgb) for f in reader]
    assert levels == pytest.approx([0, 20, 40, 60], abs=4)


def test_seeker_reads_frames_by_index_forward_backward_and_past_the_end(tmp_path: Path) -> None:
    from leanseg.core.io.video import VideoSeeker

    path = write_video(tmp_path / "clip.mp4", frames=40)
    with VideoSeeker(path) as seeker:
        assert seeker.info.frame_count == 40
        for index in (0, 1, 5, 37, 3, 4, 11, 11):  # steps, skips, jumps back and forward, a repeat
            frame = seeker.read(index)
            assert frame is not None and frame.index == index
            assert grey_level(frame.rgb) == pytest.approx((20.0 * index) % 240, abs=4), index
        assert seeker.read(40) is None
    with pytest.raises(VideoReadError, match="not a video"):
        VideoSeeker(_text_file(tmp_path))


def _text_file(tmp_path: Path) -> Path:
    path = tmp_path / "text.mp4"
    path.write_text("text\n" * 50)
    return path
