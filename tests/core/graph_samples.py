"""Small segmentation nets exported in the test itself as a `.pt2` (torch.export) and an `.onnx`
(torch.onnx), with a card beside them, and eager PyTorch's labels for the same module to compare with.
No zoo environment needed."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import cv2
import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

CLASSES = ("sky", "road", "tree", "car", "person")
COLOURS = ((70, 130, 180), (128, 64, 128), (60, 160, 60), (0, 0, 142), (220, 20, 60))
MEAN = (0.3, 0.4, 0.5)  # not ImageNet's: the card must be honoured
STD = (0.2, 0.25, 0.3)
MULTIPLE = 32  # five stride-2 convolutions; the full-resolution skip makes other sizes fail


class TinySegNet(nn.Module):
    """(1, C, H, W) -> (1, K, H, W) logits; H and W must be multiples of 32 (the skip add needs it)."""

    def __init__(self, classes: int = len(CLASSES), in_channels: int = 3) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_channels, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.down = nn.Sequential(*[nn.Sequential(nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU6())
                                    for _ in range(5)])
        self.head = nn.Conv2d(8, classes, 1)

    def forward(self, x: Tensor) -> Tensor:
        skip = self.stem(x)  # (1, 8, H, W)
        deep = F.interpolate(self.down(skip), scale_factor=32.0, mode="nearest")  # (1, 8, H, W) when H, W % 32 == 0
        return self.head(skip + deep)  # (1, K, H, W)


def made(classes: int = len(CLASSES), in_channels: int = 3, seed: int = 0) -> nn.Module:
    """A TinySegNet with seeded weights and non-trivial BatchNorm statistics, in eval mode."""
    torch.manual_seed(seed)
    model = TinySegNet(classes, in_channels)
    bn = model.stem[1]
    bn.running_mean.uniform_(-0.2, 0.2)
    bn.running_var.uniform_(0.5, 1.5)
    return model.eval()


def export_pt2(model: nn.Module, path: Path, channels: int = 3) -> Path:
    """torch.export with dynamic height and width (multiples of 32), saved as `path`."""
    h, w = torch.export.Dim("h", min=1, max=64), torch.export.Dim("w", min=1, max=64)
    program = torch.export.export(model, (torch.rand(1, channels, 64, 96),),
                                  dynamic_shapes={"x": {2: MULTIPLE * h, 3: MULTIPLE * w}})
    torch.export.save(program, str(path))
    return path


def export_onnx(model: nn.Module, path: Path, channels: int = 3) -> Path:
    """torch.onnx (TorchScript exporter) with dynamic height and width."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.rand(1, channels, 64, 96),), str(path), opset_version=17, dynamo=False,
                          input_names=["image"], output_names=["logits"],
                          dynamic_axes={"image": {2: "height", 3: "width"}, "logits": {2: "height", 3: "width"}})
    return path


def write_card(model_path: Path, **changes: object) -> Path:
    """NAME.json beside the model, card_version 1 as the zoo writes it (with `changes` merged in)."""
    card: dict[str, object] = {
        "card_version": 1, "name": model_path.stem, "architecture": "TinySegNet (test)",
        "classes": list(CLASSES), "colours": [list(c) for c in COLOURS],
        "input": {"channels": 3, "range": "0..1 RGB, then normalised", "mean": list(MEAN), "std": list(STD),
                  "size_multiple": MULTIPLE},
        "output": "logits (1, classes, height, width)", "weights": "random (test)",
    }
    card.update(changes)
    path = model_path.with_suffix(".json")
    path.write_text(json.dumps(card))
    return path


def write_image(path: Path, height: int = 45, width: int = 70, seed: int = 3) -> np.ndarray:
    """A random RGB image written as PNG; returns its (H, W, 3) RGB pixels."""
    rgb = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    cv2.imwrite(str(path), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    return rgb


def eager_labels(model: nn.Module, rgb: np.ndarray, mean: tuple[float, ...] = MEAN,
                 std: tuple[float, ...] = STD) -> np.ndarray:
    """Eager PyTorch: normalise, pad bottom/right with zeros to the multiple, run, crop, argmax -> (H, W) uint8."""
    x = torch.from_numpy(rgb).permute(2, 0, 1).float()[None] / 255.0  # (1, 3, H, W)
    x = (x - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]
    height, width = x.shape[2:]
    padded = F.pad(x, (0, -width % MULTIPLE, 0, -height % MULTIPLE))
    with torch.inference_mode():
        logits = model(padded)[:, :, :height, :width]  # (1, K, H, W)
    return logits[0].argmax(0).to(torch.uint8).numpy()
