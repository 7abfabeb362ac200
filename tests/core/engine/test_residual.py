"""The residual pass: conv(x) + r [-> activation] written into r's storage when the add is r's last reader."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from leanseg.core.engine import compile
from leanseg.core.engine.residual import ResidualConv


class BasicBlocks(nn.Module):
    """Two ResNet basic blocks (conv-BN-ReLU-conv-BN + identity, ReLU), then y + conv(y) (not fusable)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, 1, 1)
        self.convs = nn.ModuleList(nn.Conv2d(8, 8, 3, 1, 1) for _ in range(5))
        self.norms = nn.ModuleList(nn.BatchNorm2d(8) for _ in range(4))
        for norm in self.norms:
            norm.running_mean.uniform_(-0.5, 0.5)
            norm.running_var.uniform_(0.5, 2.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.stem(x))
        for i in (0, 2):
            identity = y
            y = F.relu(self.norms[i](self.convs[i](y)))
            y = F.relu(self.norms[i + 1](self.convs[i + 1](y)) + identity)
        return y + self.convs[4](y)  # the conv reads the residual itself: must not write into it


def test_basic_blocks_add_into_the_identity_and_equal_eager() -> None:
    model = BasicBlocks().eval()
    plan = compile(model, device="cpu", head=False)
    fused = [m for m in plan.graph_module.modules() if isinstance(m, ResidualConv)]
    assert len(fused) == 2 and all(m.activation == "relu" for m in fused)
    x = torch.randn(1, 3, 40, 52, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        expected = model(x)
    assert (plan.run(x, output="logits") - expected).abs().max().item() <= 1e-4


class ActivatedDecoder(nn.Module):
    """LinkNet's decoder step: relu(conv(x)) + skip, with x at the skip's size (a 1x1 and a 3x3 conv)."""

    def __init__(self, kernel: int) -> None:
        super().__init__()
        self.stem, self.skip = nn.Conv2d(3, 8, 3, 2, 1), nn.Conv2d(3, 16, 3, 2, 1)
        self.conv = nn.Conv2d(8, 16, kernel, 1, kernel // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.conv(F.relu(self.stem(x)))) + self.skip(x)


@pytest.mark.parametrize("kernel", [1, 3])
def test_an_activated_conv_is_added_into_the_skip_a_band_at_a_time(kernel: int) -> None:
    model = ActivatedDecoder(kernel).eval()
    plan = compile(model, device="cpu", head=False)
    (fused,) = [m for m in plan.graph_module.modules() if isinstance(m, ResidualConv)]
    fused.band_bytes = 1  # a row per band: every band edge meets the 3x3 conv's halo
    x = torch.randn(1, 3, 40, 52, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        expected = model(x)
    assert (plan.run(x, output="logits") - expected).abs().max().item() <= 1e-5
    assert plan.last_stats is not None
    map_bytes = 16 * 20 * 26 * 4  # one map at the skip's size
    assert fused.transient_bytes == 16 * 26 * 4  # one row of the conv's output at a time
    assert plan.last_stats.peak_bytes < 2 * map_bytes + 8 * 20 * 26 * 4  # never the conv's output beside the skip
    assert plan.estimate_peak(tuple(x.shape), "logits") == plan.last_stats.peak_bytes
