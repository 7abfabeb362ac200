"""The training recipe options (EMA, label smoothing, Lovász loss, scale range, full-size phase), held-out
sequences, train+val fits, and per-sequence evaluation, on a tiny synthetic data set."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import cv2
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from leanseg.core.train.dataset import DatasetError, load_spec
from leanseg.core.train.ema import WeightAverage
from leanseg.core.train.frames import run_frames, sequence_of
from leanseg.core.train.options import TrainConfig

from .test_train import kill_when_printed, make_dataset, train_args

RECIPE = ["--ema", "0.9", "--label-smoothing", "0.1", "--lovasz", "0.5", "--ohem", "0.5", "--scale-range", "0.5", "2.0",
          "--jitter", "0.3", "--finetune-full-epochs", "1", "--full-crop", "48", "48"]


def make_sequences(root: Path) -> Path:
    """make_dataset's frames renamed into sequences: train A_* (6) and B_* (6), val C_* (3)."""
    data = make_dataset(root)
    for split in ("train", "val"):
        for folder in ("images", "labels"):
            for path in sorted((data / split / folder).iterdir()):
                number = int(path.stem[1:])
                sequence = "C" if split == "val" else ("A" if number < 6 else "B")
                path.rename(path.with_name(f"{sequence}_{path.name}"))
    return data


def test_sequence_is_the_name_up_to_the_first_underscore() -> None:
    assert sequence_of("train/0016E5_07959.png") == "0016E5"
    assert sequence_of(Path("x/Seq_1_2.png")) == "Seq"
    assert sequence_of("plain.png") == "plain"


def test_holdout_sequence_leaves_training_and_becomes_validation(tmp_path: Path) -> None:
    data = make_sequences(tmp_path / "data")
    spec = load_spec(data / "spec.json")
    config = TrainConfig(data_dir=str(data), spec_path="", out_dir="", train_splits=("train", "val"),
                         holdout_sequence="B")
    train, val = run_frames(config, spec)
    assert sorted({sequence_of(p[0]) for p in train}) == ["A", "C"] and len(train) == 9
    assert {sequence_of(p[0]) for p in val} == {"B"} and len(val) == 6
    pooled, none = run_frames(TrainConfig(data_dir=str(data), spec_path="", out_dir="",
                                          train_splits=("train", "val"), val_split=""), spec)
    assert len(pooled) == 15 and none == []
    with pytest.raises(DatasetError, match="sequences there: A, B, C"):
        run_frames(TrainConfig(data_dir=str(data), spec_path="", out_dir="", train_splits=("train", "val"),
                               holdout_sequence="Z"), spec)


def test_recipe_options_are_validated() -> None:
    with pytest.raises(ValueError, match="ema_decay"):
        TrainConfig(data_dir="", spec_path="", out_dir="", ema_decay=1.0)
    with pytest.raises(ValueError, match="finetune_full_epochs"):
        TrainConfig(data_dir="", spec_path="", out_dir="", epochs=2, finetune_full_epochs=3)
    with pytest.raises(ValueError, match="scale_range"):
        TrainConfig(data_dir="", spec_path="", out_dir="", scale_range=(0.0, 2.0))


def test_weight_average_follows_its_formula() -> None:
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 1), torch.nn.BatchNorm2d(2))
    ema = WeightAverage(model, decay=0.5)
    start = model[0].weight.detach().clone()
    with torch.no_grad():
        model[0].weight.add_(1.0)
    model[1].num_batches_tracked.fill_(7)
    ema.update(model)  # d = min(0.5, 2 / 11)
    d = 2 / 11
    torch.testing.assert_close(ema.model[0].weight, d * start + (1 - d) * (start + 1))
    assert int(ema.model[1].num_batches_tracked) == 7


def test_killed_recipe_run_resumes_to_the_same_weights_and_average(tmp_path: Path) -> None:
    """EMA, label smoothing, scale range and the full-size phase survive a kill after epoch 1."""
    data = make_dataset(tmp_path / "data")
    args = ["--train-splits", "train,val", "--val-split", "none", *RECIPE]
    reference = subprocess.run(train_args(data, tmp_path / "ref", epochs=3) + args, capture_output=True, text=True,
                               timeout=600)
    assert reference.returncode == 0, reference.stderr
    assert "no validation frames; final weights" in reference.stdout

    run = tmp_path / "run"
    kill_when_printed(train_args(data, run, epochs=3) + args, "epoch 1/3")
    state = torch.load(run / "last.pt", weights_only=True)
    assert state["epoch"] == 1
    assert state["ema"]["updates"] == 15 // 2  # one update per optimiser step of epoch 1

    resumed = subprocess.run(train_args(data, run, epochs=3) + args + ["--resume"], capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming after epoch 1" in resumed.stdout
    reference_weights = load_file(tmp_path / "ref" / "best.safetensors")
    run_weights = load_file(run / "best.safetensors")
    assert reference_weights.keys() == run_weights.keys()
    for key in reference_weights:
        assert torch.equal(reference_weights[key], run_weights[key]), key
    reference_state, run_state = (torch.load(d / "last.pt", weights_only=True) for d in (tmp_path / "ref", run))
    for key, value in reference_state["ema"]["model"].items():
        assert torch.equal(value, run_state["ema"]["model"][key]), key
    history = json.loads((run / "history.json").read_text())
    assert [h["crop"] for h in history] == [[32, 32], [32, 32], [48, 48]]  # the last epoch at full size
    with safe_open(str(run / "best.safetensors"), "pt") as handle:
        provenance = json.loads(handle.metadata()["leanseg"])["provenance"]
    assert provenance["split"] == "train+val" and provenance["selected_on"] == "none (last epoch)"
    assert provenance["ema"] is True and provenance["train_config"]["finetune_full_epochs"] == 1
    assert provenance["train_config"]["label_smoothing"] == 0.1
    assert provenance["train_config"]["lovasz_weight"] == 0.5
    assert provenance["train_config"]["ohem_fraction"] == 0.5


def test_holdout_run_validates_on_the_held_out_sequence(tmp_path: Path) -> None:
    data = make_sequences(tmp_path / "data")
    result = subprocess.run(train_args(data, tmp_path / "fold", epochs=1) + ["--holdout-sequence", "A"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "loading 9 training pairs and 6 validation pairs" in result.stdout
    with safe_open(str(tmp_path / "fold" / "best.safetensors"), "pt") as handle:
        provenance = json.loads(handle.metadata()["leanseg"])["provenance"]
    assert provenance["selected_on"] == "sequence A" and provenance["holdout_sequence"] == "A"


def test_eval_per_sequence_scores_each_sequence_alone(tmp_path: Path, tiny_checkpoint: Path) -> None:
    from leanseg.core.io.images import read_image
    from leanseg.core.model.checkpoint import load_checkpoint
    from leanseg.core.predict import InferenceOptions, Segmenter

    data = make_sequences(tmp_path / "data")
    segmenter = Segmenter(load_checkpoint(tiny_checkpoint), InferenceOptions(device="cpu"))
    for image_path in sorted((data / "train" / "images").iterdir()):
        labels = segmenter.segment(read_image(image_path)).labels
        if sequence_of(image_path) == "B":  # every B pixel labelled as another class than predicted
            labels = (labels + 1) % 4
        cv2.imwrite(str(data / "train" / "labels" / image_path.name), labels)
    result = subprocess.run([sys.executable, "-m", "leanseg.core", "eval", "--data", str(data), "--split", "train",
                             "--model", str(tiny_checkpoint), "--device", "cpu", "--per-sequence", "--mirror", "off",
                             "--json", str(tmp_path / "e.json")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    figures = json.loads((tmp_path / "e.json").read_text())
    per_sequence = figures["per_sequence"]
    assert sorted(per_sequence) == ["A", "B"] and per_sequence["A"]["images"] == 6
    assert per_sequence["A"]["mean_iou"] == pytest.approx(1.0) and per_sequence["B"]["mean_iou"] == 0.0
    assert per_sequence["B"]["pixel_accuracy"] == 0.0
    assert "| A        |      6 | 1.0000" in result.stdout


def test_resume_state_moved_to_another_run_folder_and_data_path_continues(tmp_path: Path) -> None:
    """A committed last.pt continues in another checkout: paths may differ, training options may not."""
    data = make_dataset(tmp_path / "data", train=4, val=2)
    first = subprocess.run(train_args(data, tmp_path / "a", epochs=2) + ["--ema", "0.9"], capture_output=True,
                           text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "last.pt").write_bytes((tmp_path / "a" / "last.pt").read_bytes())
    (tmp_path / "moved").symlink_to(data)
    args = train_args(tmp_path / "moved", tmp_path / "b", epochs=2)
    args[args.index("--spec") + 1] = str(data / "spec.json")
    resumed = subprocess.run(args + ["--ema", "0.9", "--resume"], capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming after epoch 2" in resumed.stdout
    args[args.index("--lr") + 1] = "0.02"
    refused = subprocess.run(args + ["--ema", "0.9", "--resume"], capture_output=True, text=True, timeout=600)
    assert refused.returncode == 2 and "other options" in refused.stderr


def test_decoder_channels_and_context_shape_the_model_and_travel_in_the_checkpoint(tmp_path: Path) -> None:
    from leanseg.core.model.checkpoint import load_checkpoint

    data = make_dataset(tmp_path / "data", train=2, val=1)
    decoder = ["--decoder-channels", "40", "24", "16", "8", "--context-dilations", "2", "4"]
    result = subprocess.run(train_args(data, tmp_path / "wide", epochs=1) + decoder,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    model = load_checkpoint(tmp_path / "wide" / "best.safetensors").model
    assert [stage.out_channels for stage in model.decoder] == [40, 24, 16, 8]
    assert [block.depthwise[0].dilation for block in model.context] == [(2, 2), (4, 4)]
    with pytest.raises(ValueError, match="decoder_channels is a MobileUNet option"):
        TrainConfig(data_dir="", spec_path="", out_dir="", model="PlainUNet", decoder_channels=(8, 8, 8, 8))
    with pytest.raises(ValueError, match="context_dilations is a MobileUNet option"):
        TrainConfig(data_dir="", spec_path="", out_dir="", model="PlainUNet", context_dilations=(2,))


def test_a_bad_model_option_is_named_before_any_frame_loads(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-data"  # the data is never read: the model's options are checked first
    for option, value, wording in (("--context-dilations", ["2", "0"], r"context_dilations\[1\] must be in 1..64"),
                                   ("--decoder-channels", ["40", "24", "0", "8"], "decoder_channels")):
        result = subprocess.run(train_args(missing, tmp_path / "out", epochs=1) + [option, *value],
                                capture_output=True, text=True, timeout=120)
        assert result.returncode != 0
        assert re.search(wording, result.stderr), result.stderr
        assert str(missing) not in result.stderr
        assert not (tmp_path / "out").exists()
