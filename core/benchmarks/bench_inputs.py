"""Inputs the benchmark scripts share: CamVid images linked into a folder, a seeded stand-in model."""
from __future__ import annotations

from pathlib import Path

import torch

from ..model import MobileUNet, MobileUNetConfig
from ..model.checkpoint import default_info, save_checkpoint


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
