"""`nn.Upsample -> conv` inside the network (the up-conv of the Attention U-Net and of many hand-written
U-Nets, whose output the attention gate and the concatenation both read): the conv runs in row bands over
the upsampled rows, so the upsampled map never exists whole, and the plan equals eager PyTorch."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from leanseg.core.engine import compile, compiler
from leanseg.core.engine.bands import BandedInvertedResidual

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class GatedUpConv(nn.Module):
    """encoder to 1/2 -> Upsample x2 -> conv (its output read twice: an attention gate and a concatenation)."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.skip = nn.Conv2d(3, 8, 3, padding=1)
        self.down = nn.Conv2d(8, 32, 3, stride=2, padding=1)
        self.up = nn.Upsample(scale_factor=2, mode=mode)
        self.up_conv = nn.Conv2d(32, 8, 3, padding=1)
        self.gate = nn.Conv2d(8, 1, 1)
        self.head = nn.Conv2d(16, 4, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        skip = F.relu(self.skip(x))
        g = F.relu(self.up_conv(self.up(F.relu(self.down(skip)))))
        return self.head(torch.cat([skip * torch.sigmoid(self.gate(g)), g], 1))


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_the_upsampled_map_is_built_band_by_band(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    model = GatedUpConv(mode).eval()
    plan = compile(model, device="cpu")
    assert plan.fallbacks == []
    assert "1 convs over an upsampled map (nn.Upsample -> conv) run in row bands" in plan.notes
    assert plan.graph_module is not None
    banded = [m for m in plan.graph_module.modules() if isinstance(m, BandedInvertedResidual) and m.parts[0].scale]
    assert [(m.parts[0].scale, m.parts[0].mode) for m in banded] == [(2, mode)]
    monkeypatch.setattr(compiler, "band_upsampled_convs", lambda graph_module: 0)
    whole = compile(model, device="cpu")  # the same plan with the upsampled map made whole
    for height, width in ((64, 96), (70, 90)):
        x = torch.randn(1, 3, height, width, generator=torch.Generator().manual_seed(height))
        with torch.inference_mode():
            expected = model(x)
        assert (plan.run(x, output="logits") - expected).abs().max().item() <= 1e-5
        assert torch.equal(plan.run(x)[0].long(), expected[0].argmax(0))
    x = torch.randn(1, 3, 256, 256)
    plan.run(x), whole.run(x)
    assert plan.last_stats is not None and whole.last_stats is not None
    steps = [step.name for step in plan.last_stats.steps]
    assert "interpolate" in [step.name for step in whole.last_stats.steps] and "interpolate" not in steps
    assert plan.last_stats.peak_bytes < whole.last_stats.peak_bytes
