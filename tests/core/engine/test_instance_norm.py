"""nnU-Net's conv -> InstanceNorm -> LeakyReLU, from a .pt2 (aten.instance_norm) and an .onnx
(InstanceNormalization): no node runs eagerly, the norm becomes a GroupNorm step with a group per channel that
normalises in place and takes the LeakyReLU, the convs before it too, and the plan equals eager PyTorch."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from leanseg.core.engine import compile
from leanseg.core.engine.fuse import ConvAct
from leanseg.core.engine.groupnorm import GroupNormAct
from leanseg.core.model.sources import load_model

from . import export_nets as nets

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("fmt", ["pt2", "onnx"])
def test_instance_norm_and_leaky_relu_are_engine_steps(fmt: str, tmp_path: Path) -> None:
    model = nets.made("instance_norm_unet")
    path = tmp_path / f"nnunet.{fmt}"
    nets.export_pt2(model, path) if fmt == "pt2" else nets.export_onnx(model, path)
    loaded = load_model(path)
    plan = compile(loaded.model, device="cpu")
    assert plan.fallbacks == []
    assert plan.graph_module is not None
    norms = [m for m in plan.graph_module.modules() if isinstance(m, GroupNormAct)]
    assert len(norms) == 6 and all(m.norm.num_groups == m.norm.num_channels for m in norms)
    assert all(m.activation == "leaky_relu" for m in norms)
    for height, width in ((64, 96), (70, 90)):
        x = torch.randn(1, 3, height, width, generator=torch.Generator().manual_seed(height))
        with torch.inference_mode():
            expected = loaded.model(x)
        logits = plan.run(x, output="logits")
        assert (logits - expected).abs().max().item() <= 1e-4
        assert torch.equal(plan.run(x)[0].long(), expected[0].argmax(0))


def test_a_leaky_relu_after_a_conv_is_fused_into_it() -> None:
    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.LeakyReLU(0.01),
                               torch.nn.Conv2d(8, 4, 3, padding=1), torch.nn.LeakyReLU(0.2)).eval()
    plan = compile(conv, device="cpu")
    assert plan.graph_module is not None
    kinds = [m.activation for m in plan.graph_module.modules() if isinstance(m, ConvAct)]
    assert kinds == ["leaky_relu", None]  # slope 0.2 is not the fused one: it stays its own step
    x = torch.randn(1, 3, 40, 50)
    with torch.inference_mode():
        expected = conv(x)
    assert (plan.run(x, output="logits") - expected).abs().max().item() <= 1e-5
