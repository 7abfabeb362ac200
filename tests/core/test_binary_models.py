"""A graph with one output channel (a binary net: a sigmoid, or its logit) segments two classes, background and
its own, where the probability is above 0.5; `--probs` writes (1 - p, p); a card names its one class."""
from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from leanseg.core.cli import main
from leanseg.core.engine import compile
from leanseg.core.model.card import IMAGENET_MEAN, IMAGENET_STD
from leanseg.core.model.checkpoint import CheckpointError
from leanseg.core.model.sources import load_model

from . import graph_samples as samples

pytestmark = pytest.mark.usefixtures("one_torch_thread")
HEIGHT, WIDTH = 45, 70


class Sigmoid(nn.Module):
    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, x: Tensor) -> Tensor:
        return torch.sigmoid(self.net(x))


def _padded_forward(model: nn.Module, rgb: np.ndarray, mean: tuple[float, ...] = samples.MEAN,
                    std: tuple[float, ...] = samples.STD) -> Tensor:
    """Eager PyTorch on the normalised image padded to the multiple, cropped back: (1, 1, H, W)."""
    x = torch.from_numpy(rgb).permute(2, 0, 1).float()[None] / 255.0
    x = (x - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]
    padded = F.pad(x, (0, -WIDTH % samples.MULTIPLE, 0, -HEIGHT % samples.MULTIPLE))
    with torch.inference_mode():
        return model(padded)[:, :, :HEIGHT, :WIDTH]


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    path = tmp_path_factory.mktemp("image") / "cells.png"
    return path, samples.write_image(path, HEIGHT, WIDTH)


@pytest.fixture(scope="module")
def binary_net(image: tuple[Path, np.ndarray]) -> nn.Module:
    """A one-class TinySegNet whose logit is centred on this image, so about half its pixels are foreground."""
    net = samples.made(classes=1)
    with torch.no_grad():
        net.head.bias -= _padded_forward(net, image[1]).median()
    return net


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, binary_net: nn.Module) -> dict[tuple[str, str], Path]:
    """(format, output kind) -> the binary net as .pt2 / .onnx, ending in its logit or in a sigmoid, with a card
    naming its one class and colour."""
    folder = tmp_path_factory.mktemp("binary")
    made = {}
    for kind, net in (("logits", binary_net), ("probabilities", Sigmoid(binary_net).eval())):
        for fmt, export in (("pt2", samples.export_pt2), ("onnx", samples.export_onnx)):
            path = export(net, folder / f"{kind}.{fmt}")
            samples.write_card(path, classes=["lesion"], colours=[[255, 0, 0]], output=f"{kind} (1, 1, H, W)")
            made[fmt, kind] = path
    return made


@pytest.mark.parametrize("engine", ["lean", "eager"])
@pytest.mark.parametrize("kind", ["logits", "probabilities"])
@pytest.mark.parametrize("fmt", ["pt2", "onnx"])
def test_the_foreground_is_where_the_probability_is_over_a_half(
        fmt: str, kind: str, engine: str, models: dict[tuple[str, str], Path], binary_net: nn.Module,
        image: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, rgb = image
    assert main(["segment", str(path), "--model", str(models[fmt, kind]), "--out", str(tmp_path), "--device", "cpu",
                 "--engine", engine, "--mirror", "off", "--no-overlay", "--probs"]) == 0
    probability = torch.sigmoid(_padded_forward(binary_net, rgb))[0, 0].numpy()  # (H, W)
    labels = cv2.imread(str(tmp_path / "cells_labels.png"), cv2.IMREAD_UNCHANGED)
    sure = np.abs(probability - 0.5) > 1e-3  # pixels on the fence may go either way in another kernel order
    assert 0.2 < (probability > 0.5).mean() < 0.8  # a test that could fail: both classes are there
    np.testing.assert_array_equal(labels[sure], (probability > 0.5)[sure])
    probs = np.load(tmp_path / "cells_probs.npy").astype(np.float32)  # (2, H, W): background, lesion
    assert probs.shape == (2, HEIGHT, WIDTH)
    np.testing.assert_allclose(probs[1], probability, atol=2e-3)
    np.testing.assert_allclose(probs[0], 1 - probability, atol=2e-3)


def test_the_card_names_the_one_class_after_the_background(models: dict[tuple[str, str], Path]) -> None:
    info = load_model(models["pt2", "logits"]).info
    assert info.class_names == ("background", "lesion") and info.config.num_classes == 2
    assert info.class_colours == ((0, 0, 0), (255, 0, 0))


def test_without_a_card_a_binary_net_is_background_and_foreground(
        models: dict[tuple[str, str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bare = tmp_path / "bare.onnx"
    bare.write_bytes(models["onnx", "logits"].read_bytes())
    info = load_model(bare).info
    assert info.class_names == ("background", "foreground") and info.class_colours[0] == (0, 0, 0)
    assert main(["import-model", str(bare), "--out", str(tmp_path / "bare.leanseg")]) == 0
    assert "assumed default class names (background, foreground)" in capsys.readouterr().out


def test_a_card_with_both_names_is_taken_and_one_with_three_is_refused(models: dict[tuple[str, str], Path],
                                                                       tmp_path: Path) -> None:
    model = tmp_path / "net.pt2"
    model.write_bytes(models["pt2", "logits"].read_bytes())
    card = json.loads(models["pt2", "logits"].with_suffix(".json").read_text())
    model.with_suffix(".json").write_text(json.dumps({**card, "classes": ["tissue", "lesion"], "colours": []}))
    assert load_model(model).info.class_names == ("tissue", "lesion")
    model.with_suffix(".json").write_text(json.dumps({**card, "classes": ["a", "b", "c"], "colours": []}))
    with pytest.raises(CheckpointError, match=r"net\.pt2.*lists 3 classes, the graph outputs 1 channel \(a binary "
                                              r"net\): give it 1 name"):
        load_model(model)


def test_a_sigmoid_net_without_a_card_is_read_by_its_sigmoid_not_as_logits(
        models: dict[tuple[str, str], Path], binary_net: nn.Module, image: tuple[Path, np.ndarray],
        tmp_path: Path) -> None:
    """Without a card the output is taken for logits; a graph that ends in a sigmoid says otherwise itself."""
    bare = tmp_path / "bare.pt2"
    bare.write_bytes(models["pt2", "probabilities"].read_bytes())
    path, rgb = image
    assert main(["segment", str(path), "--model", str(bare), "--out", str(tmp_path), "--device", "cpu",
                 "--mirror", "off", "--no-overlay"]) == 0
    probability = torch.sigmoid(_padded_forward(binary_net, rgb, IMAGENET_MEAN, IMAGENET_STD))[0, 0].numpy()
    labels = cv2.imread(str(tmp_path / "cells_labels.png"), cv2.IMREAD_UNCHANGED)
    sure = np.abs(probability - 0.5) > 1e-3
    assert 0.05 < (probability > 0.5).mean() < 0.95  # taken for logits, every pixel would be foreground
    np.testing.assert_array_equal(labels[sure], (probability > 0.5)[sure])


@pytest.mark.parametrize("kind", ["logits", "probabilities"])
def test_the_engine_keeps_its_labels_out_tail_and_exact_tiles_match_one_pass(
        kind: str, models: dict[tuple[str, str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = compile(load_model(models["onnx", kind]).model, device="cpu")
    assert any(note.startswith("labels-out tail") for note in plan.notes), plan.notes
    big = tmp_path / "big.png"
    samples.write_image(big, 400, 520, seed=5)
    for name, extra in (("whole", ["--tiling", "off"]), ("tiled", ["--tiling", "exact", "--memory-budget", "6MB"])):
        out = tmp_path / name
        assert main(["segment", str(big), "--model", str(models["onnx", kind]), "--out", str(out), "--device", "cpu",
                     "--mirror", "off", "--no-overlay", *extra]) == 0
    assert "tiling exact: " in capsys.readouterr().out  # the budget made it tile, with the exact halo
    whole = cv2.imread(str(tmp_path / "whole" / "big_labels.png"), cv2.IMREAD_UNCHANGED)
    tiled = cv2.imread(str(tmp_path / "tiled" / "big_labels.png"), cv2.IMREAD_UNCHANGED)
    assert 0.1 < whole.mean() < 0.9
    np.testing.assert_array_equal(tiled, whole)


def test_eval_of_a_binary_net_on_0_255_masks_says_what_the_labels_should_hold(
        models: dict[tuple[str, str], Path], tmp_path: Path) -> None:
    from .test_eval_cli import leanseg_eval
    from .test_train import make_dataset

    data = make_dataset(tmp_path / "data", train=1, val=2)
    for path in (data / "val" / "labels").iterdir():
        cv2.imwrite(str(path), np.where(cv2.imread(str(path), cv2.IMREAD_UNCHANGED) == 0, 255, 0).astype(np.uint8))
    result = leanseg_eval(data, models["onnx", "logits"])
    assert result.returncode == 0, result.stderr
    assert "a 0/255 mask? a binary net's labels are 0 and 1: save the masks with 1 for the class" in result.stderr
