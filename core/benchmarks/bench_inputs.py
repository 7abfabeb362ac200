"""Inputs the benchmarks share: CamVid images linked into a folder, a seeded stand-in model, scaled pictures."""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import torch

from ..assets import default_model_path
from ..io.images import read_image
from ..model import MobileUNet, MobileUNetConfig
from ..model.checkpoint import LoadedModel, default_info, save_checkpoint
from ..model.sources import load_model


def link_images(source: Path, count: int, folder: Path) -> Path:
    """Symlink the first `count` PNGs of `source` (sorted) into a new `folder` (never copied)."""
    folder.mkdir(parents=True)
    paths = sorted(source.glob("*.png"))[:count]
    if len(paths) < count:
        raise SystemExit(f"{source} has {len(paths)} PNG images, {count} needed")
    for path in paths:
        (folder / path.name).symlink_to(path)
    return folder


def random_camvid_model(path: Path) -> Path:
    """A seeded random-init MobileUNet of the shipped model's shape (11 classes, width 0.75), saved at `path`.

    Speed does not depend on the weights; label agreement does, so measure that on the trained model.
    """
    torch.manual_seed(0)
    config = MobileUNetConfig(num_classes=11, width=0.75)
    return save_checkpoint(path, MobileUNet(config).eval(), default_info(config))


def load_bench_model(path: str | None) -> LoadedModel:
    """The checkpoint, the shipped default model, or a seeded random-init MobileUNet(11 classes, 0.75)."""
    if path:
        return load_model(path)
    if default_model_path().is_file():
        return load_model(default_model_path())
    torch.manual_seed(0)
    config = MobileUNetConfig(num_classes=11, width=0.75)
    return LoadedModel(MobileUNet(config).eval(), default_info(config), None)


def scaled_image(path: str, size: int) -> np.ndarray:
    """(size, size, 3) uint8: the picture stretched to a square of the given side."""
    pixels = read_image(path).pixels[..., :3]
    return cv2.resize(pixels, (size, size), interpolation=cv2.INTER_LINEAR)
