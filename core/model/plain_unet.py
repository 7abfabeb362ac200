"""PlainUNet: the classic U-Net (two 3x3 conv + BN + ReLU per level), the comparison point."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import padding  # called through the module so torch.fx sees the wrapped leaves
from .config import PlainUNetConfig


class DoubleConv(nn.Sequential):
    """(3x3 conv -> BN -> ReLU) x 2."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__(
            nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )
        self.out_channels = out_channels


class UpStage(nn.Module):
    """Bilinear 2x upsample, concatenate the skip, DoubleConv."""

    def __init__(self, in_channels: int, skip_channels: int, out_channels: int) -> None:
        super().__init__()
        self.conv = DoubleConv(in_channels + skip_channels, out_channels)

    def forward(self, x: Tensor, skip: Tensor) -> Tensor:
        x = F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)
        return self.conv(torch.cat([x, skip], dim=1))


class PlainUNet(nn.Module):
    """Ronneberger et al.'s U-Net with same-padding. Any input size: padded, then cropped."""

    def __init__(self, config: PlainUNetConfig | None = None) -> None:
        super().__init__()
        self.config = config or PlainUNetConfig()
        widths = [self.config.base_channels * 2**i for i in range(self.config.depth + 1)]
        self.down = nn.ModuleList(
            [DoubleConv(self.config.in_channels, widths[0])]
            + [DoubleConv(widths[i], widths[i + 1]) for i in range(self.config.depth)]
        )
        self.up = nn.ModuleList(
            [UpStage(widths[i + 1], widths[i], widths[i]) for i in reversed(range(self.config.depth))]
        )
        self.head = nn.Conv2d(widths[0], self.config.num_classes, kernel_size=1)
        self.total_stride = 2**self.config.depth

    def forward(self, image: Tensor) -> Tensor:  # (B, Cin, H, W) -> logits (B, K, H, W)
        x = padding.pad_to_multiple(image, self.total_stride)
        skips = []
        for i, level in enumerate(self.down):
            x = level(x if i == 0 else F.max_pool2d(x, 2))
            skips.append(x)
        y = skips.pop()
        for stage in self.up:
            y = stage(y, skips.pop())
        return padding.crop_like(self.head(y), image)
