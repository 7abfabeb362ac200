"""Training and evaluation images as one normalised batch tensor (ImageNet mean and std, channels_last)."""
from __future__ import annotations

import numpy as np
import torch

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def to_batch(images: list[np.ndarray], device: torch.device) -> torch.Tensor:
    """list of (H, W, 3) uint8 -> (B, 3, H, W) float normalised, channels_last."""
    x = torch.from_numpy(np.stack(images)).to(device).permute(0, 3, 1, 2).float().div_(255)
    mean = torch.tensor(IMAGENET_MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD, device=device).view(1, 3, 1, 1)
    return ((x - mean) / std).contiguous(memory_format=torch.channels_last)
