"""A net whose pooling pyramid needs more than the smallest probe (smp's PAN): loading finds the size it
runs at, the model pads smaller images up to it, and `leanseg segment` gives eager PyTorch's labels on an
image smaller than that minimum and on sizes whose 1/8 map is odd, from the .pt2 and the .onnx, with the
engine and eagerly."""
from __future__ import annotations

import warnings
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from leanseg.core.cli import main
from leanseg.core.model.graph_model import GraphModel
from leanseg.core.model.padding import pad_to_multiple
from leanseg.core.model.sources import describe, load_model

from . import graph_samples as samples

pytestmark = pytest.mark.usefixtures("one_torch_thread")

MULTIPLE = 8  # three stride-2 convs
MINIMUM = 32  # the pyramid pools the 1/8 map twice more: 4 rows at 1/8 pool to 2, then 1; 3 pool to 0


class PyramidNet(nn.Module):
    """(1, 3, H, W) -> (1, K, H, W); the 1/8 map is pooled twice more (7x7 and 3x3 convs on it) and
    upsampled back to its size, as PAN's feature pyramid attention does."""

    def __init__(self, classes: int = 5) -> None:
        super().__init__()
        self.down = nn.Sequential(*[nn.Sequential(nn.Conv2d(c, 16, 3, stride=2, padding=1), nn.ReLU())
                                    for c in (3, 16, 16)])
        self.pool1 = nn.Conv2d(16, 16, 7, padding=3)
        self.pool2 = nn.Conv2d(16, 16, 3, padding=1)
        self.head = nn.Conv2d(16, classes, 1)

    def forward(self, x: Tensor) -> Tensor:
        deep = self.down(x)  # (1, 16, H/8, W/8)
        once = F.relu(self.pool1(F.max_pool2d(deep, 2)))
        twice = F.relu(self.pool2(F.max_pool2d(once, 2)))
        once = once + F.interpolate(twice, size=once.shape[2:], mode="bilinear", align_corners=False)
        deep = deep + F.interpolate(once, size=deep.shape[2:], mode="bilinear", align_corners=False)
        logits = self.head(deep)
        return F.interpolate(logits, size=x.shape[2:], mode="bilinear", align_corners=False)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("pyramid")
    torch.manual_seed(0)
    model = PyramidNet().eval()
    example = torch.rand(1, 3, 96, 128)
    h, w = (torch.export.Dim(name, min=MINIMUM // MULTIPLE, max=64) for name in ("h", "w"))
    program = torch.export.export(model, (example,), dynamic_shapes={"x": {2: MULTIPLE * h, 3: MULTIPLE * w}})
    torch.export.save(program, str(folder / "pyramid.pt2"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (example,), str(folder / "pyramid.onnx"), opset_version=17, dynamo=False,
                          input_names=["image"], output_names=["logits"],
                          dynamic_axes={"image": {2: "height", 3: "width"}, "logits": {2: "height", 3: "width"}})
    for name in ("pyramid.pt2", "pyramid.onnx"):  # the card gives the multiple; the minimum is found
        samples.write_card(folder / name, input={"channels": 3, "mean": list(samples.MEAN), "std": list(samples.STD),
                                                 "size_multiple": MULTIPLE})
    torch.save(model.state_dict(), folder / "weights.pt")
    return {"pt2": folder / "pyramid.pt2", "onnx": folder / "pyramid.onnx", "weights": folder / "weights.pt"}


def test_padding_reaches_the_minimum_and_the_multiple() -> None:
    x = torch.rand(1, 3, 20, 61)
    padded = pad_to_multiple(x, 8, (48, 48))
    assert padded.shape[2:] == (48, 64)
    assert pad_to_multiple(torch.rand(1, 3, 50, 60), 8, (48, 48)).shape[2:] == (56, 64)
    assert pad_to_multiple(x, 8, (0, 96)).shape[2:] == (24, 96)
    assert torch.equal(padded[:, :, :20, :61], x) and padded[:, :, 20:].abs().sum() == 0
    assert pad_to_multiple(x, 8).shape[2:] == (24, 64)


@pytest.mark.parametrize("fmt", ["pt2", "onnx"])
def test_loading_finds_the_minimum_size(fmt: str, models: dict[str, Path]) -> None:
    loaded = load_model(models[fmt])
    assert isinstance(loaded.model, GraphModel)
    assert loaded.model.size_multiple == MULTIPLE and loaded.model.min_size == (MINIMUM, MINIMUM)
    assert loaded.info.config.min_size == (MINIMUM, MINIMUM)
    assert f"padded to at least {MINIMUM} x {MINIMUM} px" in describe(loaded)


@pytest.mark.parametrize("fmt", ["pt2", "onnx"])
@pytest.mark.parametrize("engine", ["lean", "eager"])
@pytest.mark.parametrize("height, width", [(21, 30), (50, 60)])  # under the minimum; odd multiples at 1/8
def test_images_segment_as_eager(fmt: str, engine: str, height: int, width: int, models: dict[str, Path],
                                 tmp_path: Path) -> None:
    rgb = samples.write_image(tmp_path / "small.png", height, width)
    out = tmp_path / "out"
    assert main(["segment", str(tmp_path / "small.png"), "--model", str(models[fmt]), "--out", str(out),
                 "--device", "cpu", "--no-overlay", "--engine", engine, "--mirror", "off"]) == 0
    labels = cv2.imread(str(out / "small_labels.png"), cv2.IMREAD_UNCHANGED)
    model = PyramidNet().eval()
    model.load_state_dict(torch.load(models["weights"]))
    x = torch.from_numpy(rgb).permute(2, 0, 1).float()[None] / 255.0
    x = (x - torch.tensor(samples.MEAN)[:, None, None]) / torch.tensor(samples.STD)[:, None, None]
    with torch.inference_mode():
        padded = pad_to_multiple(x, MULTIPLE, (MINIMUM, MINIMUM))
        expected = model(padded)[0, :, :height, :width].argmax(0)
    assert len(np.unique(expected.numpy())) > 1
    np.testing.assert_array_equal(labels, expected.to(torch.uint8).numpy())
