"""Each graph pass alone: the rewritten graph still computes what eager PyTorch computes."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import fx, nn

from leanseg.core.engine.capture import capture
from leanseg.core.engine.fold import fold_batchnorm, remove_no_ops
from leanseg.core.engine.fuse import ConvAct, fuse_conv_activation
from leanseg.core.engine.layout import to_channels_last
from leanseg.core.engine.liveness import in_place_operands, values_dying_after

from .nets import DilatedResNet, randomise_batchnorm


def _model() -> nn.Module:
    torch.manual_seed(0)
    return randomise_batchnorm(DilatedResNet())


def _check_same(model: nn.Module, graph_module: fx.GraphModule) -> None:
    x = torch.randn(1, 3, 18, 22)
    with torch.inference_mode():
        torch.testing.assert_close(graph_module(x), model(x), atol=1e-5, rtol=1e-5)


def _count(graph_module: fx.GraphModule, kind: type) -> int:
    return sum(isinstance(graph_module.get_submodule(n.target), kind)
               for n in graph_module.graph.nodes if n.op == "call_module")


def test_capture_leaves_the_model_untouched() -> None:
    model = _model()
    graph_module = capture(model)
    fold_batchnorm(graph_module)
    assert _count(graph_module, nn.BatchNorm2d) == 0
    assert sum(isinstance(m, nn.BatchNorm2d) for m in model.modules()) == 7


def test_fold_batchnorm_alone() -> None:
    model = _model()
    graph_module = capture(model)
    assert fold_batchnorm(graph_module) == 7
    assert _count(graph_module, nn.BatchNorm2d) == 0
    _check_same(model, graph_module)


def test_remove_no_ops_alone() -> None:
    model = _model()
    graph_module = capture(model)
    assert remove_no_ops(graph_module) == 3  # one Dropout2d per block
    assert _count(graph_module, nn.Dropout2d) == 0
    _check_same(model, graph_module)


def test_fuse_conv_activation_alone() -> None:
    model = _model()
    graph_module = capture(model)
    fold_batchnorm(graph_module)
    assert fuse_conv_activation(graph_module) == 4  # stem ReLU + each block's first F.relu
    assert _count(graph_module, nn.Conv2d) == 0 and _count(graph_module, ConvAct) == 8
    _check_same(model, graph_module)


def test_fuse_skips_a_shared_conv() -> None:
    class Shared(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 3, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.relu(self.conv(x)) + self.conv(x)

    model = Shared().eval()
    graph_module = capture(model)
    assert fuse_conv_activation(graph_module) == 0
    _check_same(model, graph_module)


def test_channels_last_alone() -> None:
    model = _model()
    graph_module = capture(model)
    assert to_channels_last(graph_module) > 0
    conv = graph_module.get_submodule("stem.0")
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    _check_same(model, graph_module)


def test_liveness_frees_each_value_after_its_last_reader() -> None:
    def net(x: torch.Tensor) -> torch.Tensor:
        a = torch.relu(x)
        b = a * 2
        c = a + b  # a and b die here
        return c + x  # x and c die here

    graph = fx.symbolic_trace(net).graph
    nodes = {n.name: n for n in graph.nodes}
    dying = values_dying_after(graph)
    assert {n.name for n in dying[nodes["add"]]} == {"relu", "mul"}
    assert {n.name for n in dying[nodes["add_1"]]} == {"x", "add"}
    assert dying[nodes["relu"]] == [] and dying[nodes["mul"]] == []
    assert in_place_operands(nodes["add"], dying[nodes["add"]]) == (0, 1)
    assert in_place_operands(nodes["add_1"], dying[nodes["add_1"]]) == (0, 1)
