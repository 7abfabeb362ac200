"""Small architectures the engine must reproduce, besides the two U-Nets (shared by the tests)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def randomise_batchnorm(model: nn.Module, seed: int = 0) -> nn.Module:
    """Non-trivial BN statistics, so folding is really tested (fresh BN is the identity)."""
    generator = torch.Generator().manual_seed(seed)
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            n = module.num_features
            module.running_mean.copy_(torch.rand(n, generator=generator) - 0.5)
            module.running_var.copy_(torch.rand(n, generator=generator) + 0.5)
            module.weight.data.copy_(torch.rand(n, generator=generator) + 0.5)
            module.bias.data.copy_(torch.rand(n, generator=generator) * 0.4 - 0.2)
    return model.eval()


class DilatedResidualBlock(nn.Module):
    """3x3 conv-BN-ReLU -> 3x3 dilated conv-BN, plus the input, then ReLU."""

    def __init__(self, channels: int, dilation: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=dilation, dilation=dilation, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.dropout = nn.Dropout2d(0.1)

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.dropout(self.bn2(self.conv2(y)))
        return F.relu(x + y)


class DilatedResNet(nn.Module):
    """Stem (stride 2) -> residual blocks with dilation 1, 2, 4 -> 1x1 head -> bilinear 2x."""

    def __init__(self, num_classes: int = 5) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16),
                                  nn.ReLU(inplace=True))
        self.blocks = nn.Sequential(*(DilatedResidualBlock(16, d) for d in (1, 2, 4)))
        self.head = nn.Conv2d(16, num_classes, 1)

    def forward(self, image: Tensor) -> Tensor:  # (B, 3, H, W), H and W even -> (B, K, H, W)
        y = self.head(self.blocks(self.stem(image)))
        return F.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=False)


class BilinearDecoderNet(nn.Module):
    """Encoder of strided convs (Hardswish, SiLU), decoder of bilinear upsampling + skip add + cat."""

    def __init__(self, num_classes: int = 4) -> None:
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(3, 12, 3, padding=1), nn.BatchNorm2d(12), nn.Hardswish())
        self.enc2 = nn.Sequential(nn.Conv2d(12, 24, 3, stride=2, padding=1), nn.BatchNorm2d(24), nn.SiLU())
        self.enc3 = nn.Sequential(nn.Conv2d(24, 24, 3, stride=2, padding=1), nn.BatchNorm2d(24), nn.ReLU6())
        self.pool = nn.AvgPool2d(3, stride=1, padding=1)
        self.dec2 = nn.Sequential(nn.Conv2d(48, 12, 3, padding=1), nn.BatchNorm2d(12), nn.ReLU())
        self.head = nn.Conv2d(24, num_classes, 1)

    def forward(self, image: Tensor) -> Tensor:  # (B, 3, H, W), H and W divisible by 4
        s1 = self.enc1(image)
        s2 = self.enc2(s1)
        y = self.pool(self.enc3(s2))
        y = F.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=False)
        y = self.dec2(torch.cat([y, s2 + y], dim=1))
        y = F.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=False)
        return self.head(torch.cat([y, s1], dim=1))


class UntraceableNet(nn.Module):
    """Control flow on a tensor's value: torch.fx cannot trace it."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 2, 1)

    def forward(self, image: Tensor) -> Tensor:
        y = self.conv(image)
        return y if y.sum() > 0 else -y
