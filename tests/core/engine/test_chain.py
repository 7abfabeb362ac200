"""The banded tail chain alone: a graph that ends in convs, resizes (nearest, bilinear with and without
align_corners, by scale or to a size), per-pixel ops and a crop runs band by band, with bands of a few
rows (edges included), and equals the same module run by eager PyTorch."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from leanseg.core.engine import compile
from leanseg.core.engine.chain import BandedChain
from leanseg.core.engine.frontends.ir import dim_size
from leanseg.core.engine.fuse import ConvAct
from leanseg.core.engine.plan import Plan
from leanseg.core.engine.row_resize import Resize
from leanseg.core.model.padding import crop_like, pad_to_multiple

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Encoder(nn.Module):
    """Stride-2 stem and a residual block: its output has two readers, so the tail chain starts after it."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, 2, 1)
        self.block = nn.Conv2d(8, 8, 3, 1, 1)

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.stem(x))
        return y + self.block(y)


class ScaledTail(nn.Module):
    """... -> conv3x3 -> ReLU -> conv3x3 stride 2 -> resize x4 (by scale) -> Hardswish -> crop to the input."""

    def __init__(self, mode: str, align_corners: bool | None) -> None:
        super().__init__()
        self.encoder = Encoder()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)
        self.down = nn.Conv2d(8, 5, 3, stride=2, padding=1)
        self.act = nn.Hardswish()
        self.mode, self.align_corners = mode, align_corners

    def forward(self, x: Tensor) -> Tensor:
        y = self.encoder(pad_to_multiple(x, 4))
        y = self.down(F.relu(self.conv(y)))
        y = F.interpolate(y, scale_factor=4.0, mode=self.mode, align_corners=self.align_corners)
        return crop_like(self.act(y), x)


class SizedTail(nn.Module):
    """... -> conv3x3 -> ReLU -> 1x1 -> resize to the input's size (a ratio that is no integer)."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.encoder = Encoder()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)
        self.head = nn.Conv2d(8, 5, 1)
        self.mode = mode

    def forward(self, x: Tensor) -> Tensor:
        y = self.head(F.relu(self.conv(self.encoder(x))))
        align = False if self.mode == "bilinear" else None
        return F.interpolate(y, size=(dim_size(x, 2), dim_size(x, 3)), mode=self.mode, align_corners=align)


TAILS = {
    "bilinear_x4_align_corners": (lambda: ScaledTail("bilinear", True), Resize("bilinear", True, (4.0, 4.0))),
    "bilinear_x4": (lambda: ScaledTail("bilinear", False), Resize("bilinear", False, (4.0, 4.0))),
    "nearest_x4": (lambda: ScaledTail("nearest", None), Resize("nearest", False, (4.0, 4.0))),
    "nearest_to_size": (lambda: SizedTail("nearest"), Resize("nearest", False, None)),
    "bilinear_to_size": (lambda: SizedTail("bilinear"), Resize("bilinear", False, None)),
}


def made(name: str) -> nn.Module:
    torch.manual_seed(0)
    model = TAILS[name][0]().eval()
    for last in ("down", "head"):  # no class wins everywhere by its bias alone
        conv = getattr(model, last, None)
        if isinstance(conv, nn.Conv2d) and conv.bias is not None:
            conv.bias.data.zero_()
    return model


def chain_of(plan: Plan) -> BandedChain:
    assert plan.graph_module is not None
    chains = [m for m in plan.graph_module.modules() if isinstance(m, BandedChain)]
    assert len(chains) == 1
    return chains[0]


@pytest.mark.parametrize("rows", [1, 5])
@pytest.mark.parametrize("name", list(TAILS))
def test_banded_tail_equals_eager(name: str, rows: int) -> None:
    model = made(name)
    plan = compile(model, device="cpu")
    assert plan.fallbacks == [], plan.fallbacks
    assert any(note.startswith("labels-out tail: ") and "no labels-out" not in note for note in plan.notes), plan.notes
    chain = chain_of(plan)
    kinds = [type(stage) for stage in chain.stages]
    resize = next(stage for stage in chain.stages if isinstance(stage, Resize))
    expected_resize = TAILS[name][1]
    assert (resize.mode, resize.align_corners, resize.scale) == \
        (expected_resize.mode, expected_resize.align_corners, expected_resize.scale)
    assert kinds.count(ConvAct) >= 2 and chain.crop == (name.endswith("x4") or "align" in name)
    chain.band_bytes, chain.min_rows = 1, rows  # bands of `rows` output rows: many bands, both edges
    for height, width in ((37, 45), (64, 40)):
        x = torch.randn(1, 3, height, width, generator=torch.Generator().manual_seed(height))
        with torch.inference_mode():
            expected = model(x)
        logits = plan.run(x, output="logits")
        assert logits.shape == expected.shape == (1, 5, height, width)
        assert (logits - expected).abs().max().item() <= 1e-5, (name, rows, height, width)
        labels = plan.run(x, output="labels")
        assert labels.shape == (1, height, width) and labels.dtype == torch.uint8
        assert torch.equal(labels[0].long(), logits[0].argmax(0))  # the same bands, argmax per band
        top2 = expected[0].topk(2, dim=0).values
        clear = (top2[0] - top2[1]) > 1e-5
        assert torch.equal(labels[0].long()[clear], expected[0].argmax(0)[clear])
        assert len(labels.unique()) > 1


def test_chain_starts_after_a_value_with_two_readers() -> None:
    plan = compile(made("bilinear_x4"), device="cpu")
    assert "labels-out tail: 4 stages (convs, resizes, per-pixel ops) in row bands, argmax per band" in plan.notes
    assert [type(s) for s in chain_of(plan).stages] == [ConvAct, ConvAct, Resize, nn.Hardswish]


def test_without_the_head_passes_the_plan_makes_full_logits() -> None:
    model = made("bilinear_to_size")
    plan = compile(model, device="cpu", head=False)
    assert plan.graph_module is not None
    assert not any(isinstance(m, BandedChain) for m in plan.graph_module.modules())
    x = torch.randn(1, 3, 37, 45)
    with torch.inference_mode():
        assert (plan.run(x, output="logits") - model(x)).abs().max().item() <= 1e-5


@pytest.mark.parametrize("name", ["bilinear_x4_align_corners", "nearest_to_size"])
def test_estimated_peak_is_close_to_the_measured_one(name: str) -> None:
    plan = compile(made(name), device="cpu")
    x = torch.randn(1, 3, 300, 260)
    plan.run(x)
    assert plan.last_stats is not None
    measured, estimate = plan.last_stats.peak_bytes, plan.estimate_peak(tuple(x.shape))
    assert 0.7 * measured <= estimate <= 1.5 * measured, (estimate, measured)


def test_banded_tail_on_two_threads_equals_one_thread() -> None:
    """On the CPU with several threads the bands run on parallel workers: the same result."""
    model = made("bilinear_x4_align_corners")
    plan = compile(model, device="cpu")
    chain = chain_of(plan)
    chain.band_bytes, chain.min_rows = 1, 3
    x = torch.randn(1, 3, 61, 50)
    single = plan.run(x, output="logits")
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        double = plan.run(x, output="logits")
    finally:
        torch.set_num_threads(threads)
    assert (single - double).abs().max().item() <= 1e-6


@pytest.mark.parametrize(("mode", "align_corners"), [("nearest", False), ("bilinear", False), ("bilinear", True)])
def test_resize_stage_rows_equal_pytorch_at_awkward_sizes(mode: str, align_corners: bool) -> None:
    """The rows a band reads and their weights follow PyTorch's own index arithmetic (nearest: float32 ratio,
    same size and twice the size special-cased), by size and by a non-integer scale."""
    kwargs = {"align_corners": align_corners} if mode == "bilinear" else {}
    tolerance = 0.0 if mode == "nearest" else 5e-5  # bilinear weights: float64 here, float32 in PyTorch
    generator = torch.Generator().manual_seed(0)
    for in_h in (1, 2, 3, 19, 45):
        x = torch.randn(1, 2, in_h, 3, generator=generator).contiguous(memory_format=torch.channels_last)
        for out_h in range(1, 131):  # 45 -> 100: PyTorch reads row 8 for row 20 (float32), exact math says 9
            got = Resize(mode, align_corners, None).rows(x, 0, range(out_h), in_h, out_h, 3)
            expected = F.interpolate(x, size=(out_h, 3), mode=mode, **kwargs)
            assert (got - expected).abs().max().item() <= tolerance, (in_h, out_h)
        for scale in (1.25, 1.5, 2.5, 3.0):  # 2 rows x 1.25 -> 2 rows: the same rows, not floor(y / 1.25)
            resize = Resize(mode, align_corners, (scale, scale))
            out_h, out_w = resize.output_size(in_h, 3, None)
            expected = F.interpolate(x, scale_factor=scale, mode=mode, **kwargs)
            assert expected.shape[2:] == (out_h, out_w)
            got = resize.rows(x, 0, range(out_h), in_h, out_h, out_w)
            assert (got - expected).abs().max().item() <= tolerance, (in_h, scale)
