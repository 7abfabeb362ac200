"""`leanseg video` end to end in a real subprocess."""
from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .unwritable import make_unwritable
from .video_samples import HEIGHT, WIDTH, count_frames, truncate, write_video


def _leanseg(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "leanseg.core", *args], capture_output=True, text=True, timeout=300)


def test_video_command_writes_video_csv_and_label_pngs(tmp_path: Path, tiny_checkpoint: Path) -> None:
    source = write_video(tmp_path / "in.mp4", frames=8, fps=10.0)
    out = tmp_path / "out" / "seg.mp4"
    result = _leanseg("video", str(source), "--out", str(out), "--labels-dir", str(tmp_path / "labels"),
                      "--every", "2", "--model", str(tiny_checkpoint), "--device", "cpu",
                      "--memory-log", str(tmp_path / "memory.csv"), "--tiling", "fast")
    assert result.returncode == 0, result.stderr
    assert "tiling fast: one tile" in result.stdout  # the plan, printed once, above the bar
    assert "64x48, 8 frames at 10.00 fps" in result.stdout
    assert "4 frame(s) in" in result.stdout and "frames/s end to end" in result.stdout
    assert "4/4" in result.stderr and "frames/s ETA" in result.stderr  # the progress bar, still there after the plan
    assert count_frames(out) == (4, 5.0, (WIDTH, HEIGHT))
    assert len((tmp_path / "out" / "seg.csv").read_text().splitlines()) == 1 + 4
    assert sorted(p.name for p in (tmp_path / "labels").iterdir()) == [
        f"in_{k:06d}_labels.png" for k in (0, 2, 4, 6)]
    assert "memory log" in result.stdout and (tmp_path / "memory.csv").read_text().startswith("time_s,allocated_bytes,")
    assert (tmp_path / "memory.json").is_file()  # the log's metadata, beside it


def test_video_command_errors_name_the_file(tmp_path: Path, tiny_checkpoint: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a video at all\n")
    result = _leanseg("video", str(text), "--out", str(tmp_path / "o.mp4"), "--model", str(tiny_checkpoint))
    assert result.returncode == 2
    assert f"{text}: not a video" in result.stderr
    assert not (tmp_path / "o.mp4").exists()

    cut = truncate(write_video(tmp_path / "whole.avi", frames=16, fourcc="MJPG"), tmp_path / "cut.avi", 0.5)
    result = _leanseg("video", str(cut), "--out", str(tmp_path / "o.mp4"), "--model", str(tiny_checkpoint),
                      "--no-csv", "--engine", "eager")
    assert result.returncode == 1, result.stderr
    assert f"warning: {cut}: stopped at frame" in result.stderr and "of 16" in result.stderr
    assert 0 < count_frames(tmp_path / "o.mp4")[0] < 16
    assert not (tmp_path / "o.csv").exists()


def test_sigint_stops_after_the_current_frame_even_when_started_with_sigint_ignored(
    tmp_path: Path, tiny_checkpoint: Path
) -> None:
    """A script's background job (`leanseg video ... &`) starts with SIGINT ignored; `kill -INT` still stops it,
    and what it wrote plays and says how far it got."""
    source = write_video(tmp_path / "long.mp4", frames=1500, fps=10.0)
    out, labels = tmp_path / "seg.mp4", tmp_path / "labels"
    process = subprocess.Popen(
        [sys.executable, "-m", "leanseg.core", "video", str(source), "--out", str(out), "--labels-dir", str(labels),
         "--model", str(tiny_checkpoint), "--engine", "eager", "--threads", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if labels.is_dir() and len(list(labels.iterdir())) >= 3:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    match = re.search(r"stopped by Ctrl-C after (\d+) of 1500 frame\(s\)", stderr)
    assert match, stderr
    done = int(match.group(1))
    assert 3 <= done < 1500
    assert count_frames(out)[0] == done and len((tmp_path / "seg.csv").read_text().splitlines()) == 1 + done
    assert re.search(r"inference \d+ ms/frame median \(the first \d+ ms: warm-up\)", stdout), stdout


def test_every_below_one_names_the_option(tmp_path: Path) -> None:
    result = _leanseg("video", str(tmp_path / "in.mp4"), "--out", str(tmp_path / "o.mp4"), "--every", "0")
    assert result.returncode == 2 and "argument --every: must be at least 1, got 0" in result.stderr


def test_a_missing_input_is_refused_before_the_model_loads(tmp_path: Path, tiny_checkpoint: Path) -> None:
    missing = tmp_path / "missing.mp4"
    result = _leanseg("video", str(missing), "--out", str(tmp_path / "o.mp4"), "--model", str(tiny_checkpoint),
                      "--threads", "1")
    assert result.returncode == 2
    assert result.stderr.strip() == f"leanseg: error: {missing}: no such file"
    assert "model" not in result.stdout  # the model line would come first had it loaded
    assert not (tmp_path / "o.mp4").exists() and not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize("where", ["--out", "--labels-dir"])
def test_an_unwritable_output_folder_is_named_before_the_model_loads(tmp_path: Path, tiny_checkpoint: Path,
                                                                    where: str) -> None:
    """The folder the user gave, not the hidden record of what video wrote there, and before any model line."""
    source = write_video(tmp_path / "in.mp4", frames=2)
    read_only = tmp_path / "ro"
    read_only.mkdir()
    outputs = (["--out", str(read_only / "v.mp4")] if where == "--out"
               else ["--out", str(tmp_path / "v.mp4"), "--labels-dir", str(read_only / "labels")])
    undo = make_unwritable(read_only)
    try:
        result = _leanseg("video", str(source), *outputs, "--model", str(tiny_checkpoint), "--threads", "1")
    finally:
        undo()
    assert result.returncode == 2, result.stderr
    named = f"--out {read_only / 'v.mp4'}: {read_only}" if where == "--out" else f"--labels-dir {read_only / 'labels'}"
    assert result.stderr.startswith(f"leanseg: error: {named}: cannot write the output folder ("), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and ".leanseg-video" not in result.stderr
    assert "model" not in result.stdout
    assert list(read_only.iterdir()) == [] and not (tmp_path / "v.mp4").exists()


def test_a_write_that_fails_later_names_the_folder_not_the_ledger() -> None:
    from leanseg.core.commands.video import _cannot_write
    from leanseg.core.jobs.video_guard import LEDGER_NAME

    folders = [Path("imm")]  # as the user named the folder of --out imm/v.mp4
    ledger = PermissionError(1, "Operation not permitted", str((Path("imm") / LEDGER_NAME).resolve()))
    assert _cannot_write(ledger, folders, Path("imm/v.mp4")) == "imm: cannot write the output folder " \
                                                                 "(Operation not permitted)"
    video = PermissionError(13, "Permission denied", "imm/v.mp4")
    assert _cannot_write(video, folders, Path("imm/v.mp4")) == "imm/v.mp4: cannot write it (Permission denied)"
