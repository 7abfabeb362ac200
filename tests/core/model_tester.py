"""A shared tester every segmentation model runs through (forward, backward, odd sizes)."""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn


class SegmentationModelTester:
    """Subclass with `make(num_classes, in_channels) -> nn.Module`."""

    make: Callable[..., nn.Module]

    def test_forward_odd_size_keeps_shape(self) -> None:
        model = self.make(num_classes=12, in_channels=3).eval()
        with torch.inference_mode():
            out = model(torch.randn(1, 3, 97, 131))
        assert out.shape == (1, 12, 97, 131)
        assert torch.isfinite(out).all()

    def test_one_class_one_channel(self) -> None:
        model = self.make(num_classes=1, in_channels=1).eval()
        with torch.inference_mode():
            assert model(torch.randn(2, 1, 64, 40)).shape == (2, 1, 64, 40)

    def test_backward_reaches_every_parameter(self) -> None:
        model = self.make(num_classes=3, in_channels=3).train()
        out = model(torch.randn(2, 3, 70, 90))
        torch.nn.functional.cross_entropy(out, torch.randint(0, 3, (2, 70, 90))).backward()
        missing = [n for n, p in model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
        assert not missing

    def test_padding_does_not_leak_into_crop(self) -> None:
        """The output for an image equals the crop of the output for the same image zero-padded."""
        model = self.make(num_classes=5, in_channels=3).eval()
        x = torch.randn(1, 3, 50, 70)
        stride = model.total_stride
        padded = torch.nn.functional.pad(x, (0, (-70) % stride, 0, (-50) % stride))
        with torch.inference_mode():
            torch.testing.assert_close(model(x), model(padded)[..., :50, :70])

    def test_fx_traceable(self) -> None:
        model = self.make(num_classes=4, in_channels=3).eval()
        graph_module = torch.fx.symbolic_trace(model)
        x = torch.randn(1, 3, 33, 47)
        with torch.inference_mode():
            torch.testing.assert_close(graph_module(x), model(x))
