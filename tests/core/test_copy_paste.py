"""Copy-paste of rare classes between the crops of a batch: which classes are rare, what a pasted crop holds,
and `leanseg train --copy-paste` on real files."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import cv2
import numpy as np

from leanseg.core.train.copy_paste import paste_rare_classes, rare_classes

from .refusals import assert_one_line_refusal
from .test_train import train_args

IGNORED = 255


def test_rare_classes_are_the_present_ones_below_their_median() -> None:
    frequencies = np.array([0.5, 0.3, 0.01, 0.0, 0.02, 0.1])  # present: median 0.1; class 3 never appears
    assert rare_classes(frequencies).tolist() == [False, False, True, False, True, False]
    assert not rare_classes(np.zeros(4)).any()


def crop(fill: int, rare_box: tuple[int, int, int, int] | None, rare_class: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """A 16x20 crop of class 0 with value `fill`, an ignored band on row 0, and a box of `rare_class`."""
    image = np.full((16, 20, 3), fill, np.uint8)
    label = np.zeros((16, 20), np.uint8)
    label[0] = IGNORED
    if rare_box is not None:
        top, bottom, left, right = rare_box
        label[top:bottom, left:right] = rare_class
        image[top:bottom, left:right] = (200, 10, 30)
    return image, label


def test_a_pasted_crop_takes_exactly_the_rare_pixels_of_another_and_its_source_is_untouched() -> None:
    rare = np.array([False, False, True])
    with_rare, without = crop(40, (4, 9, 5, 12)), crop(90, None)
    kept = [(image.copy(), label.copy()) for image, label in (with_rare, without)]
    (first_image, first_label), (second_image, second_label) = paste_rare_classes(
        [with_rare, without], rare, 1.0, np.random.default_rng(0))
    box = kept[0][1] == 2
    assert (second_label[box] == 2).all() and (second_image[box] == (200, 10, 30)).all()  # the box, image and label
    assert (second_label[~box] == kept[1][1][~box]).all() and (second_image[~box] == 90).all()  # nothing else
    assert (second_label[0] == IGNORED).all()  # the source's ignored row is not pasted: it is not a rare class
    assert (first_label == kept[0][1]).all() and (first_image == kept[0][0]).all()  # nothing rare to take
    for (image, label), (old_image, old_label) in zip((with_rare, without), kept):
        assert (image == old_image).all() and (label == old_label).all()  # the inputs are not written to


def test_no_copy_paste_returns_the_batch_and_draws_nothing() -> None:
    batch = [crop(40, (4, 9, 5, 12)), crop(90, None)]
    rng = np.random.default_rng(7)
    before = rng.bit_generator.state
    assert paste_rare_classes(batch, np.array([False, False, True]), 0.0, rng) is batch
    assert rng.bit_generator.state == before  # a run without it draws its crops as before


def rare_dataset(root: Path, count: int = 6, size: int = 40) -> Path:
    """Frames of grey (class 0) and green (class 1) halves, and a small red square (class 2, the rare one)."""
    rng = np.random.default_rng(0)
    for split, frames in (("train", count), ("val", 2)):
        (root / split / "images").mkdir(parents=True)
        (root / split / "labels").mkdir(parents=True)
        for i in range(frames):
            label = np.zeros((size, size), np.uint8)
            label[size // 2 :] = 1
            y, x = rng.integers(0, size - 5, 2)
            label[y : y + 5, x : x + 5] = 2
            image = np.array([(128, 128, 128), (0, 160, 0), (220, 0, 0)], np.uint8)[label]
            cv2.imwrite(str(root / split / "images" / f"f{i:02d}.png"), image[:, :, ::-1])
            cv2.imwrite(str(root / split / "labels" / f"f{i:02d}.png"), label)
    spec = {"class_names": ["road", "grass", "sign"], "class_colours": [[128, 128, 128], [0, 160, 0], [220, 0, 0]]}
    (root / "spec.json").write_text(json.dumps(spec))
    return root


def test_train_with_copy_paste_names_the_rare_classes_and_records_the_option(tmp_path: Path) -> None:
    data = rare_dataset(tmp_path / "data")
    run = subprocess.run(train_args(data, tmp_path / "run", epochs=1) + ["--copy-paste", "0.5"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "copy-paste (chance 0.5) of the rare classes: sign\n" in run.stdout
    history = json.loads((tmp_path / "run" / "history.json").read_text())
    assert len(history) == 1 and np.isfinite(history[0]["loss"])
    again = subprocess.run(train_args(data, tmp_path / "run", epochs=1) + ["--resume"],
                           capture_output=True, text=True, timeout=600)
    assert_one_line_refusal(again, "--copy-paste 0.5, not 0")  # a resume must keep it


def test_a_copy_paste_chance_outside_0_to_1_is_refused_before_any_work(tmp_path: Path) -> None:
    data = rare_dataset(tmp_path / "data")
    result = subprocess.run(train_args(data, tmp_path / "run", epochs=1) + ["--copy-paste", "1.5"],
                            capture_output=True, text=True, timeout=600)
    assert_one_line_refusal(result, "copy_paste must be a chance in [0, 1], got 1.5")
    assert not (tmp_path / "run").exists()
