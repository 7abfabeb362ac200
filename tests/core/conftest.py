"""Fixtures for core tests: tiny models and checkpoints, made on the fly (no shipped data)."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from leanseg.core.model import MobileUNet, MobileUNetConfig, PlainUNet
from leanseg.core.model.checkpoint import default_info, save_checkpoint

from .tiling_samples import SMALL_UNET

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


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """Tiny convolutions on a shared, busy machine run far faster without thread hand-offs.

    Opt in per module with `pytestmark = pytest.mark.usefixtures("one_torch_thread")`.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def small_unet() -> torch.nn.Module:
    """PlainUNet(SMALL_UNET), seed 0, eval: halo 28 px, stride 4."""
    torch.manual_seed(0)
    return PlainUNet(SMALL_UNET).eval()


@pytest.fixture
def unet_checkpoint(tmp_path: Path, small_unet: torch.nn.Module) -> Path:
    """`small_unet` saved as tmp_path/unet.safetensors."""
    return save_checkpoint(tmp_path / "unet.safetensors", small_unet, default_info(SMALL_UNET))
