"""`leanseg train` on a user's own data: labels that are not class indices of the spec, a spec with a slip, and
an --export that would replace a file. Each is refused in one line naming the file, before any epoch, and loses
nothing: not the data, not the spec, not a previous run in --out."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import cv2
import numpy as np

from .refusals import assert_one_line_refusal
from .test_train import make_dataset, train_args
from .test_train_cli import assert_refused, leanseg_train


def _run_files(run: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(run.iterdir())}


def test_a_label_value_that_is_no_class_is_named_before_any_epoch_and_an_overwrite_keeps_the_old_run(
        tmp_path: Path) -> None:
    data = make_dataset(tmp_path / "data", train=3, val=1)
    run = tmp_path / "run"
    first = leanseg_train(train_args(data, run, epochs=1))
    assert first.returncode == 0, first.stderr
    kept = _run_files(run)
    label_path = data / "train" / "labels" / "f01.png"
    label = cv2.imread(str(label_path), cv2.IMREAD_UNCHANGED)
    label[:4, :4] = 7  # 3 classes and ignore_index 3 in the spec: 7 is neither
    cv2.imwrite(str(label_path), label)
    refused = leanseg_train(train_args(data, run, epochs=1) + ["--overwrite"])
    assert_one_line_refusal(refused, f"{label_path}: label value 7 is not a class of the spec",
                            "(3 classes: 0-2; 3 marks ignored pixels)")
    assert "epoch 1/" not in refused.stdout  # found as the frames load, before any training
    assert _run_files(run) == kept  # the refused --overwrite removed nothing
    deep = tmp_path / "new" / "runs" / "run"  # a refused run leaves none of the folders it made
    assert_one_line_refusal(leanseg_train(train_args(data, deep, epochs=1)), f"{label_path}: label value 7")
    assert not (tmp_path / "new").exists()

    jpeg = data / "train" / "labels" / "f00.jpg"  # refused by its kind, whatever values the artefacts take
    (data / "train" / "labels" / "f00.png").rename(jpeg)
    assert_one_line_refusal(leanseg_train(train_args(data, deep, epochs=1)), f"{jpeg}: a JPEG label")
    jpeg.rename(data / "train" / "labels" / "f00.png")

    wide = np.asarray(label, np.uint16)
    wide[wide == 7] = 3
    wide[:2, :2] = 256  # a 16-bit label: 256 is no class, not class 0 (256 % 256)
    cv2.imwrite(str(label_path), wide)
    assert_one_line_refusal(leanseg_train(train_args(data, tmp_path / "run16", epochs=1)),
                            f"{label_path}: label value 256 is not a class")
    wide[:2, :2] = 2  # a 16-bit label of class indices trains
    cv2.imwrite(str(label_path), wide)
    trained = leanseg_train(train_args(data, tmp_path / "run16", epochs=1))
    assert trained.returncode == 0, trained.stderr


def test_spec_slips_are_named_with_the_field_and_the_spec_file(tmp_path: Path) -> None:
    data = make_dataset(tmp_path / "data", train=2, val=1)
    spec = json.loads((data / "spec.json").read_text())

    def refused_with(changed: dict, *wording: str) -> None:
        path = tmp_path / "spec_slip.json"
        path.write_text(json.dumps(changed))
        args = train_args(data, tmp_path / "run", epochs=1)
        args[args.index("--spec") + 1] = str(path)
        assert_refused(leanseg_train(args), str(path), *wording)
        assert not (tmp_path / "run").exists()

    typo = {("clas_names" if key == "class_names" else key): value for key, value in spec.items()}
    refused_with(typo, "no 'class_names' field", "a spec holds class_names and class_colours")
    refused_with({**spec, "ignore_index": 65535}, "ignore_index 65535", "must be 0-255")
    refused_with({**spec, "ignore_index": 255.0}, "ignore_index 255.0: an integer 0-255")
    refused_with({key: value for key, value in spec.items() if key != "class_colours"}, "no 'class_colours' field")
    refused_with({**spec, "class_colours": [[300, 0, 0], [0, 255, 0], [0, 0, 255]]}, "class colour [300, 0, 0]")

    american = {("class_colors" if key == "class_colours" else key): value for key, value in spec.items()}
    path = tmp_path / "spec_us.json"
    path.write_text(json.dumps(american))
    args = train_args(data, tmp_path / "run_us", epochs=1)
    args[args.index("--spec") + 1] = str(path)
    trained = leanseg_train(args)
    assert trained.returncode == 0, trained.stderr


def test_export_never_replaces_a_file_and_is_a_safetensors_name(tmp_path: Path) -> None:
    data = make_dataset(tmp_path / "data", train=2, val=1)
    image = data / "train" / "images" / "f00.png"
    model = tmp_path / "models" / "good.safetensors"
    model.parent.mkdir()
    model.write_bytes(b"a model the user keeps")
    inputs = {path: path.read_bytes() for path in (image, data / "spec.json", model)}
    for target in inputs:
        result = leanseg_train(train_args(data, tmp_path / "run", epochs=1) + ["--export", str(target)])
        wording = (f"--export {target} already exists: an export never replaces a file" if target.suffix ==
                   ".safetensors" else "the export is a leanseg .safetensors checkpoint")
        assert_refused(result, wording)
    assert {path: path.read_bytes() for path in inputs} == inputs and not (tmp_path / "run").exists()

    own = tmp_path / "run" / "best.safetensors"  # refused now, not after the epochs
    assert_refused(leanseg_train(train_args(data, tmp_path / "run", epochs=1) + ["--export", str(own)]),
                   f"--export {own} is one of the run's own files")
    onnx = tmp_path / "models" / "net.onnx"
    assert_refused(leanseg_train(train_args(data, tmp_path / "run", epochs=1) + ["--export", str(onnx)]),
                   f"give a name ending in .safetensors, such as {tmp_path / 'models' / 'net.safetensors'}")
    fresh = tmp_path / "models" / "new.safetensors"
    done = leanseg_train(train_args(data, tmp_path / "run", epochs=1) + ["--export", str(fresh)])
    assert done.returncode == 0, done.stderr
    assert fresh.read_bytes() == (tmp_path / "run" / "best.safetensors").read_bytes()
    again = leanseg_train(train_args(data, tmp_path / "run", epochs=1) + ["--resume", "--export", str(fresh)])
    assert_refused(again, f"--export {fresh} already exists")

    importing = [*train_args(data, tmp_path, epochs=1)[:3], "import-model", str(fresh)]
    assert_one_line_refusal(leanseg_train(importing), f"{fresh}: a leanseg checkpoint, which --model opens as it is",
                            "(--model new, the app's File > Installed models) copy it into the user model folder")

    state = tmp_path / "run" / "last.pt"  # the run's resume state given as a model: pointed at its weights
    segment = [*train_args(data, tmp_path, epochs=1)[:3], "segment", str(image), "--model", str(state), "--out",
               str(tmp_path / "labels")]
    assert_one_line_refusal(leanseg_train(segment), f"{state}: a `leanseg train` run's resume state, not a model",
                            f"give the run's weights, {tmp_path / 'run' / 'best.safetensors'}")


def test_one_images_and_labels_folder_without_splits_is_not_validated_on_its_own_training_frames(
        tmp_path: Path) -> None:
    data = make_dataset(tmp_path / "data", train=3, val=1)
    for kind in ("images", "labels"):  # the flat layout: data/images + data/labels, no split folders
        (data / "train" / kind).rename(data / kind)
    for split in ("train", "val"):
        for kind in ("images", "labels"):
            for path in (data / split / kind).glob("*") if (data / split / kind).is_dir() else []:
                path.unlink()
    args = train_args(data, tmp_path / "run", epochs=1)
    assert_refused(leanseg_train(args), f"{data}: the 'val' split's frames are training frames (3 of 3",
                   "give val/images + val/labels, or --val-split none")
    trained = leanseg_train(args + ["--val-split", "none"])
    assert trained.returncode == 0, trained.stderr


def test_an_image_with_no_label_of_its_name_is_named_as_it_is_left_out(tmp_path: Path) -> None:
    data = make_dataset(tmp_path / "data", train=3, val=2)
    (data / "train" / "labels" / "f01.png").unlink()
    (data / "val" / "labels" / "f00.png").unlink()
    trained = leanseg_train(train_args(data, tmp_path / "run", epochs=1))
    assert trained.returncode == 0, trained.stderr
    assert "loading 2 training pairs and 1 validation pairs" in trained.stdout
    assert (f"left out 2 images with no label of their name in labels/: {data / 'train' / 'images' / 'f01.png'}"
            in trained.stdout)
    model = tmp_path / "run" / "best.safetensors"
    scored = subprocess.run([*train_args(data, tmp_path, epochs=1)[:3], "eval", "--data", str(data), "--model",
                             str(model), "--out", str(tmp_path / "eval")], capture_output=True, text=True, timeout=600)
    assert scored.returncode == 0, scored.stderr
    assert (f"warning: left out 1 image with no label of its name in labels/: {data / 'val' / 'images' / 'f00.png'}; "
            "they are not scored") in scored.stderr
    for path in (data / "val" / "images").iterdir():  # an empty split says so
        path.unlink()
    assert_refused(leanseg_train(train_args(data, tmp_path / "run2", epochs=1)),
                   f"{data / 'val' / 'images'}: no images in it")

