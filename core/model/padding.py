"""Pad inputs to a multiple of the model's total stride and crop outputs back.

Both are `torch.fx.wrap`ped leaves so a traced graph keeps them as single nodes.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


@torch.fx.wrap
def pad_to_multiple(x: Tensor, multiple: int, minimum: tuple[int, int] = (0, 0)) -> Tensor:
    """Zero-pad (B, C, H, W) at the bottom and right so H and W divide by `multiple` and are at least
    `minimum` (height, width; multiples of `multiple`: the smallest size some nets' pooling pyramids run at)."""
    height, width = x.shape[-2], x.shape[-1]
    pad_h = max((-height) % multiple, minimum[0] - height)
    pad_w = max((-width) % multiple, minimum[1] - width)
    if pad_h == 0 and pad_w == 0:
        return x
    return F.pad(x, (0, pad_w, 0, pad_h))


@torch.fx.wrap
def crop_like(y: Tensor, reference: Tensor) -> Tensor:
    """Crop (B, K, H', W') to the spatial size of `reference` (B, C, H, W), H <= H'."""
    height, width = reference.shape[-2], reference.shape[-1]
    if y.shape[-2] == height and y.shape[-1] == width:
        return y
    return y[..., :height, :width]
