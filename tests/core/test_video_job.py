"""The video job with a real (tiny) model: outputs, events, every-N, cancel, failures, damaged input."""
from __future__ import annotations

import csv
import threading
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from leanseg.core.events import JobEvent
from leanseg.core.io.images import ImageData
from leanseg.core.io.video import VideoReader
from leanseg.core.io.video_writer import VideoWriteError
from leanseg.core.jobs import VideoJobOptions, segment_video
from leanseg.core.model import MobileUNet
from leanseg.core.model.checkpoint import default_info, load_checkpoint, save_checkpoint
from leanseg.core.predict import InferenceOptions, Segmenter

from .conftest import TINY_MOBILE
from .video_samples import HEIGHT, WIDTH, count_frames, truncate, write_video


@pytest.fixture(scope="module")
def segmenter(tmp_path_factory: pytest.TempPathFactory) -> Segmenter:
    """One tiny model for the module (the tiler's first-call set-up is paid once); eager keeps these
    pipeline tests quick, the CLI test runs the default (lean) engine end to end."""
    torch.manual_seed(0)
    path = save_checkpoint(tmp_path_factory.mktemp("video_job") / "tiny.safetensors", MobileUNet(TINY_MOBILE).eval(),
                           default_info(TINY_MOBILE))
    return Segmenter(load_checkpoint(path), InferenceOptions(device="cpu", engine="eager"))


def test_video_job_writes_overlay_video_labels_and_csv(tmp_path: Path, segmenter: Segmenter) -> None:
    source = write_video(tmp_path / "in.mp4", frames=6, fps=10.0)
    events: list[JobEvent] = []
    options = VideoJobOptions(labels_dir=tmp_path / "labels", csv_path=tmp_path / "out.csv")
    summary = segment_video(source, tmp_path / "out.mp4", segmenter, options, on_event=events.append)

    assert summary.complete and summary.frames_done == 6 and summary.output == tmp_path / "out.mp4"
    assert count_frames(tmp_path / "out.mp4") == (6, 10.0, (WIDTH, HEIGHT))
    kinds = [e.kind for e in events]
    assert kinds == ["start"] + ["frame"] * 6 + ["done"]
    frame_events = [e for e in events if e.kind == "frame"]
    assert [(e.index, e.count) for e in frame_events] == [(k, 6) for k in range(6)]
    assert all(e.data["fps"] > 0 for e in frame_events)

    # the label PNG of frame 4 is what the Segmenter gives for that decoded frame
    with VideoReader(source, start=4) as reader:
        frame4 = next(iter(reader)).rgb
    expected = segmenter.segment(ImageData(frame4)).labels
    written = cv2.imread(str(tmp_path / "labels" / "in_000004_labels.png"), cv2.IMREAD_UNCHANGED)
    assert np.array_equal(written, expected)
    assert len(list((tmp_path / "labels").iterdir())) == 6

    with (tmp_path / "out.csv").open() as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["frame_index", "time_s", *(f"fraction {n}" for n in segmenter.info.class_names)]
    assert [int(r[0]) for r in rows[1:]] == list(range(6))
    assert [float(r[1]) for r in rows[1:]] == pytest.approx([k / 10 for k in range(6)])
    fractions = np.array([[float(x) for x in r[2:]] for r in rows[1:]])
    assert fractions.sum(axis=1) == pytest.approx(np.ones(6), abs=1e-4)
    counts = np.bincount(expected.ravel(), minlength=fractions.shape[1]) / expected.size
    assert fractions[4] == pytest.approx(counts, abs=1e-5)


def test_every_n_keeps_duration(tmp_path: Path, segmenter: Segmenter) -> None:
    source = write_video(tmp_path / "in.avi", frames=7, fps=12.0, fourcc="MJPG")
    summary = segment_video(source, tmp_path / "out.mp4", segmenter, VideoJobOptions(every=3))
    assert summary.frames_expected == 3 and summary.frames_done == 3
    assert count_frames(tmp_path / "out.mp4") == (3, 4.0, (WIDTH, HEIGHT))


def test_cancel_between_frames_leaves_a_playable_video(tmp_path: Path, segmenter: Segmenter) -> None:
    source = write_video(tmp_path / "in.mp4", frames=30)
    cancel = threading.Event()
    events: list[JobEvent] = []

    def on_event(event: JobEvent) -> None:
        events.append(event)
        if event.kind == "frame" and event.index == 3:
            cancel.set()

    summary = segment_video(source, tmp_path / "out.mp4", segmenter, VideoJobOptions(csv_path=tmp_path / "o.csv"),
                            cancel=cancel, on_event=on_event)
    assert summary.cancelled and not summary.complete and summary.frames_done == 4
    assert count_frames(tmp_path / "out.mp4")[0] == 4
    assert len((tmp_path / "o.csv").read_text().splitlines()) == 1 + 4
    assert [e.kind for e in events][-2:] == ["cancelled", "done"]
    assert not [p.name for p in tmp_path.iterdir() if ".partial" in p.name]


def test_failure_mid_job_still_finalises_what_was_written(tmp_path: Path, segmenter: Segmenter) -> None:
    source = write_video(tmp_path / "in.mp4", frames=30)

    def failing_sink(event: JobEvent) -> None:  # e.g. a GUI sink that breaks
        if event.kind == "frame" and event.index == 2:
            raise RuntimeError("display went away")

    with pytest.raises(RuntimeError, match="display went away"):
        segment_video(source, tmp_path / "out.mp4", segmenter, on_event=failing_sink)
    assert count_frames(tmp_path / "out.mp4")[0] == 3
    assert not [p.name for p in tmp_path.iterdir() if ".partial" in p.name]


def test_truncated_input_gives_the_frames_before_the_damage(tmp_path: Path, segmenter: Segmenter) -> None:
    whole = write_video(tmp_path / "whole.avi", frames=20, fourcc="MJPG")
    cut = truncate(whole, tmp_path / "cut.avi", 0.5)
    events: list[JobEvent] = []
    summary = segment_video(cut, tmp_path / "out.mp4", segmenter, on_event=events.append)
    assert 0 < summary.frames_done < 20 and not summary.complete
    assert f"stopped at frame {summary.frames_done} of 20" in summary.stop_note
    assert any(e.kind == "warning" and "stopped at frame" in e.message for e in events)
    assert count_frames(tmp_path / "out.mp4")[0] == summary.frames_done


def test_refuses_to_overwrite_the_input(tmp_path: Path, segmenter: Segmenter) -> None:
    source = write_video(tmp_path / "in.mp4", frames=2)
    with pytest.raises(VideoWriteError, match="is the input video"):
        segment_video(source, source, segmenter)
    assert count_frames(source)[0] == 2
