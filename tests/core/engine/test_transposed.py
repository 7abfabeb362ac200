"""Transposed convolutions: any band of output rows from the input rows under it, and the classic U-Net's
up-conv read band by band (never whole), its zero pads gone and its BatchNorm folded."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from leanseg.core.engine import compile
from leanseg.core.engine.transposed import TransposedConvAct
from leanseg.core.model.sources import load_model

from . import export_nets as nets

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# (kernel, stride, padding, output_padding, dilation): a U-Net's 2x2 up-conv, LinkNet's 4x4 and 3x3 ones,
# a stride-1 one, a dilated one, and a kernel smaller than its stride (rows no input reaches)
GEOMETRIES = [(2, 2, 0, 0, 1), (4, 2, 1, 0, 1), (3, 2, 1, 1, 1), (3, 1, 1, 0, 1), (3, 2, 2, 1, 2), (1, 2, 0, 1, 1)]


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=[str(g) for g in GEOMETRIES])
@pytest.mark.parametrize("activation", [None, "relu"])
def test_every_band_of_rows_equals_the_same_rows_of_the_whole_output(geometry: tuple[int, ...],
                                                                      activation: str | None) -> None:
    kernel, stride, padding, output_padding, dilation = geometry
    torch.manual_seed(0)
    conv = nn.ConvTranspose2d(6, 5, kernel, stride, padding, output_padding, dilation=dilation).eval()
    step = TransposedConvAct(conv, activation)
    x = torch.randn(1, 6, 9, 7).contiguous(memory_format=torch.channels_last)
    with torch.inference_mode():
        whole = step(x)
        assert whole.shape[2:] == step.output_size(9, 7)
        height = whole.shape[2]
        for rows in (1, 2, 3, 5, height):
            for first in range(0, height, rows):
                last = min(height, first + rows)
                band = step.rows(x, first, last)
                assert torch.allclose(band, whole[:, :, first:last], atol=1e-5), (geometry, first, last)
    if activation is not None:
        assert (whole == 0).any()  # the activation ran: a comparison that could fail


@pytest.fixture(scope="module")
def classic_unet(tmp_path_factory: pytest.TempPathFactory) -> tuple[nn.Module, dict[str, Path]]:
    """The model, exported by torch.export (`.pt2`: the pads' sizes proven equal) and by torch.onnx's
    TorchScript exporter (`.onnx`: the pads computed from Shape ops, reordered through a 2-D reshape)."""
    model = nets.made("classic_unet")
    folder = tmp_path_factory.mktemp("classic_unet")
    return model, {"pt2": nets.export_pt2(model, folder / "classic_unet.pt2"),
                   "onnx": nets.export_onnx(model, folder / "classic_unet.onnx")}


@pytest.mark.parametrize("kind", ["pt2", "onnx"])
def test_the_up_conv_is_read_band_by_band_and_never_exists_whole(
        kind: str, classic_unet: tuple[nn.Module, dict[str, Path]]) -> None:
    model, paths = classic_unet
    plan = compile(load_model(paths[kind]).model, device="cpu")
    graph_module = plan.graph_module
    assert graph_module is not None and not plan.fallbacks, plan.fallbacks
    modules = [graph_module.get_submodule(n.target) for n in graph_module.graph.nodes if n.op == "call_module"]
    assert not any(isinstance(m, (TransposedConvAct, nn.ConvTranspose2d, nn.BatchNorm2d)) for m in modules)
    assert not any(n.target is F.pad for n in graph_module.graph.nodes)  # pads of zero rows: gone
    producers = [p for m in graph_module.modules() for p in getattr(m, "producers", [])]
    assert sum(isinstance(p, TransposedConvAct) for p in producers) == 2
    assert any(isinstance(p, TransposedConvAct) and p.activation == "relu" for p in producers)  # BN folded, ReLU fused

    x = torch.randn(1, 3, 96, 128, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        expected = model(x)
    logits = plan.run(x, output="logits")
    assert (logits - expected).abs().max().item() <= 1e-4
    assert plan.last_stats is not None
    assert plan.estimate_peak(tuple(x.shape), "logits") == plan.last_stats.peak_bytes


def test_a_pad_that_is_not_zero_at_every_size_stays(tmp_path: Path) -> None:
    """An up-conv padded by a column at some sizes (zero at one sample size, one at the other): kept."""

    class PaddedUp(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.down, self.up = nn.Conv2d(3, 4, 3, stride=2, padding=1), nn.ConvTranspose2d(4, 4, 2, stride=2)
            self.head = nn.Conv2d(7, 2, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = F.pad(self.up(self.down(x)), [x.size(3) % 64 // 32, 0, 0, 0])[..., :, : x.size(3)]
            return self.head(torch.cat([x, y], 1))

    model = PaddedUp().eval()
    plan = compile(load_model(nets.export_pt2(model, tmp_path / "padded.pt2")).model, device="cpu")
    assert plan.graph_module is not None
    assert any(n.target is F.pad for n in plan.graph_module.graph.nodes)
    x = torch.randn(1, 3, 64, 96)
    with torch.inference_mode():
        assert (plan.run(x, output="logits") - model(x)).abs().max().item() <= 1e-4
