"""`leanseg batch` usage errors and options, in a real subprocess."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import tifffile

from leanseg.core.io.outputs import OutputPathError
from leanseg.core.jobs.batch import run_batch
from leanseg.core.jobs.batch_plan import BatchSettings
from leanseg.core.model.checkpoint import load_checkpoint
from leanseg.core.predict import InferenceOptions, Segmenter

from .test_images import exif_jpeg
from .unwritable import as_a_plain_user, make_unwritable


def _leanseg(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "leanseg.core", "batch", *args], capture_output=True, text=True,
                          timeout=300)


def test_usage_errors_exit_2_and_say_what_to_fix(tmp_path: Path, tiny_checkpoint: Path) -> None:
    result = _leanseg(str(tmp_path / "missing"), "--out", str(tmp_path / "o"), "--model", str(tiny_checkpoint))
    assert result.returncode == 2 and "does not exist" in result.stderr
    result = _leanseg(str(tmp_path), "--out", str(tmp_path), "--model", str(tiny_checkpoint))
    assert result.returncode == 2 and "choose another --out" in result.stderr


def test_an_image_or_video_file_given_as_the_folder_points_to_segment_or_video(tmp_path: Path, rgb_image: Path) -> None:
    out = tmp_path / "o"
    result = _leanseg(str(rgb_image), "--out", str(out), "--model", str(tmp_path / "no-such-model.safetensors"))
    assert result.returncode == 2
    assert result.stderr == (f"leanseg: error: {rgb_image}: is a file, not a folder (segment image files with "
                             "`leanseg segment`)\n")
    assert not out.exists()
    video = tmp_path / "clip.MP4"  # a video is pointed to `leanseg video`
    video.write_bytes(b"not decoded: refused by its name before anything reads it")
    result = _leanseg(str(video), "--out", str(out), "--model", str(tmp_path / "no-such-model.safetensors"))
    assert result.returncode == 2
    assert result.stderr == f"leanseg: error: {video}: is a file, not a folder (segment a video with `leanseg video`)\n"
    assert not out.exists()


def test_a_failed_file_exits_1_and_memory_log_is_written(tmp_path: Path, tiny_checkpoint: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    cv2.imwrite(str(inputs / "good.png"), np.zeros((32, 48, 3), np.uint8))
    (inputs / "bad.jpg").write_text("not a JPEG")
    log = tmp_path / "memory.csv"
    result = _leanseg(str(inputs), "--out", str(tmp_path / "out"), "--model", str(tiny_checkpoint),
                      "--threads", "1", "--memory-log", str(log))
    assert result.returncode == 1, result.stderr
    assert "1 segmented now" in result.stdout and "1 failed" in result.stdout
    assert "bad.jpg" in result.stderr and "not an image" in result.stderr
    assert log.read_text().startswith("time_s,allocated_bytes,") and log.with_suffix(".json").is_file()
    assert (tmp_path / "out" / "good_labels.png").exists()


def test_a_batch_where_everything_failed_gives_no_rate_or_peak(tmp_path: Path, tiny_checkpoint: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "bad.png").write_text("not a PNG")
    result = _leanseg(str(inputs), "--out", str(tmp_path / "out"), "--model", str(tiny_checkpoint), "--threads", "1")
    assert result.returncode == 1, result.stderr
    assert "1 image(s): 0 segmented now, 0 finished before, 1 failed, 0 left\n" in result.stdout
    assert "img/s" not in result.stdout and "peak" not in result.stdout
    bad = inputs / "bad.png"
    assert result.stderr.count(f"{bad}: not an image") == 2, result.stderr  # as it failed, and in the recap
    assert f"failed: {bad}: not an image" in result.stderr and "the batch goes on" not in result.stderr  # no rest
    assert f"\n1 failed:\n  {bad}: not an image" in result.stderr, result.stderr


def test_a_folder_without_images_is_refused_before_the_model_loads(tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "notes.txt").write_text("not an image")
    (inputs / "day").mkdir()
    out = tmp_path / "out"
    result = _leanseg(str(inputs), "--out", str(out), "--model", str(tmp_path / "no-such-model.safetensors"))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"no images in {inputs} (looked for .png, .jpg" in lines[0]
    assert "found 1 file that is not an image: notes.txt" in lines[0] and "--recursive" in lines[0]
    assert not out.exists()  # nothing created


def test_files_that_are_not_images_are_counted_and_named(tmp_path: Path, tiny_checkpoint: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    cv2.imwrite(str(inputs / "p0.png"), np.zeros((32, 48, 3), np.uint8))
    (inputs / "notes.txt").write_text("not an image")
    (inputs / "clip.mp4").write_bytes(b"not an image either")
    (inputs / ".hidden").write_text("never mentioned")
    result = _leanseg(str(inputs), "--out", str(tmp_path / "out"), "--model", str(tiny_checkpoint), "--device", "cpu",
                      "--engine", "eager", "--threads", "1")
    assert result.returncode == 0, result.stderr
    assert "1 image(s): 1 segmented now" in result.stdout
    assert " img/s, process peak " in result.stdout  # a CPU peak is the process's resident memory, and says so
    assert "left out 2 files that are not images: clip.mp4, notes.txt\n" in result.stdout


def test_resume_with_other_output_options_is_refused_and_says_which(tmp_path: Path, tiny_checkpoint: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    for i in range(2):
        cv2.imwrite(str(inputs / f"p{i}.png"), np.full((32, 48, 3), 40 * i, np.uint8))
    out = tmp_path / "out"
    common = ["--model", str(tiny_checkpoint), "--device", "cpu", "--engine", "eager", "--threads", "1"]
    first = _leanseg(str(inputs), "--out", str(out), *common)
    assert first.returncode == 0 and "2 segmented now" in first.stdout, first.stderr
    overlay = (out / "p1_overlay.png").read_bytes()

    for option, made in ((["--alpha", "0.9"], "with --alpha 0.5"), (["--probs"], "without --probs"),
                         (["--no-overlay"], "with --overlay --alpha 0.5")):
        refused = _leanseg(str(inputs), "--out", str(out), *common, *option)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert refused.stderr == (f"leanseg: error: {out} holds results made {made}; rerun {made}, pass --overwrite "
                                  "to redo them, or choose another output folder\n")
    assert (out / "p1_overlay.png").read_bytes() == overlay and not (out / "p1_probs.npy").exists()

    redone = _leanseg(str(inputs), "--out", str(out), "--alpha", "0.9", "--overwrite", *common)
    assert redone.returncode == 0 and "2 segmented now" in redone.stdout, redone.stderr
    assert (out / "p1_overlay.png").read_bytes() != overlay
    again = _leanseg(str(inputs), "--out", str(out), "--alpha", "0.9", *common)
    assert again.returncode == 0 and "all 2 already done (resumed); nothing to run" in again.stdout, again.stderr
    assert "img/s" not in again.stdout and "peak" not in again.stdout


def test_notes_are_said_once_a_kind_then_counted(tmp_path: Path, tiny_checkpoint: Path) -> None:
    """A folder of rotated photos gets one line of its note during the run and one count at the end, not a line
    an image; a note of its own kind (a z-stack's first page) is said as `segment` says it."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    for i in range(3):
        (inputs / f"photo{i}.jpg").write_bytes(exif_jpeg(np.full((32, 48, 3), 40 * i, np.uint8), 6))
    tifffile.imwrite(inputs / "stack.tif", np.zeros((3, 32, 48), np.uint8), photometric="minisblack")
    result = _leanseg(str(inputs), "--out", str(tmp_path / "out"), "--model", str(tiny_checkpoint), "--device", "cpu",
                      "--engine", "eager", "--threads", "1")
    assert result.returncode == 0, result.stderr
    rotated = "rotated 90° clockwise as its EXIF orientation (6) says"
    assert result.stderr.count(rotated) == 1 and "photo0.jpg: " + rotated in result.stderr
    assert "stack.tif: first of 3 pages" in result.stderr
    assert f"3 images noted like photo0.jpg: {rotated}\n" in result.stdout
    assert "stack.tif" not in result.stdout  # said in full already: once is enough


def test_sub_folders_with_images_and_hidden_images_are_named(tmp_path: Path, tiny_checkpoint: Path) -> None:
    inputs = tmp_path / "in"
    (inputs / "sub").mkdir(parents=True)
    for name in ("p0.png", ".hidden.png", "sub/inner.png"):
        cv2.imwrite(str(inputs / name), np.zeros((32, 48, 3), np.uint8))
    (inputs / "notes.txt").write_text("not an image")
    result = _leanseg(str(inputs), "--out", str(tmp_path / "out"), "--model", str(tiny_checkpoint), "--device", "cpu",
                      "--engine", "eager", "--threads", "1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith(
        "left out 1 file that is not an image: notes.txt\n"
        "left out 1 sub-folder that holds images: sub/; pass --recursive to segment it too\n"
        "left out 1 hidden image (its name begins with a dot): .hidden.png\n"
        f"outputs in {tmp_path / 'out'} (summary.csv, manifest.json)\n"), result.stdout


def test_an_unwritable_output_folder_is_refused_before_the_model_loads(tmp_path: Path, tiny_checkpoint: Path) -> None:
    """The same words as the job's (and so the app's): one wording, `cannot_write_output`."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    cv2.imwrite(str(inputs / "p0.png"), np.zeros((32, 48, 3), np.uint8))
    locked = tmp_path / "locked"
    locked.mkdir()
    undo = make_unwritable(locked)
    try:
        result = _leanseg(str(inputs), "--out", str(locked), "--model", str(tmp_path / "no-such-model.safetensors"))
        segmenter = Segmenter(load_checkpoint(tiny_checkpoint), InferenceOptions(device="cpu", engine="eager"))
        with pytest.raises(OutputPathError) as refused:
            run_batch(BatchSettings(inputs, locked), segmenter)
    finally:
        undo()
    assert result.returncode == 2 and result.stderr == f"leanseg: error: {refused.value}\n"
    assert str(refused.value).startswith(f"{locked}: cannot write the output folder (") and not list(locked.iterdir())


def test_a_summary_csv_no_batch_wrote_is_not_replaced(tmp_path: Path, tiny_checkpoint: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    cv2.imwrite(str(inputs / "a.png"), np.zeros((32, 48, 3), np.uint8))
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.csv").write_text("my own spreadsheet\n")
    result = _leanseg(str(inputs), "--out", str(out), "--model", str(tiny_checkpoint), "--threads", "1")
    assert result.returncode == 2
    assert result.stderr == (f"leanseg: error: {out / 'summary.csv'}: exists and no batch of this folder wrote it "
                             "(there is no manifest.json), so it is not replaced; move it, pass --overwrite to "
                             "replace it, or choose another output folder\n")
    assert sorted(p.name for p in out.iterdir()) == ["summary.csv"]
    assert (out / "summary.csv").read_text() == "my own spreadsheet\n"
    result = _leanseg(str(inputs), "--out", str(out), "--model", str(tiny_checkpoint), "--threads", "1",
                      "--overwrite")
    assert result.returncode == 0, result.stderr
    assert (out / "summary.csv").read_text().startswith("file,width_px,")
    rerun = _leanseg(str(inputs), "--out", str(out), "--model", str(tiny_checkpoint), "--threads", "1")
    assert rerun.returncode == 0 and "1 finished before" in rerun.stdout, rerun.stderr


def test_unreadable_inputs_are_named_as_inputs(tmp_path: Path, tiny_checkpoint: Path) -> None:
    """A sub-folder or input folder that cannot be read is named, not blamed on --out nor skipped unsaid; an
    image that cannot be read fails on its own, in the "FILE: reason" form."""
    plain_user = as_a_plain_user()
    inputs = tmp_path / "in"
    (inputs / "ok").mkdir(parents=True)
    (inputs / "locked").mkdir()
    for folder in ("ok", "locked"):
        cv2.imwrite(str(inputs / folder / "a.png"), np.zeros((32, 48, 3), np.uint8))
    cv2.imwrite(str(inputs / "ok" / "b.png"), np.zeros((32, 48, 3), np.uint8))
    out = tmp_path / "out"

    def batch(*args: str, model: Path = tiny_checkpoint) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*plain_user, sys.executable, "-m", "leanseg.core", "batch", *args, "--out", str(out),
                               "--model", str(model), "--threads", "1"], capture_output=True, text=True, timeout=300)
    try:
        (inputs / "locked").chmod(0)
        result = batch(str(inputs), "--recursive")
        assert result.returncode == 2
        assert result.stderr == f"leanseg: error: {inputs / 'locked'}: cannot read this folder (Permission denied)\n"
        assert not out.exists()
        result = batch(str(inputs / "ok"))  # a folder it never reads (no --recursive, not one of its) is no matter
        assert result.returncode == 0, result.stderr
        shutil.rmtree(out)
        (inputs / "locked").chmod(0o755)
        (inputs / "ok" / "deeper").mkdir()
        (inputs / "ok" / "deeper").chmod(0)  # found only past the first image: still said before the model loads
        result = batch(str(inputs), "--recursive", model=tmp_path / "no-model.safetensors")
        assert result.returncode == 2
        assert result.stderr == (f"leanseg: error: {inputs / 'ok' / 'deeper'}: cannot read this folder (Permission "
                                 "denied)\n")
        assert not out.exists()
        (inputs / "ok" / "deeper").chmod(0o755)
        (inputs / "locked").chmod(0)
        result = batch(str(inputs))  # without --recursive a locked sub-folder is not read, not even for the note
        assert result.returncode == 2 and "no images in" in result.stderr, result.stderr
        inputs.chmod(0)
        result = batch(str(inputs))
        assert result.returncode == 2
        assert result.stderr == f"leanseg: error: {inputs}: cannot read this folder (Permission denied)\n"
        assert not out.exists()
        inputs.chmod(0o755)
        (inputs / "ok" / "b.png").chmod(0)
        result = batch(str(inputs / "ok"))
        assert result.returncode == 1, result.stderr
        assert f"\n1 failed:\n  {inputs / 'ok' / 'b.png'}: cannot read it (Permission denied)\n" in result.stderr
    finally:
        inputs.chmod(0o755)
        (inputs / "locked").chmod(0o755)
        (inputs / "ok" / "b.png").chmod(0o644)
        if (inputs / "ok" / "deeper").exists():
            (inputs / "ok" / "deeper").chmod(0o755)


def test_changed_inputs_are_said_in_one_line_when_a_resume_redoes_them(tmp_path: Path, tiny_checkpoint: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    for name in ("a.png", "b.png", "c.png"):
        cv2.imwrite(str(inputs / name), np.zeros((32, 48, 3), np.uint8))
    out = tmp_path / "out"
    assert _leanseg(str(inputs), "--out", str(out), "--model", str(tiny_checkpoint), "--threads", "1").returncode == 0
    for name in ("b.png", "c.png"):
        cv2.imwrite(str(inputs / name), np.full((40, 48, 3), 255, np.uint8))
    result = _leanseg(str(inputs), "--out", str(out), "--model", str(tiny_checkpoint), "--threads", "1")
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("changed since") == 1, result.stderr
    assert "redoing 2 images changed since they were segmented (size or time stamp): b.png, c.png" in result.stderr
    assert "2 segmented now, 1 finished before" in result.stdout
    assert cv2.imread(str(out / "b_labels.png"), cv2.IMREAD_UNCHANGED).shape == (40, 48)
