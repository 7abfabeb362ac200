"""The residual pass: conv(x) + r [-> activation] written into r's storage when the add is r's last reader."""
from __future__ import annotations

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
