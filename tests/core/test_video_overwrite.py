"""`leanseg video` never overwrites its input, writes no path twice, and replaces an existing file only if
an earlier `leanseg video` wrote it (or with --overwrite): real `leanseg` processes on real files."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from leanseg.core.memory.log import SERIES, write_memory_csv

from .video_samples import count_frames, write_video


def _leanseg(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "leanseg.core", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def _model(checkpoint: Path) -> tuple[str, ...]:
    return ("--model", str(checkpoint), "--device", "cpu", "--threads", "1", "--engine", "eager")


def _refused(result: subprocess.CompletedProcess[str], path: Path, problem: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"leanseg: error: {path}: ") and problem in lines[0], lines


@pytest.mark.parametrize("option", ["--csv", "--out", "--memory-log"])
def test_an_output_on_the_input_is_refused_before_the_model_loads(tmp_path: Path, option: str) -> None:
    source = write_video(tmp_path / "in.mp4", frames=3)
    before = source.read_bytes()
    outputs = {"--out": tmp_path / "out.mp4", "--csv": tmp_path / "out.csv", option: source}
    extra = () if option == "--memory-log" else ("--memory-log", tmp_path / "memory.csv")
    result = _leanseg("video", source, *[a for item in outputs.items() for a in item], *extra, "--overwrite",
                      "--model", tmp_path / "no-such-model.safetensors")  # refused before the model is looked at
    _refused(result, source, "is the input video and is never overwritten")
    assert source.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mp4"]  # nothing written, no ledger either


def test_two_outputs_on_one_path_are_refused(tmp_path: Path, tiny_checkpoint: Path) -> None:
    source = write_video(tmp_path / "in.mp4", frames=3)
    out = tmp_path / "out.mp4"
    result = _leanseg("video", source, "--out", out, "--csv", out, *_model(tiny_checkpoint))
    _refused(result, out, "is both the output video (--out) and the class-fraction CSV")
    assert not out.exists()


def test_foreign_files_are_refused_and_kept_unless_overwrite(tmp_path: Path, tiny_checkpoint: Path) -> None:
    source = write_video(tmp_path / "v.mp4", frames=3)
    other_video = write_video(tmp_path / "other.mp4", frames=2)
    picture = tmp_path / "some.png"
    picture.write_bytes(b"the user's picture")
    foreign_csv = tmp_path / "v_seg.csv"
    foreign_csv.write_text("the user's own table\n")
    kept = {p: p.read_bytes() for p in (other_video, picture, foreign_csv)}

    cases = [(("--out", other_video), other_video), (("--out", tmp_path / "new.mp4", "--csv", picture), picture),
             (("--out", tmp_path / "v_seg.mp4"), foreign_csv)]  # the default CSV, OUT with .csv
    for args, victim in cases:
        result = _leanseg("video", source, *args, *_model(tiny_checkpoint))
        _refused(result, victim, "already exists and was not written by leanseg video; pass --overwrite")
    assert {p: p.read_bytes() for p in kept} == kept
    assert not (tmp_path / "new.mp4").exists() and not (tmp_path / "v_seg.mp4").exists()

    replaced = _leanseg("video", source, "--out", other_video, "--csv", foreign_csv, "--overwrite",
                        *_model(tiny_checkpoint))
    assert replaced.returncode == 0, replaced.stderr
    assert count_frames(other_video)[0] == 3
    assert foreign_csv.read_text().startswith("frame_index,time_s,") and len(foreign_csv.read_text().splitlines()) == 4
    assert picture.read_bytes() == kept[picture]


def test_a_rerun_replaces_its_own_outputs_and_nothing_else(tmp_path: Path, tiny_checkpoint: Path) -> None:
    source = write_video(tmp_path / "clip.mp4", frames=3)
    before = source.read_bytes()
    out, labels, memory = tmp_path / "out" / "seg.mp4", tmp_path / "labels", tmp_path / "out" / "memory.csv"
    args = ("video", source, "--out", out, "--labels-dir", labels, "--memory-log", memory, *_model(tiny_checkpoint))
    first = _leanseg(*args)
    assert first.returncode == 0, first.stderr
    written = [out, out.with_suffix(".csv"), memory, memory.with_suffix(".json"),
               *(labels / f"clip_{k:06d}_labels.png" for k in range(3))]
    assert all(p.is_file() for p in written)
    assert len(list(labels.iterdir())) == 3  # the label folder holds only the PNGs
    for path in written:  # a rerun must really write them again
        path.write_bytes(b"stale")

    second = _leanseg(*args)  # no --overwrite: these are leanseg video's own
    assert second.returncode == 0, second.stderr
    assert all(p.read_bytes() != b"stale" for p in written)
    assert count_frames(out)[0] == 3 and source.read_bytes() == before

    stranger = tmp_path / "theirs" / "clip_000001_labels.png"  # a name this run writes, in a folder not ours
    stranger.parent.mkdir()
    stranger.write_bytes(b"someone else's labels")
    third = _leanseg(*args[:4], "--labels-dir", stranger.parent, *args[6:])
    _refused(third, stranger, "already exists and was not written by leanseg video")
    assert stranger.read_bytes() == b"someone else's labels"


def test_a_run_from_another_video_says_which_outputs_it_replaces(tmp_path: Path, tiny_checkpoint: Path) -> None:
    first, second = write_video(tmp_path / "a.mp4", frames=2), write_video(tmp_path / "b.mp4", frames=3)
    out = tmp_path / "seg.mp4"
    assert _leanseg("video", first, "--out", out, *_model(tiny_checkpoint)).returncode == 0
    rerun = _leanseg("video", first, "--out", out, *_model(tiny_checkpoint))
    assert rerun.returncode == 0 and "made earlier from" not in rerun.stdout
    other = _leanseg("video", second, "--out", out, *_model(tiny_checkpoint))
    assert other.returncode == 0, other.stderr
    for path in (out, out.with_suffix(".csv")):
        assert f"replaces {path}, made earlier from {first.resolve()}" in other.stdout, other.stdout
    assert count_frames(out)[0] == 3
    again = _leanseg("video", second, "--out", out, *_model(tiny_checkpoint))
    assert again.returncode == 0 and "made earlier from" not in again.stdout  # the ledger now names b.mp4


def test_a_memory_log_not_named_csv_is_refused_before_the_model_loads(tmp_path: Path) -> None:
    source = write_video(tmp_path / "in.mp4", frames=3)
    result = _leanseg("video", source, "--out", tmp_path / "out.mp4", "--memory-log", tmp_path / "notes.txt",
                      "--model", tmp_path / "no-such-model.safetensors")
    assert result.returncode == 2
    assert result.stderr == (f"leanseg: error: --memory-log {tmp_path / 'notes.txt'}: a memory log is a CSV file; "
                             "give a name ending in .csv, such as notes.csv\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mp4"]


def test_an_earlier_memory_log_of_any_command_is_replaced_without_overwrite(tmp_path: Path) -> None:
    """As segment and batch replace one: the log passes the output checks, and the run goes on to the model."""
    source = write_video(tmp_path / "in.mp4", frames=3)
    earlier = tmp_path / "memory.csv"
    write_memory_csv(earlier, {"time": np.zeros(1), **{name: np.zeros(1) for name in SERIES}}, [], {})
    missing = tmp_path / "no-such-model.safetensors"
    result = _leanseg("video", source, "--out", tmp_path / "out.mp4", "--memory-log", earlier, "--model", missing)
    assert result.returncode == 2 and "memory log" not in result.stderr and f"{missing}: no such file" in result.stderr
    earlier.write_text("name,value\na,1\n")  # not a memory log: refused as before
    result = _leanseg("video", source, "--out", tmp_path / "out.mp4", "--memory-log", earlier, "--model", missing)
    _refused(result, earlier, "was not written by leanseg video")
