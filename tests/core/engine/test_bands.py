"""Inverted residuals in row bands, and the labels-out head, each against eager PyTorch."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from leanseg.core.engine import Plan, compile
from leanseg.core.engine.bands import MIN_BAND_ROWS, BandedInvertedResidual
from leanseg.core.engine.head import LabelsHead
from leanseg.core.model.blocks import InvertedResidual

from .nets import randomise_batchnorm


class _Block(nn.Module):
    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        self.block = block

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


def _run_on_threads(plan: Plan, x: torch.Tensor, threads: int) -> torch.Tensor:
    """The plan's logits with `threads` intra-op threads (bands run in order with 1, on parallel workers with 2)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return plan.run(x, output="logits")
    finally:
        torch.set_num_threads(previous)


@pytest.mark.parametrize("stride, expand_ratio, out_channels", [(1, 6, 8), (2, 6, 12), (1, 1, 8), (1, 4, 6)])
@pytest.mark.parametrize("height, width", [(17, 13), (32, 9)])
@pytest.mark.parametrize("threads", [1, 2])
def test_banded_block_equals_eager(stride: int, expand_ratio: int, out_channels: int, height: int, width: int,
                                   threads: int) -> None:
    torch.manual_seed(stride * 7 + expand_ratio)
    model = randomise_batchnorm(_Block(InvertedResidual(8, out_channels, stride, expand_ratio)))
    plan = compile(model, device="cpu", head=False)
    banded = [m for m in plan.graph_module.modules() if isinstance(m, BandedInvertedResidual)]
    assert len(banded) == 1 and banded[0].residual == (stride == 1 and out_channels == 8)
    banded[0].band_bytes, banded[0].min_rows = 1, 1  # one output row per band: every band an edge or interior case
    x = torch.randn(1, 8, height, width)
    got = _run_on_threads(plan, x, threads)
    with torch.inference_mode():
        torch.testing.assert_close(got, model(x), atol=1e-5, rtol=1e-5)


def test_banded_depthwise_with_dilation() -> None:
    class Dilated(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.expand = nn.Conv2d(4, 16, 1)
            self.depthwise = nn.Conv2d(16, 16, 3, padding=2, dilation=2, groups=16)
            self.project = nn.Conv2d(16, 4, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.project(torch.relu(self.depthwise(torch.relu(self.expand(x)))))

    torch.manual_seed(1)
    model = Dilated().eval()
    for band_bytes in (1, 16 * 4 * 20 * 3):
        plan = compile(model, device="cpu", head=False)
        (banded,) = [m for m in plan.graph_module.modules() if isinstance(m, BandedInvertedResidual)]
        banded.band_bytes, banded.min_rows = band_bytes, 1
        x = torch.randn(1, 4, 23, 20)
        with torch.inference_mode():
            torch.testing.assert_close(plan.run(x, output="logits"), model(x), atol=1e-5, rtol=1e-5)



@pytest.mark.parametrize("kernel, dilation", [(3, 1), (5, 2)])
@pytest.mark.parametrize("rows", [1, 2, 3, 7])
@pytest.mark.parametrize("threads", [1, 2])
def test_a_residual_block_whose_input_dies_writes_into_it(kernel: int, dilation: int, rows: int, threads: int) -> None:
    """Bands shorter and longer than the window's reach across a boundary, in order and in parallel: each
    band still reads the input as it was, and the sum lands in the input's own memory."""
    class Residual(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            pad = dilation * (kernel - 1) // 2
            self.stem = nn.Conv2d(3, 6, 3, padding=1)
            self.expand = nn.Conv2d(6, 18, 1)
            self.depthwise = nn.Conv2d(18, 18, kernel, padding=pad, dilation=dilation, groups=18)
            self.project = nn.Conv2d(18, 6, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.stem(x)  # the block's input: made by the plan, dead after the block
            return y + self.project(torch.relu(self.depthwise(torch.relu(self.expand(y)))))

    torch.manual_seed(kernel + rows)
    model = Residual().eval()
    plan = compile(model, device="cpu", head=False)
    block = next(m for m in plan.graph_module.modules() if isinstance(m, BandedInvertedResidual))
    block.band_bytes, block.min_rows = 1, rows
    x = torch.randn(1, 3, 23, 11)
    got = _run_on_threads(plan, x, threads)
    (step,) = [s for s in plan.last_stats.steps if s.name.endswith("_banded")]
    assert step.live_bytes == 6 * 23 * 11 * 4  # the sum, in the stem's memory
    assert step.peak_bytes - block.transient_bytes == step.live_bytes  # while it ran: no second copy beside it
    with torch.inference_mode():
        torch.testing.assert_close(got, model(x), atol=1e-5, rtol=1e-5)
        y = torch.randn(1, 6, 23, 11).contiguous(memory_format=torch.channels_last)
        expected = block(y)
        assert block.forward_in_place(y) is y
        torch.testing.assert_close(y, expected, atol=1e-5, rtol=1e-5)



class _SqueezeExcitationBlock(nn.Module):
    """MobileNetV3's block: expand -> depthwise -> gate from the depthwise map's mean -> map * gate -> project."""

    def __init__(self, kernel: int, dilation: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 6, 3, padding=1)
        self.expand = nn.Conv2d(6, 24, 1)
        self.depthwise = nn.Conv2d(24, 24, kernel, padding=dilation * (kernel - 1) // 2, dilation=dilation, groups=24)
        self.squeeze = nn.Conv2d(24, 8, 1)
        self.excite = nn.Conv2d(8, 24, 1)
        self.project = nn.Conv2d(24, 6, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.hardswish(self.depthwise(torch.relu(self.expand(self.stem(x)))))
        gate = torch.nn.functional.hardsigmoid(self.excite(torch.relu(self.squeeze(y.mean((2, 3), keepdim=True)))))
        return self.project(y * gate)


@pytest.mark.parametrize("kernel, dilation", [(3, 1), (5, 2)])
@pytest.mark.parametrize("rows", [1, 3, 8])
def test_a_squeeze_excitation_block_never_holds_two_expanded_maps(kernel: int, dilation: int, rows: int) -> None:
    """The depthwise writes into the expanded map it reads (two bands of output held, each written once the
    next band has read its last rows) and the gate multiplies the map in place."""
    torch.manual_seed(kernel * rows)
    model = _SqueezeExcitationBlock(kernel, dilation).eval()
    plan = compile(model, device="cpu", head=False)
    block = next(m for m in plan.graph_module.modules() if isinstance(m, BandedInvertedResidual))
    assert block.expand is None and block.project is None  # the depthwise alone: its map feeds the pool too
    block.band_bytes, block.min_rows = 1, rows
    x = torch.randn(1, 3, 61, 13)
    with torch.inference_mode():
        torch.testing.assert_close(plan.run(x, output="logits"), model(x), atol=1e-5, rtol=1e-5)
    map_bytes = 24 * 61 * 13 * 4
    steps = {s.name: s for s in plan.last_stats.steps}
    depthwise = next(s for name, s in steps.items() if name.endswith("_banded"))
    assert depthwise.peak_bytes - block.transient_bytes < 2 * map_bytes  # the map once, not input and output
    assert block.transient_bytes < map_bytes
    (gated,) = [s for name, s in steps.items() if name.startswith("mul")]
    assert gated.peak_bytes < 2 * map_bytes  # map * gate written into the map


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
@pytest.mark.parametrize("crop", [(31, 30), (32, 32)])
def test_labels_head_equals_eager(mode: str, crop: tuple[int, int]) -> None:
    from leanseg.core.model import padding

    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(6, 5, 3, padding=1)
            self.head = nn.Conv2d(6, 5, 1)

        def forward(self, image: torch.Tensor) -> torch.Tensor:
            y = torch.nn.functional.interpolate(image[:, :, ::2, ::2], scale_factor=2.0, mode=mode)
            return padding.crop_like(self.head(y), image)

    torch.manual_seed(2)
    model = Head().eval()
    plan = compile(model, device="cpu")
    (head,) = [m for m in plan.graph_module.modules() if isinstance(m, LabelsHead)]
    head.band_bytes = 1  # one row per band
    x = torch.randn(1, 6, *crop)
    with torch.inference_mode():
        expected = model(x)
    logits = plan.run(x, output="logits")
    torch.testing.assert_close(logits, expected, atol=1e-5, rtol=1e-5)
    labels = plan.run(x, output="labels")
    assert labels.dtype == torch.uint8 and labels.shape == (1, *crop)
    assert torch.equal(labels.long(), expected.argmax(1))


@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bilinear-align-corners"])
def test_conv_over_a_virtual_concatenation(mode: str) -> None:
    """nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True), hand-written U-Nets' usual
    upsampling, is built band by band too."""
    align = {"align_corners": True} if mode.endswith("align-corners") else {}

    class UpCat(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(10, 6, 3, padding=1)

        def forward(self, low: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
            up = torch.nn.functional.interpolate(low, scale_factor=2.0, mode=mode.split("-")[0], **align)
            return torch.relu(self.conv(torch.cat([up, skip], dim=1)))

    torch.manual_seed(3)
    model = UpCat().eval()
    plan = compile(model, device="cpu", head=False)
    assert "1 concatenations (and their upsampling) made virtual" in plan.describe()
    assert not any(n.target in (torch.cat, torch.nn.functional.interpolate) for n in plan.graph_module.graph.nodes)
    (banded,) = [m for m in plan.graph_module.modules() if isinstance(m, BandedInvertedResidual)]
    banded.band_bytes, banded.min_rows = 1, 1
    low, skip = torch.randn(1, 4, 9, 7), torch.randn(1, 6, 18, 14)
    with torch.inference_mode():
        expected = model(low, skip)
    # Plan.run takes one image; call the rewritten graph directly for two inputs.
    with torch.inference_mode():
        torch.testing.assert_close(plan.graph_module(low.contiguous(memory_format=torch.channels_last),
                                                     skip.contiguous(memory_format=torch.channels_last)),
                                   expected, atol=1e-5, rtol=1e-5)


def test_bands_keep_at_least_min_rows_unless_a_tight_budget_needs_fewer() -> None:
    block = InvertedResidual(8, 8, 1, 6)
    plan = compile(_Block(block).eval(), device="cpu", head=False)
    (banded,) = [m for m in plan.graph_module.modules() if isinstance(m, BandedInvertedResidual)]
    wide = 48 * 8192 * 4  # bytes of one expanded row 8192 wide: 2 MB holds 5 rows, re-expanding 2 in each
    assert banded.band_bytes // wide < MIN_BAND_ROWS == banded.rows_per_band(8192, 100, 4)
    assert banded.rows_per_band(8192, 5, 4) == 5  # never more rows than the image has
    tight = compile(_Block(block).eval(), device="cpu", head=False, memory_budget=2**20)
    (small,) = [m for m in tight.graph_module.modules() if isinstance(m, BandedInvertedResidual)]
    assert small.rows_per_band(8192, 100, 4) == 1  # 64 KB bands: a tight budget wins over the speed


class SeparableConvs(nn.Module):
    """DeepLabV3+'s separable convs: depthwise (dilated) + BN, then pointwise + BN + ReLU; one of them in a
    residual add, so the block's projection carries an activation."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU())
        self.dw1 = nn.Sequential(nn.Conv2d(16, 16, 3, 1, 2, dilation=2, groups=16, bias=False), nn.BatchNorm2d(16))
        self.pw1 = nn.Sequential(nn.Conv2d(16, 24, 1, bias=False), nn.BatchNorm2d(24), nn.ReLU())
        self.dw2 = nn.Sequential(nn.Conv2d(24, 24, 3, 1, 1, groups=24, bias=False), nn.BatchNorm2d(24))
        self.pw2 = nn.Sequential(nn.Conv2d(24, 24, 1, bias=False), nn.BatchNorm2d(24), nn.ReLU6())
        self.head = nn.Conv2d(24, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.pw1(self.dw1(self.stem(x)))
        return self.head(y + self.pw2(self.dw2(y)))


@pytest.mark.parametrize("threads", [1, 2])
def test_separable_convs_whose_pointwise_is_activated_run_in_bands(threads: int) -> None:
    """The projection's ReLU is applied to each band before it is written (or added to the residual)."""
    torch.manual_seed(3)
    model = randomise_batchnorm(SeparableConvs()).eval()
    plan = compile(model, device="cpu")
    banded = [m for m in plan.graph_module.modules() if isinstance(m, BandedInvertedResidual)]
    assert any(m.project is not None and m.project.activation is not None for m in banded), plan.notes
    for module in banded:
        module.band_bytes, module.min_rows = 1, 1  # one row per band: many bands at this size
    x = torch.randn(1, 3, 45, 38)
    with torch.inference_mode():
        expected = model(x)
    assert (_run_on_threads(plan, x, threads) - expected).abs().max().item() <= 1e-5
    assert plan.last_stats is not None
    measured, previous = plan.last_stats.peak_bytes, torch.get_num_threads()
    torch.set_num_threads(threads)  # the estimate counts the band workers these threads give
    try:
        assert plan.estimate_peak(tuple(x.shape), output="logits") == measured
    finally:
        torch.set_num_threads(previous)


def test_a_concatenation_of_concatenations_is_built_band_by_band() -> None:
    """UNet++'s decoder concatenates an upsampled map with a concatenation of dense skips: neither
    concatenation is built whole."""

    class DenseUpCat(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(12, 6, 3, padding=1)

        def forward(self, low: torch.Tensor, skip_a: torch.Tensor, skip_b: torch.Tensor) -> torch.Tensor:
            up = torch.nn.functional.interpolate(low, scale_factor=2.0, mode="nearest")
            return self.conv(torch.cat([up, torch.cat([skip_a, skip_b], 1)], dim=1))

    torch.manual_seed(4)
    model = DenseUpCat().eval()
    plan = compile(model, device="cpu", head=False)
    assert not any(n.target is torch.cat for n in plan.graph_module.graph.nodes)
    low, skip_a, skip_b = torch.randn(1, 4, 9, 7), torch.randn(1, 5, 18, 14), torch.randn(1, 3, 18, 14)
    with torch.inference_mode():
        expected = model(low, skip_a, skip_b)
        got = plan.graph_module(*(t.contiguous(memory_format=torch.channels_last) for t in (low, skip_a, skip_b)))
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
