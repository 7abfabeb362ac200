"""MobileUNet: a U-Net whose encoder and decoder are MobileNetV2 inverted residuals."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import padding  # called through the module so torch.fx sees the wrapped leaves
from .blocks import ConvBNAct, InvertedResidual, make_divisible
from .config import MobileUNetConfig


class MobileEncoder(nn.Module):
    """MobileNetV2 features; returns the last block of each stride, highest resolution first."""

    def __init__(self, config: MobileUNetConfig) -> None:
        super().__init__()
        stem = make_divisible(config.stem_channels * config.width)
        blocks: list[ConvBNAct | InvertedResidual] = [ConvBNAct(config.in_channels, stem, stride=2)]
        channels, stride = stem, 2
        for t, c, n, s in config.encoder_table:
            out = make_divisible(c * config.width)
            for i in range(n):
                block_stride = s if i == 0 else 1
                blocks.append(InvertedResidual(channels, out, block_stride, t))
                channels, stride = out, stride * block_stride
        self.blocks = nn.ModuleList(blocks)
        # A block is a skip tap when the block after it downsamples, or it is the last one.
        self.tap_indices: list[int] = [
            i for i in range(len(blocks))
            if i == len(blocks) - 1 or getattr(blocks[i + 1], "stride", 1) == 2
        ]
        self.out_channels: list[int] = [blocks[i].out_channels for i in self.tap_indices]
        self.total_stride = 32

    def forward(self, x: Tensor) -> list[Tensor]:  # features at strides 2, 4, 8, 16, 32
        features = []
        for i, block in enumerate(self.blocks):
            x = block(x)
            if i in self.tap_indices:
                features.append(x)
        return features


class DecoderStage(nn.Module):
    """Upsample 2x (nearest), concatenate the skip, one inverted residual."""

    def __init__(self, in_channels: int, skip_channels: int, out_channels: int, expansion: int) -> None:
        super().__init__()
        self.block = InvertedResidual(in_channels + skip_channels, out_channels, 1, expansion)
        self.out_channels = out_channels

    def forward(self, x: Tensor, skip: Tensor) -> Tensor:
        x = F.interpolate(x, scale_factor=2.0, mode="nearest")
        return self.block(torch.cat([x, skip], dim=1))


class MobileUNet(nn.Module):
    """Encoder -> context (dilated inverted residuals at stride 32, none by default) -> decoder -> 1x1 head.
    Any input size: padded to 32, output cropped back."""

    def __init__(self, config: MobileUNetConfig | None = None) -> None:
        super().__init__()
        self.config = config or MobileUNetConfig()
        self.encoder = MobileEncoder(self.config)
        skips = self.encoder.out_channels[::-1]  # strides 32, 16, 8, 4, 2
        channels = skips[0]
        self.context = nn.Sequential(*[
            InvertedResidual(channels, channels, 1, self.config.decoder_expansion, dilation=dilation)
            for dilation in self.config.context_dilations
        ])
        stages = []
        for skip_channels, out in zip(skips[1:], self.config.decoder_channels):
            stages.append(DecoderStage(channels, skip_channels, out, self.config.decoder_expansion))
            channels = out
        self.decoder = nn.ModuleList(stages)
        self.head = nn.Conv2d(channels, self.config.num_classes, kernel_size=1)
        self.total_stride = self.encoder.total_stride

    def forward(self, image: Tensor) -> Tensor:  # (B, Cin, H, W) -> logits (B, K, H, W)
        x = padding.pad_to_multiple(image, self.total_stride)
        features = self.encoder(x)[::-1]  # deepest first
        y = self.context(features[0])
        for stage, skip in zip(self.decoder, features[1:]):
            y = stage(y, skip)  # (B, C, 2h, 2w)
        y = F.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=False)
        return padding.crop_like(self.head(y), image)
