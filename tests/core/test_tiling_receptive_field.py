"""The receptive field read from the graph bounds what an output pixel really depends on."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from leanseg.core.engine.receptive_field import ReceptiveFieldError, compute_receptive_field
from leanseg.core.model import MobileUNet, MobileUNetConfig, PlainUNet, PlainUNetConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Mixed(nn.Module):
    """Strided, dilated, pooled, transposed and upsampled paths merged by a skip."""

    def __init__(self) -> None:
        super().__init__()
        self.down = nn.Conv2d(1, 4, 3, stride=2, padding=1)
        self.dilated = nn.Conv2d(4, 4, 3, padding=2, dilation=2)
        self.pool = nn.MaxPool2d(2)
        self.up = nn.ConvTranspose2d(4, 4, 4, stride=2, padding=1)
        self.head = nn.Conv2d(5, 3, 5, padding=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.up(self.pool(torch.relu(self.dilated(self.down(x)))))  # stride 2 -> 4 -> 2
        y = F.interpolate(y, scale_factor=2.0, mode="bilinear", align_corners=False)
        return self.head(torch.cat([y, x], dim=1))


def gradient_extent(model: nn.Module, channels: int, size: int, row: int) -> tuple[int, int]:
    """(rows before, rows after) output pixel (row, row) truly reads, from the input gradient."""
    x = torch.randn(1, channels, size, size, requires_grad=True)
    model(x)[0, :, row, row].sum().backward()
    assert x.grad is not None
    rows = torch.nonzero(x.grad.abs().sum(dim=(0, 1, 3)) > 0).flatten()
    return row - int(rows.min()), int(rows.max()) - row


def linear_copy(model: nn.Module) -> nn.Module:
    """The model with ReLUs removed, so no input's gradient is hidden behind a dead unit."""
    for module in model.modules():
        for name, child in module.named_children():
            if isinstance(child, (nn.ReLU, nn.ReLU6)):
                setattr(module, name, nn.Identity())
    return model


@pytest.mark.parametrize("make", [lambda: Mixed(), lambda: PlainUNet(PlainUNetConfig(3, 1, 4, depth=3))])
def test_field_bounds_the_true_dependence_and_is_tight(make) -> None:  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    model = linear_copy(make()).eval()
    field = compute_receptive_field(model)
    channels = 1
    for row in (40, 41, 42, 43):
        before, after = gradient_extent(model, channels, 96, row)
        assert before <= field.before_px[0] and after <= field.after_px[0]
    worst = max(max(gradient_extent(model, channels, 96, r)) for r in range(40, 48))
    assert worst >= field.halo_px - 2 * field.total_stride  # not a wild overestimate


def test_mobile_unet_field_and_stride() -> None:
    field = compute_receptive_field(MobileUNet(MobileUNetConfig(num_classes=3, width=0.25)))
    assert field.total_stride == 32
    assert 250 < field.halo_px <= 320 and field.aligned_halo_px == 320


@pytest.mark.parametrize("layer, message", [
    (nn.AdaptiveAvgPool2d(1), "unbounded"),
    (nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True), "align_corners"),
    (nn.Upsample(size=(8, 8)), "scale factor"),
])
def test_untileable_layers_are_refused_by_name(layer: nn.Module, message: str) -> None:
    with pytest.raises(ReceptiveFieldError, match=message):
        compute_receptive_field(nn.Sequential(nn.Conv2d(3, 3, 3, padding=1), layer))


def test_interpolate_to_a_fixed_size_is_refused() -> None:
    class Fixed(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.interpolate(x, size=(16, 16))

    with pytest.raises(ReceptiveFieldError, match="fixed size"):
        compute_receptive_field(Fixed())
