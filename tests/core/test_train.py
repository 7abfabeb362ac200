"""Training on a tiny synthetic data set: metrics, checkpointing, kill and resume."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from leanseg.core.model import MobileUNet, MobileUNetConfig, PlainUNet, PlainUNetConfig
from leanseg.core.model.checkpoint import load_checkpoint
from leanseg.core.train.lean import enable_activation_checkpointing
from leanseg.core.train.metrics import confusion_matrix, iou_per_class, mean_iou, pixel_accuracy

COLOURS = [(200, 30, 30), (30, 200, 30), (30, 30, 200)]


def make_dataset(root: Path, train: int = 12, val: int = 3, size: int = 48) -> Path:
    """Images of coloured rectangles; the label is the rectangle's colour index; border is void (3)."""
    rng = np.random.default_rng(0)
    for split, count in (("train", train), ("val", val)):
        (root / split / "images").mkdir(parents=True)
        (root / split / "labels").mkdir(parents=True)
        for i in range(count):
            label = np.full((size, size), 3, np.uint8)
            image = np.full((size, size, 3), 90, np.uint8)
            for cls in range(3):
                y, x = rng.integers(0, size - 16, 2)
                label[y : y + 16, x : x + 16] = cls
                image[y : y + 16, x : x + 16] = COLOURS[cls]
            cv2.imwrite(str(root / split / "images" / f"f{i:02d}.png"), image[:, :, ::-1])
            cv2.imwrite(str(root / split / "labels" / f"f{i:02d}.png"), label)
    spec = {"class_names": ["red", "green", "blue"], "class_colours": COLOURS, "ignore_index": 3}
    (root / "spec.json").write_text(json.dumps(spec))
    return root


def train_args(data: Path, out: Path, epochs: int = 4) -> list[str]:
    return [sys.executable, "-m", "leanseg.core", "train", "--data", str(data), "--spec", str(data / "spec.json"),
            "--out", str(out), "--epochs", str(epochs), "--batch-size", "2", "--crop", "32", "32",
            "--width", "0.25", "--precision", "fp32", "--threads", "1", "--device", "cpu", "--lr", "0.01"]


def kill_when_printed(args: list[str], prefix: str) -> None:
    """Run `args`, SIGKILL it as soon as it prints a line starting with `prefix`, and check it died by it."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(prefix):
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL


def test_metrics_on_a_known_answer() -> None:
    truth = np.array([[0, 0, 1, 1], [2, 2, 9, 9]])  # 9 is void: ignored
    predicted = np.array([[0, 1, 1, 1], [2, 0, 0, 0]])
    matrix = confusion_matrix(truth, predicted, 3)
    assert matrix.tolist() == [[1, 1, 0], [0, 2, 0], [1, 0, 1]]
    np.testing.assert_allclose(iou_per_class(matrix), [1 / 3, 2 / 3, 1 / 2])
    assert mean_iou(matrix) == pytest.approx((1 / 3 + 2 / 3 + 1 / 2) / 3)
    assert pixel_accuracy(matrix) == pytest.approx(4 / 6)


@pytest.mark.parametrize("make", [lambda: MobileUNet(MobileUNetConfig(num_classes=3, width=0.25)),
                                  lambda: PlainUNet(PlainUNetConfig(num_classes=3, base_channels=4, depth=2))])
def test_activation_checkpointing_keeps_gradients(make) -> None:  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    plain, lean = make(), make()
    lean.load_state_dict(plain.state_dict())
    assert enable_activation_checkpointing(lean) > 0
    assert list(lean.state_dict()) == list(plain.state_dict())
    x, y = torch.randn(2, 3, 32, 40), torch.randint(0, 3, (2, 32, 40))
    for model in (plain, lean):
        torch.nn.functional.cross_entropy(model.train()(x), y).backward()
    for (name, a), b in zip(plain.named_parameters(), lean.parameters()):
        torch.testing.assert_close(a.grad, b.grad, msg=name)


def test_killed_run_resumes_to_the_same_weights(tmp_path: Path) -> None:
    data = make_dataset(tmp_path / "data")
    reference = subprocess.run(train_args(data, tmp_path / "ref"), capture_output=True, text=True, timeout=600)
    assert reference.returncode == 0, reference.stderr
    assert "best val mIoU" in reference.stdout

    run = tmp_path / "run"
    kill_when_printed(train_args(data, run), "epoch 2/4")  # while epoch 3 (or the state write) runs
    state = torch.load(run / "last.pt", weights_only=True)  # never half-written: it loads
    assert state["epoch"] in (1, 2)
    load_checkpoint(run / "best.safetensors")

    resumed = subprocess.run(train_args(data, run) + ["--resume"], capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming after epoch {state['epoch']}" in resumed.stdout
    assert not list(run.glob(".*.tmp"))
    ref_weights, run_weights = load_file(tmp_path / "ref" / "best.safetensors"), load_file(run / "best.safetensors")
    assert ref_weights.keys() == run_weights.keys()
    for key in ref_weights:
        assert torch.equal(ref_weights[key], run_weights[key]), key
    history = json.loads((run / "history.json").read_text())
    assert [h["epoch"] for h in history] == [1, 2, 3, 4]


def test_resume_with_other_options_is_refused(tmp_path: Path) -> None:
    data = make_dataset(tmp_path / "data", train=4, val=2)
    first = subprocess.run(train_args(data, tmp_path / "r", epochs=1), capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    args = train_args(data, tmp_path / "r", epochs=1)
    args[args.index("--lr") + 1] = "0.02"
    second = subprocess.run(args + ["--resume"], capture_output=True, text=True, timeout=600)
    assert second.returncode == 2 and "other options: --lr 0.01, not 0.02;" in second.stderr


def test_eval_reports_perfect_iou_when_labels_are_the_predictions(tmp_path: Path, tiny_checkpoint: Path) -> None:
    from leanseg.core.io.images import read_image
    from leanseg.core.predict import InferenceOptions, Segmenter

    data = make_dataset(tmp_path / "data", train=1, val=3)
    segmenter = Segmenter(load_checkpoint(tiny_checkpoint), InferenceOptions(device="cpu"))
    for image_path in sorted((data / "val" / "images").iterdir()):
        labels = segmenter.segment(read_image(image_path)).labels
        cv2.imwrite(str(data / "val" / "labels" / image_path.name), labels)
    result = subprocess.run([sys.executable, "-m", "leanseg.core", "eval", "--data", str(data), "--split", "val",
                             "--model", str(tiny_checkpoint), "--device", "cpu", "--json", str(tmp_path / "e.json")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    figures = json.loads((tmp_path / "e.json").read_text())
    assert figures["mean_iou"] == pytest.approx(1.0) and figures["pixel_accuracy"] == pytest.approx(1.0)
    assert figures["mirror"] == "flip" and figures["scales"] == [1.0]  # what the figures were made with
    assert "| mean IoU" in result.stdout
