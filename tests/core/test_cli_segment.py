"""`leanseg segment` end to end in a real subprocess."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from leanseg.core.cli import build_parser
from leanseg.core.io.images import read_image
from leanseg.core.memory import parse_bytes

from .unwritable import as_a_plain_user, make_unwritable


def _leanseg(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "leanseg.core", *args], capture_output=True, text=True,
                          timeout=300, env=env)


def test_segment_writes_labels_and_overlay_and_skips_bad_files(
    tmp_path: Path, tiny_checkpoint: Path, rgb_image: Path
) -> None:
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"garbage")
    out = tmp_path / "out"
    result = _leanseg("segment", str(rgb_image), str(bad), "--out", str(out), "--model", str(tiny_checkpoint),
                      "--device", "cpu")
    assert result.returncode == 1, result.stderr
    assert "bad.png" in result.stderr and "not an image" in result.stderr
    assert "61x45" in result.stdout and "1 of 2 image(s) segmented" in result.stdout
    printed = re.search(r"peak ([\d.]+ \w+) \(([\d.]+ \w+) above the start\)", result.stdout)
    assert printed, result.stdout
    peak, rise = (parse_bytes(text.replace(" ", "")) for text in printed.groups())
    assert 0 < rise < peak  # the process peak, and how far it rose while this image ran
    labels = cv2.imread(str(out / "input_labels.png"), cv2.IMREAD_UNCHANGED)
    assert labels.shape == (45, 61) and labels.dtype == np.uint8 and labels.max() < 4
    assert read_image(out / "input_overlay.png").pixels.shape == (45, 61, 3)
    # the ledger of what segment wrote here (so a rerun may replace it); the folder lock is gone after the run
    assert sorted(p.name for p in out.iterdir()) == [".leanseg-segment.jsonl", "input_labels.png", "input_overlay.png"]


def test_all_good_exits_zero(tmp_path: Path, tiny_checkpoint: Path, rgb_image: Path) -> None:
    result = _leanseg("segment", str(rgb_image), "--out", str(tmp_path / "o"), "--model", str(tiny_checkpoint))
    assert result.returncode == 0, result.stderr


def test_cuda_without_cuda_says_so(tmp_path: Path, tiny_checkpoint: Path, rgb_image: Path) -> None:
    import torch

    if torch.cuda.is_available():
        return
    result = _leanseg("segment", str(rgb_image), "--out", str(tmp_path), "--model", str(tiny_checkpoint),
                      "--device", "cuda")
    assert result.returncode == 2
    assert "CUDA is not available" in result.stderr


def test_bad_model_file_is_a_clear_error(tmp_path: Path, rgb_image: Path) -> None:
    model = tmp_path / "model.safetensors"
    model.write_bytes(b"\x00" * 100)
    result = _leanseg("segment", str(rgb_image), "--out", str(tmp_path / "o"), "--model", str(model))
    assert result.returncode == 2
    assert str(model) in result.stderr
    assert not (tmp_path / "o").exists()


def test_missing_default_model_explains(tmp_path: Path, rgb_image: Path) -> None:
    import os

    env = dict(os.environ, LEANSEG_ASSETS=str(tmp_path / "no-assets"))
    result = _leanseg("segment", str(rgb_image), "--out", str(tmp_path / "o"), env=env)
    assert result.returncode == 2
    assert "no default model is installed" in result.stderr and "--model" in result.stderr


def test_an_output_path_that_cannot_be_a_folder_is_refused_before_the_model_loads(
    tmp_path: Path, rgb_image: Path
) -> None:
    model = tmp_path / "broken.safetensors"
    model.write_bytes(b"not a model")  # would fail to load: the output error must come first
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine\n")
    before = sorted(tmp_path.iterdir())
    for out, problem in ((a_file, "it is a file"), (a_file / "out", f"{a_file} is a file")):
        result = _leanseg("segment", str(rgb_image), "--out", str(out), "--model", str(model))
        assert result.returncode == 2
        assert f"{out}: cannot write the output folder ({problem}" in result.stderr, result.stderr
        assert "broken.safetensors" not in result.stderr and "model" not in result.stdout
    assert a_file.read_text() == "mine\n"
    assert sorted(tmp_path.iterdir()) == before  # nothing created

    locked = tmp_path / "locked"  # a folder no file can be made in, even by root (not just its permission bits)
    locked.mkdir()
    undo = make_unwritable(locked)
    try:
        result = _leanseg("segment", str(rgb_image), "--out", str(locked / "out"), "--model", str(model))
    finally:
        undo()
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"leanseg: error: --out {locked / 'out'}: cannot write the output folder (")
    assert str(locked) in result.stderr and "broken" not in result.stderr and not any(locked.iterdir())


def test_no_existing_image_is_refused_before_the_model_loads(tmp_path: Path) -> None:
    model = tmp_path / "broken.safetensors"
    model.write_bytes(b"not a model")  # would fail to load: the input error must come first
    out = tmp_path / "out"
    result = _leanseg("segment", str(tmp_path / "nope.png"), str(tmp_path / "gone.png"), "--out", str(out),
                      "--model", str(model))
    assert result.returncode == 2
    assert f"{tmp_path / 'nope.png'}: no such file (and none of the other 1 is a file)" in result.stderr
    assert "broken.safetensors" not in result.stderr and not out.exists()
    result = _leanseg("segment", str(tmp_path), "--out", str(out), "--model", str(model))
    assert result.returncode == 2 and "is a folder (segment a folder with `leanseg batch`)" in result.stderr


def test_a_video_given_to_segment_is_pointed_to_leanseg_video(tmp_path: Path) -> None:
    video = tmp_path / "clip.mp4"
    video.write_bytes(b"refused by its name: nothing decodes it")
    out = tmp_path / "out"
    result = _leanseg("segment", str(video), "--out", str(out), "--model", str(tmp_path / "no-model.safetensors"))
    assert result.returncode == 2 and not out.exists()
    assert result.stderr == (f"leanseg: error: {video}: is a video (segment a video with `leanseg video {video} "
                             "--out clip_overlay.mp4`)\n")


def _segment_an_unreachable_image(tmp_path: Path, *others: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`leanseg segment` run as a plain user on an image in a folder it cannot enter, then `others`; returns the
    run and that image."""
    plain_user = as_a_plain_user()
    closed = tmp_path / "closed"
    closed.mkdir()
    image = closed / "x.png"
    cv2.imwrite(str(image), np.zeros((8, 8, 3), np.uint8))
    closed.chmod(0)
    try:
        return subprocess.run([*plain_user, sys.executable, "-m", "leanseg.core", "segment", str(image), *others,
                               "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=300), image
    finally:
        closed.chmod(0o755)


def test_an_image_in_a_folder_that_cannot_be_entered_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    result, image = _segment_an_unreachable_image(tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (f"leanseg: error: {image}: Permission denied (check the file's permissions and those "
                             "of the folders above it)\n")


def test_an_image_that_cannot_be_reached_fails_alone_whatever_its_place(tmp_path: Path, tiny_checkpoint: Path,
                                                                         rgb_image: Path) -> None:
    result, image = _segment_an_unreachable_image(tmp_path, str(rgb_image), "--model", str(tiny_checkpoint),
                                                  "--threads", "1")
    assert result.returncode == 1, result.stderr
    assert f"{image}: cannot read it (Permission denied)" in result.stderr
    assert (tmp_path / "out" / f"{rgb_image.stem}_labels.png").is_file()


@pytest.mark.parametrize(("given", "pixels"), [("1e6", 1_000_000), ("1,000,000", 1_000_000), ("2_000", 2000)])
def test_max_pixels_takes_the_forms_its_help_shows(given: str, pixels: int) -> None:
    assert build_parser().parse_args(["segment", "x.png", "--out", "o", "--max-pixels", given]).max_pixels == pixels


@pytest.mark.parametrize("given", ["1,5", "1.5", "0", "many"])
def test_max_pixels_refuses_what_is_not_a_whole_count(given: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["segment", "x.png", "--out", "o", "--max-pixels", given])
    assert "--max-pixels" in capsys.readouterr().err


def test_the_same_file_named_twice_is_segmented_once(
    tmp_path: Path, tiny_checkpoint: Path, rgb_image: Path
) -> None:
    out = tmp_path / "out"
    again = rgb_image.parent / "." / rgb_image.name
    result = _leanseg("segment", str(rgb_image), str(again), "--out", str(out), "--model", str(tiny_checkpoint),
                      "--mirror", "off")
    assert result.returncode == 0, result.stderr
    assert "1 of 1 image(s) segmented" in result.stdout and "[1/1]" in result.stdout
    assert "tile 1/1" not in result.stdout  # a whole image is one pass: no tile lines
    written = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert written == ["input_labels.png", "input_overlay.png"]


def test_nothing_segmented_says_nothing_was_written(tmp_path: Path, tiny_checkpoint: Path, rgb_image: Path) -> None:
    """One input that fails: no 'the rest go on' (there is no rest), and no time or peak of nothing."""
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"garbage")
    result = _leanseg("segment", str(bad), "--out", str(tmp_path / "o"), "--model", str(tiny_checkpoint),
                      "--threads", "1")
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1] == "0 of 1 image(s) segmented (1 failed); nothing written"
    assert f"failed: {bad}: not an image" in result.stderr and "the rest go on" not in result.stderr


def test_the_rest_go_on_only_when_there_is_a_rest_and_alpha_is_said_once(
    tmp_path: Path, tiny_checkpoint: Path, rgb_image: Path
) -> None:
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"garbage")
    rgba = []
    for name in ("a.png", "b.png"):
        pixels = np.full((30, 40, 4), 200, np.uint8)
        pixels[:10, :, 3] = 0  # a transparent band
        cv2.imwrite(str(tmp_path / name), pixels)
        rgba.append(str(tmp_path / name))
    result = _leanseg("segment", str(bad), *rgba, str(bad.with_name("gone.png")), "--out", str(tmp_path / "o"),
                      "--model", str(tiny_checkpoint), "--threads", "1", "--mirror", "off")
    assert result.returncode == 1
    assert f"failed (the rest go on): {bad}: not an image" in result.stderr
    last = result.stderr.splitlines()[-1]
    assert last.startswith("failed: ") and "gone.png" in last  # the last one: no rest
    assert result.stdout.count("alpha channel ignored") == 1, result.stdout
    assert "  a.png: alpha channel ignored: transparent pixels are segmented with their stored colour" in result.stdout
    assert "2 of 4 image(s) segmented in " in result.stdout and "; 2 failed" in result.stdout
