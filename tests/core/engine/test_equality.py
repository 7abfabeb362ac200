"""The whole engine against eager PyTorch (eval, fp32) on the U-Nets and two other architectures."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from leanseg.core.engine import compile
from leanseg.core.model import MobileUNet, MobileUNetConfig, PlainUNet, PlainUNetConfig
from leanseg.core.model.blocks import InvertedResidual

from .nets import BilinearDecoderNet, DilatedResNet, UntraceableNet, randomise_batchnorm

TINY_MOBILE = MobileUNetConfig(num_classes=5, width=0.35, decoder_channels=(16, 16, 8, 8), decoder_expansion=3)
TINY_MOBILE_CONTEXT = MobileUNetConfig(num_classes=5, width=0.35, decoder_channels=(16, 16, 8, 8), decoder_expansion=3,
                                       context_dilations=(2, 4))
TINY_PLAIN = PlainUNetConfig(num_classes=3, base_channels=8, depth=3)


def _models() -> dict[str, tuple[nn.Module, tuple[int, int]]]:
    torch.manual_seed(0)
    return {
        "mobile_unet": (randomise_batchnorm(MobileUNet(TINY_MOBILE)), (70, 93)),
        "mobile_unet_context": (randomise_batchnorm(MobileUNet(TINY_MOBILE_CONTEXT)), (70, 93)),
        "plain_unet": (randomise_batchnorm(PlainUNet(TINY_PLAIN)), (45, 61)),
        "dilated_resnet": (randomise_batchnorm(DilatedResNet()), (38, 50)),
        "bilinear_decoder": (randomise_batchnorm(BilinearDecoderNet()), (36, 44)),
    }


def assert_labels_match(labels: torch.Tensor, logits: torch.Tensor, tie: float = 1e-4) -> None:
    """labels (1, H, W) equal argmax of logits (1, K, H, W) except where the top two are within `tie`."""
    expected = logits.argmax(1)
    top2 = logits.topk(2, dim=1).values
    near_tie = (top2[:, 0] - top2[:, 1]) <= tie
    assert bool(((labels.long() == expected) | near_tie).all())


@pytest.mark.parametrize("name", ["mobile_unet", "mobile_unet_context", "plain_unet", "dilated_resnet",
                                  "bilinear_decoder"])
def test_engine_equals_eager(name: str) -> None:
    model, (height, width) = _models()[name]
    x = torch.randn(1, 3, height, width)
    with torch.inference_mode():
        expected = model(x)
    plan = compile(model, device="cpu")
    assert plan.fallbacks == []
    logits = plan.run(x, output="logits")
    assert logits.dtype == torch.float32 and logits.shape == expected.shape
    assert (logits - expected).abs().max().item() <= 1e-4
    labels = plan.run(x, output="labels")
    assert labels.shape == (1, height, width) and labels.dtype == torch.uint8
    assert_labels_match(labels, expected)


@pytest.mark.parametrize("name", ["mobile_unet", "mobile_unet_context"])
def test_mobile_unet_is_banded_and_labels_out(name: str) -> None:
    model, _ = _models()[name]
    plan = compile(model, device="cpu")
    text = plan.describe()
    blocks = sum(isinstance(m, InvertedResidual) for m in model.modules())
    assert f"{blocks} inverted-residual blocks run in row bands" in text
    assert "labels-out head" in text and "no labels-out head" not in text


@pytest.mark.parametrize("name", ["mobile_unet", "mobile_unet_context"])
def test_any_size_and_repeat_runs(name: str) -> None:
    model, _ = _models()[name]
    plan = compile(model, device="cpu")
    for height, width in [(1, 1), (33, 7), (64, 64), (200, 300), (33, 7)]:
        x = torch.randn(1, 3, height, width)
        with torch.inference_mode():
            expected = model(x)
        assert (plan.run(x, output="logits") - expected).abs().max().item() <= 1e-4


def test_untraceable_model_runs_eagerly_and_says_so() -> None:
    model = UntraceableNet().eval()
    plan = compile(model, device="cpu")
    assert plan.fallbacks == ["<whole model>"] and "cannot trace" in plan.describe()
    x = torch.randn(1, 3, 8, 8)
    with torch.inference_mode():
        expected = model(x)
    torch.testing.assert_close(plan.run(x, output="logits"), expected)
    assert torch.equal(plan.run(x).long(), expected.argmax(1))


def test_unknown_node_falls_back_for_that_node() -> None:
    class WithErf(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.erf(self.conv(x)) * 2

    model = WithErf().eval()
    plan = compile(model, device="cpu")
    assert any("erf" in name for name in plan.fallbacks)
    x = torch.randn(1, 3, 9, 9)
    with torch.inference_mode():
        torch.testing.assert_close(plan.run(x, output="logits"), model(x))


def test_bad_arguments_are_named() -> None:
    model, _ = _models()["dilated_resnet"]
    plan = compile(model, device="cpu")
    with pytest.raises(ValueError, match="unknown output 'probs'"):
        plan.run(torch.randn(1, 3, 8, 8), output="probs")
    with pytest.raises(ValueError, match=r"\(1, C, H, W\)"):
        plan.run(torch.randn(2, 3, 8, 8))
    with pytest.raises(ValueError, match="unsupported dtype"):
        compile(model, device="cpu", dtype=torch.int8)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", ["mobile_unet", "plain_unet", "dilated_resnet", "bilinear_decoder"])
def test_engine_equals_eager_on_cuda(name: str) -> None:
    model, (height, width) = _models()[name]
    model = model.cuda()
    x = torch.randn(1, 3, height, width, device="cuda")
    previous = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False  # TF32 would make both sides differ by ~1e-3
    try:
        with torch.inference_mode():
            expected = model(x)
        plan = compile(model, device="cuda")
        logits = plan.run(x, output="logits")
        labels = plan.run(x)
    finally:
        torch.backends.cudnn.allow_tf32 = previous
    assert logits.device.type == "cuda" and (logits - expected).abs().max().item() <= 1e-4
    assert_labels_match(labels, expected)
    stats = plan.last_stats
    assert stats is not None and stats.peak_bytes == plan.estimate_peak(tuple(x.shape))
