"""`leanseg eval` at its boundaries: where the JSON goes, missing data and files, labels of another size or of
other classes than the model's, and classes with no IoU; each refusal one line, exit 2, before any image runs."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from leanseg.core.model import MobileUNet
from leanseg.core.model.checkpoint import default_info, save_checkpoint

from .conftest import TINY_MOBILE
from .refusals import assert_one_line_refusal
from .test_train import make_dataset
from .unwritable import make_unwritable


def leanseg_eval(data: Path, model: Path, *extra: str) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "leanseg.core", "eval", "--data", str(data), "--model", str(model),
            "--device", "cpu", "--mirror", "off", "--threads", "1", *extra]
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


def assert_refused(result: subprocess.CompletedProcess, *wording: str) -> None:
    """A one-line refusal (exit 2) holding each of `wording`, and no image evaluated."""
    assert_one_line_refusal(result, *wording)
    assert result.stdout == ""


def test_a_json_target_that_cannot_be_written_is_refused_before_any_image(tmp_path: Path,
                                                                          tiny_checkpoint: Path) -> None:
    data = make_dataset(tmp_path / "data", train=1, val=2)
    afile = tmp_path / "afile"
    afile.write_text("notes")
    assert_refused(leanseg_eval(data, tiny_checkpoint, "--json", str(afile / "e.json")),
                   f"--json {afile / 'e.json'}: {afile}", "it is a file")
    assert_refused(leanseg_eval(data, tiny_checkpoint, "--out", str(afile)), f"--out {afile}", "it is a file")
    assert_refused(leanseg_eval(data, tiny_checkpoint, "--json", str(data)), f"{data} is a folder")
    if Path("/proc/self").is_dir():  # a folder no file can be made in, whoever runs it
        assert_refused(leanseg_eval(data, tiny_checkpoint, "--json", "/proc/e.json"), "/proc/e.json")

    locked = tmp_path / "locked"
    locked.mkdir()
    undo = make_unwritable(locked)
    try:
        assert_refused(leanseg_eval(data, tiny_checkpoint, "--json", str(locked / "sub" / "e.json")), str(locked))
    finally:
        undo()
    assert list(locked.iterdir()) == []


def test_missing_data_is_named_with_the_splits_there(tmp_path: Path, tiny_checkpoint: Path) -> None:
    json_path = str(tmp_path / "e.json")
    assert_refused(leanseg_eval(tmp_path / "nope", tiny_checkpoint, "--json", json_path),
                   f"data folder {tmp_path / 'nope'} does not exist")
    (tmp_path / "afile").write_text("")
    assert_refused(leanseg_eval(tmp_path / "afile", tiny_checkpoint, "--json", json_path),
                   f"data folder {tmp_path / 'afile'} is a file, not a folder")
    data = make_dataset(tmp_path / "data", train=1, val=1)
    (data / "test.txt").write_text("test/images/f00.png test/labels/f00.png\n")
    (data / "README.txt").write_text("CamVid, as the SegNet authors split it\n")  # a text file, not a split
    assert_refused(leanseg_eval(data, tiny_checkpoint, "--split", "tset", "--json", json_path),
                   "no 'tset' split", "splits there: test, train, val\n")
    for label in (data / "val" / "labels").iterdir():  # the folders are there, the names do not match
        label.rename(label.with_name(f"{label.stem}_L{label.suffix}"))
    assert_refused(leanseg_eval(data, tiny_checkpoint, "--split", "val", "--json", json_path),
                   "the 'val' split's images and labels share no file names")
    assert not (tmp_path / "e.json").exists()


def test_files_a_list_names_are_checked_before_any_image_runs(tmp_path: Path, tiny_checkpoint: Path) -> None:
    data = make_dataset(tmp_path / "data", train=1, val=3)
    (data / "some.txt").write_text("val/images/f00.png val/labels/f00.png\nval/images/gone.png val/labels/f01.png\n"
                                   "val/images/f02.png val/labels/gone.png\n")
    assert_refused(leanseg_eval(data, tiny_checkpoint, "--split", "some", "--json", str(tmp_path / "e.json")),
                   f"{data / 'some.txt'} names 2 missing files (of 6), the first: {data / 'val/images/gone.png'}")


def test_a_label_of_another_size_is_named_with_both_sizes(tmp_path: Path, tiny_checkpoint: Path) -> None:
    data = make_dataset(tmp_path / "data", train=1, val=2)
    label = data / "val" / "labels" / "f01.png"
    cv2.imwrite(str(label), np.zeros((200, 300), np.uint8))
    result = leanseg_eval(data, tiny_checkpoint, "--json", str(tmp_path / "e.json"))
    assert result.returncode == 2
    assert (f"leanseg: error: label {label} is 300x200 px (width x height), its image "
            f"{data / 'val' / 'images' / 'f01.png'} 48x48 px") in result.stderr
    assert "Traceback" not in result.stderr


def test_labels_past_the_models_classes_are_warned_of_once(tmp_path: Path, tiny_checkpoint: Path) -> None:
    data = make_dataset(tmp_path / "data", train=1, val=3)
    for path in sorted((data / "val" / "labels").iterdir()):  # an 11-class labelling for a 4-class model
        label = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
        label[:8] = 10
        label[8:16] = np.arange(48) % 7 + 4  # 4..10
        cv2.imwrite(str(path), label)
    result = leanseg_eval(data, tiny_checkpoint, "--json", str(tmp_path / "e.json"))
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("warning:") == 1
    assert "labels hold values 4..10 the model does not have (its 4 classes: 0..3)" in result.stderr


def test_classes_without_an_iou_show_n_a_in_the_table_and_null_in_the_json(tmp_path: Path) -> None:
    torch.manual_seed(0)
    info = replace(default_info(TINY_MOBILE), ignore_index=4)
    network = MobileUNet(TINY_MOBILE).eval()
    with torch.no_grad():  # a model that says class 0 everywhere
        network.head.weight.zero_()
        network.head.bias.copy_(torch.tensor([5.0, 0.0, 0.0, 0.0]))
    model = save_checkpoint(tmp_path / "m.safetensors", network, info)
    data = make_dataset(tmp_path / "data", train=1, val=2)
    for path in (data / "val" / "labels").iterdir():  # class 0 and unlabelled: classes 1 and 2 have no IoU
        label = np.full((48, 48), 4, np.uint8)
        label[:20] = 0
        cv2.imwrite(str(path), label)
    result = leanseg_eval(data, model, "--per-sequence", "--json", str(tmp_path / "e.json"))
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr  # the ignore index is not a class the model lacks
    assert "| class 0        | 1.0000 |" in result.stdout and "| class 1        | n/a    |" in result.stdout
    assert "| mean IoU       | 1.0000 |" in result.stdout  # over the classes that have one
    assert "nan" not in result.stdout
    rows = [line for line in result.stdout.splitlines() if line.startswith("|")]
    assert len({len(line) for line in rows[:8]}) == 1  # the class table's columns line up
    figures = json.loads((tmp_path / "e.json").read_text())
    assert figures["per_class_iou"]["class 1"] is None and figures["per_class_iou"]["class 0"] == 1.0
    assert all(sequence["per_class_iou"]["class 2"] is None for sequence in figures["per_sequence"].values())


def test_labels_with_no_pixel_to_score_are_an_error_and_write_nothing(tmp_path: Path) -> None:
    """Every pixel the ignore index (or a class the model lacks): no figure means anything, so no exit 0."""
    info = replace(default_info(TINY_MOBILE), ignore_index=4)
    model = save_checkpoint(tmp_path / "m.safetensors", MobileUNet(TINY_MOBILE).eval(), info)
    data = make_dataset(tmp_path / "data", train=1, val=2)
    for path in (data / "val" / "labels").iterdir():
        cv2.imwrite(str(path), np.full((48, 48), 4, np.uint8))
    result = leanseg_eval(data, model, "--json", str(tmp_path / "e.json"))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.endswith(f"leanseg: error: {data}, split val: no pixel could be scored: every label value "
                                  "is outside the model's 4 classes or is the ignore index 4; nothing written\n")
    assert not (tmp_path / "e.json").exists()


def test_json_replaces_only_an_earlier_eval_result(tmp_path: Path, tiny_checkpoint: Path) -> None:
    """Not the dataset's list file, nor any other JSON: each is refused before any image runs, unchanged."""
    data = make_dataset(tmp_path / "data", train=1, val=1)
    listing = tmp_path / "val.txt"
    listing.write_text("images/f00.png labels/f00.png\n")
    assert_refused(leanseg_eval(data, tiny_checkpoint, "--json", str(listing)),
                   f"--json {listing}: the figures are JSON; give a name ending in .json")
    other = tmp_path / "settings.json"
    other.write_text('{"mine": 1}\n')
    assert_refused(leanseg_eval(data, tiny_checkpoint, "--json", str(other)),
                   f"{other}: already exists and is not a `leanseg eval` result, so it is not replaced")
    assert listing.read_text() == "images/f00.png labels/f00.png\n" and other.read_text() == '{"mine": 1}\n'
    earlier = tmp_path / "e.json"
    for _ in range(2):  # the second run replaces the first one's figures
        assert leanseg_eval(data, tiny_checkpoint, "--json", str(earlier)).returncode == 0
        assert json.loads(earlier.read_text())["images"] == 1


@pytest.mark.parametrize("flag", ["--json", "--out"])
def test_the_figures_are_written_where_asked(tmp_path: Path, tiny_checkpoint: Path, flag: str) -> None:
    data = make_dataset(tmp_path / "data", train=1, val=1)
    where = tmp_path / "new" / ("e.json" if flag == "--json" else "")
    result = leanseg_eval(data, tiny_checkpoint, flag, str(where))
    assert result.returncode == 0, result.stderr
    written = where if flag == "--json" else where / "eval_val.json"
    assert json.loads(written.read_text())["images"] == 1
