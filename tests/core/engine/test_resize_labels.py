"""Labels of a resized band (resize_labels): equal to the argmax of the whole resized map, pixel for pixel,
for smooth, noisy and tied logits, at the image's edges and inside it; and a band whose class does not change
is never resized. A compiled tail ending in the resize gives eager's labels."""
from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from leanseg.core.engine import compile, resize_labels
from leanseg.core.engine.resize_labels import resized_labels
from leanseg.core.engine.row_resize import Resize

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def logits_of(kind: str, classes: int, height: int, width: int) -> Tensor:
    generator = torch.Generator().manual_seed(classes * 100 + height)
    if kind == "smooth":  # regions of one class, as a trained net gives
        coarse = torch.randn(1, classes, 4, 5, generator=generator)
        z = F.interpolate(coarse, size=(height, width), mode="bilinear") * 5
    elif kind == "noise":  # a new class at almost every pixel
        z = torch.randn(1, classes, height, width, generator=generator)
    else:  # integers: exact ties between classes everywhere
        z = torch.randn(1, classes, height, width, generator=generator).round()
    return z.contiguous(memory_format=torch.channels_last)


def band_labels(resize: Resize, z: Tensor, out_h: int, out_w: int, rows: int) -> Tensor:
    """The labels of every band of `rows` output rows, each from the source rows it reads, stacked."""
    in_h = z.shape[2]
    bands = []
    for top in range(0, out_h, rows):
        out_rows = range(top, min(out_h, top + rows))
        first, second, _ = resize.source_coordinates(out_rows, in_h, out_h)
        lo, hi = min(first), max(second) + 1
        bands.append(resized_labels(resize, z[:, :, lo:hi], lo, out_rows, in_h, out_h, out_w, torch.uint8)[0])
    return torch.cat(bands, dim=1)


@pytest.mark.parametrize("kind", ["smooth", "noise", "ties"])
@pytest.mark.parametrize("mode, scale", [("bilinear", 2), ("bilinear", 4), ("bilinear", 8), ("nearest", 4),
                                         ("nearest", 3)])
def test_labels_equal_the_argmax_of_the_whole_resized_map(mode: str, scale: int, kind: str) -> None:
    resize = Resize(mode, False, (float(scale), float(scale)))
    kwargs = {"align_corners": False} if mode == "bilinear" else {}
    for classes, (height, width), rows in itertools.product((2, 12), ((16, 20), (33, 17)), (1, 13)):
        z = logits_of(kind, classes, height, width)
        expected = F.interpolate(z, scale_factor=float(scale), mode=mode, **kwargs).argmax(1)
        labels = band_labels(resize, z, height * scale, width * scale, rows)
        assert torch.equal(labels.long(), expected), (classes, height, width, rows)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("scale", [2, 8])
def test_reduced_precision_logits_are_resized_in_float32(scale: int, dtype: torch.dtype) -> None:
    """A bf16 resize rounds every output to 8 bits and reorders close classes; the labels are the float32
    resize's of the same logits."""
    resize = Resize("bilinear", False, (float(scale), float(scale)))
    for kind in ("smooth", "noise", "ties"):
        z = logits_of(kind, 12, 33, 17).to(dtype)
        expected = F.interpolate(z.float(), scale_factor=float(scale), mode="bilinear").argmax(1)
        labels = band_labels(resize, z, 33 * scale, 17 * scale, 13)
        assert torch.equal(labels.long(), expected), kind


@pytest.mark.parametrize("align_corners", [False, True])
def test_other_scales_give_the_labels_of_the_band_rows_the_chain_computes(align_corners: bool) -> None:
    """Scale 3, or align_corners: where the class can change, the band's rows are resized as before."""
    resize = Resize("bilinear", align_corners, (3.0, 3.0))
    for kind in ("smooth", "noise", "ties"):
        z = logits_of(kind, 12, 33, 17)
        out_h, out_w = 99, 51
        for top in range(0, out_h, 13):
            out_rows = range(top, min(out_h, top + 13))
            first, second, _ = resize.source_coordinates(out_rows, 33, out_h)
            lo, hi = min(first), max(second) + 1
            band = z[:, :, lo:hi]
            expected = resize.rows(band, lo, out_rows, 33, out_h, out_w).argmax(1)
            labels = resized_labels(resize, band, lo, out_rows, 33, out_h, out_w, torch.uint8)[0]
            assert torch.equal(labels.long(), expected), (kind, top)


def test_a_band_of_one_clear_class_is_never_resized(monkeypatch: pytest.MonkeyPatch) -> None:
    resizes = []
    real = F.interpolate

    def counting(*args: object, **kwargs: object) -> Tensor:
        resizes.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(resize_labels.F, "interpolate", counting)
    z = torch.zeros(1, 4, 16, 16).contiguous(memory_format=torch.channels_last)
    z[:, 2] = 3.0  # class 2 leads everywhere by 3
    resize = Resize("bilinear", False, (8.0, 8.0))
    assert torch.equal(band_labels(resize, z, 128, 128, 32), torch.full((1, 128, 128), 2, dtype=torch.uint8))
    assert resizes == []
    z[:, 1, 5, 7] = 4.0  # one source pixel of class 1: only the tiles around it are resized
    labels = band_labels(resize, z, 128, 128, 32)
    assert 0 < len(resizes) <= 2
    expected = real(z, scale_factor=8.0, mode="bilinear", align_corners=False).argmax(1)
    assert torch.equal(labels.long(), expected) and (labels == 1).any()


class UpsampledLogits(nn.Module):
    """conv -> ReLU -> 1x1 to classes at 1/8 -> bilinear x8: LR-ASPP's and DeepLab's ending."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=8, padding=1)
        self.head = nn.Conv2d(16, 6, 1)

    def forward(self, x: Tensor) -> Tensor:
        y = self.head(F.relu(self.stem(x)))
        return F.interpolate(y, scale_factor=8.0, mode="bilinear", align_corners=False)


def test_a_tail_ending_in_the_resize_gives_eager_labels() -> None:
    torch.manual_seed(0)
    model = UpsampledLogits().eval()
    plan = compile(model, device="cpu")
    assert plan.fallbacks == []
    for height, width in ((64, 96), (128, 72)):
        x = torch.rand(1, 3, height, width, generator=torch.Generator().manual_seed(height))
        with torch.inference_mode():
            expected = model(x).argmax(1)
        labels = plan.run(x)
        assert torch.equal(labels.long(), expected) and len(labels.unique()) > 1
