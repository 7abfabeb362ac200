"""Building blocks shared by the U-Nets: conv-BN-activation and the inverted residual."""
from __future__ import annotations

from torch import Tensor, nn


def make_divisible(value: float, divisor: int = 8, min_value: int | None = None) -> int:
    """Round a channel count to a multiple of `divisor`, never dropping more than 10%."""
    min_value = min_value or divisor
    rounded = max(min_value, int(value + divisor / 2) // divisor * divisor)
    if rounded < 0.9 * value:
        rounded += divisor
    return rounded


class ConvBNAct(nn.Sequential):
    """Conv2d -> BatchNorm2d -> activation (ReLU6 by default; None for linear)."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int = 3,
        stride: int = 1,
        groups: int = 1,
        activation: type[nn.Module] | None = nn.ReLU6,
        dilation: int = 1,
    ) -> None:
        padding = dilation * (kernel_size - 1) // 2
        layers: list[nn.Module] = [
            nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding, dilation=dilation, groups=groups,
                      bias=False),
            nn.BatchNorm2d(out_channels),
        ]
        if activation is not None:
            layers.append(activation(inplace=True))
        super().__init__(*layers)
        self.out_channels = out_channels


class InvertedResidual(nn.Module):
    """MobileNetV2 block: 1x1 expand -> 3x3 depthwise -> 1x1 linear project (+ residual).

    `expand`, `depthwise` and `project` are named so the engine can find the pattern.
    The residual is used when stride is 1 and the channel count is unchanged. `dilation` spaces the depthwise
    taps (a wider context at the same cost).
    """

    def __init__(self, in_channels: int, out_channels: int, stride: int, expand_ratio: int,
                 dilation: int = 1) -> None:
        super().__init__()
        if stride not in (1, 2):
            raise ValueError(f"stride must be 1 or 2, got {stride}")
        hidden = int(round(in_channels * expand_ratio))
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.stride = stride
        self.use_residual = stride == 1 and in_channels == out_channels
        self.expand: nn.Module = (
            ConvBNAct(in_channels, hidden, kernel_size=1) if expand_ratio != 1 else nn.Identity()
        )
        self.depthwise = ConvBNAct(hidden, hidden, kernel_size=3, stride=stride, groups=hidden, dilation=dilation)
        self.project = ConvBNAct(hidden, out_channels, kernel_size=1, activation=None)

    def forward(self, x: Tensor) -> Tensor:  # (B, Cin, H, W) -> (B, Cout, H/s, W/s)
        y = self.project(self.depthwise(self.expand(x)))
        return x + y if self.use_residual else y
