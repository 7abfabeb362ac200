"""Fixtures for core tests: tiny models and checkpoints, made on the fly (no shipped data)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from leanseg.core.model import MobileUNet, MobileUNetConfig
from leanseg.core.model.checkpoint import default_info, save_checkpoint

TINY_MOBILE = MobileUNetConfig(num_classes=4, width=0.25, decoder_channels=(16, 16, 8, 8), decoder_expansion=2)


@pytest.fixture
def tiny_checkpoint(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    model = MobileUNet(TINY_MOBILE).eval()
    return save_checkpoint(tmp_path / "tiny.safetensors", model, default_info(TINY_MOBILE))


@pytest.fixture
def rgb_image(tmp_path: Path) -> Path:
    import cv2

    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 255, (45, 61, 3), dtype=np.uint8)
    path = tmp_path / "input.png"
    cv2.imwrite(str(path), pixels)
    return path
