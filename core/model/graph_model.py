"""A network that came as a graph (`.pt2`, `.onnx`): its engine-IR GraphModule, padded and cropped.

The graph is the user's network as-is; this wrapper adds what leanseg's own models do themselves:
pad the input to the size multiple the network needs (bottom and right, zeros) and crop the logits
back, so any image size works. Normalisation stays outside, as for every model (ModelInfo mean/std).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, fx, nn

from . import padding  # called through the module so torch.fx sees the wrapped leaves


@dataclass(frozen=True)
class GraphModelConfig:
    num_classes: int  # from the graph's output, never from the card alone
    in_channels: int = 3  # from the first convolution's weights
    size_multiple: int = 32  # height and width are padded to a multiple of this
    # ... and up to this (height, width), where the net needs more than one multiple a side (0: no minimum)
    min_size: tuple[int, int] = (0, 0)
    # the largest (height, width), after padding, the graph holds for (a program exported with a Dim max; 0: none)
    max_size: tuple[int, int] = (0, 0)
    source_format: str = "pt2"  # pt2 | onnx: where the graph came from
    # the graph outputs one channel (a binary net, sigmoid or its logit): num_classes is 2, background and it
    one_channel: bool = False

    def __post_init__(self) -> None:
        if self.one_channel and self.num_classes != 2:
            raise ValueError(f"a one-channel graph segments 2 classes (background and its own), got {self.num_classes}")
        if not 1 <= self.num_classes <= 255:
            raise ValueError(f"num_classes must be in 1..255 (labels are uint8), got {self.num_classes}")
        if self.in_channels not in (1, 3):
            raise ValueError(f"in_channels must be 1 or 3, got {self.in_channels}")
        if self.size_multiple < 1:
            raise ValueError(f"size_multiple must be >= 1, got {self.size_multiple}")
        if any(side < 0 or side % self.size_multiple for side in self.min_size):
            raise ValueError(f"min_size (height, width) must be 0 or multiples of size_multiple "
                             f"({self.size_multiple}), got {self.min_size}")


class GraphModel(nn.Module):
    """(1, C, H, W) -> (1, K, H, W) logits for any H, W: pad to `size_multiple`, run the graph, crop.

    A graph with one output channel is a binary net: its logit z becomes the two logits (-z/2, z/2), whose softmax
    is (1 - sigmoid(z), sigmoid(z)): a fixed 1x1 convolution before the crop, so the engine's labels-out tail takes
    it in like any head; a probability p (a graph that does not end in a sigmoid leanseg can drop) becomes
    (1 - p, p). The argmax is the foreground where sigmoid(z) or p is above 0.5.
    """

    def __init__(self, net: fx.GraphModule, config: GraphModelConfig, *, bgr: bool = False,
                 probabilities: bool = False) -> None:
        super().__init__()
        self.net = _leaves_for_any_tracer(net)
        self.config = config  # its sizes, the same object its ModelInfo holds
        self.bgr = bgr  # the net expects BGR channel order
        self.probabilities = probabilities  # the net ends in a softmax: return log-probabilities as logits
        self.two_logits = binary_logits() if config.one_channel and not probabilities else None

    @property
    def size_multiple(self) -> int:
        return self.config.size_multiple

    @property
    def min_size(self) -> tuple[int, int]:
        return self.config.min_size

    @property
    def max_size(self) -> tuple[int, int]:
        """The largest (height, width) a pass may take, padding included (0: any): larger images go in tiles of
        at most this size (a program exported for a bounded size range refuses more)."""
        return self.config.max_size

    def forward(self, x: Tensor) -> Tensor:
        if self.bgr:
            x = x.flip(1)  # (1, 3, H, W) RGB -> BGR
        if any(self.min_size):  # (1, C, H', W'), H' and W' multiples, and at least min_size
            padded = padding.pad_to_multiple(x, self.size_multiple, self.min_size)
        else:
            padded = padding.pad_to_multiple(x, self.size_multiple)
        y = self.net(padded)  # (1, K, H', W'); K = 1 for a binary net
        if self.two_logits is not None:
            y = self.two_logits(y)  # (1, 2, H', W'): (-z/2, z/2)
        y = padding.crop_like(y, x)  # (1, K, H, W)
        if self.config.one_channel and self.probabilities:
            y = torch.cat([1 - y, y], 1)  # (1, 2, H, W)
        if self.probabilities:
            y = torch.log(y.clamp_min(1e-12))  # argmax unchanged; softmax of it gives the probabilities back
        return y


def binary_logits() -> nn.Conv2d:
    """The fixed 1x1 convolution z -> (-z/2, z/2): two logits whose softmax is (sigmoid(-z), sigmoid(z))."""
    conv = nn.Conv2d(1, 2, 1, bias=False)
    conv.weight.requires_grad_(False)
    with torch.no_grad():
        conv.weight.copy_(torch.tensor([-0.5, 0.5]).view(2, 1, 1, 1))
    return conv


def drop_final_sigmoid(net: fx.GraphModule) -> bool:
    """Make a graph that ends in a sigmoid return its input (the logit) instead; whether it did. For a binary
    net the logit gives the same labels and, through the softmax of (-z/2, z/2), the same probabilities, with
    or without a card saying "probabilities"."""
    output = next(node for node in net.graph.nodes if node.op == "output")
    last = output.args[0]
    if not isinstance(last, fx.Node) or len(last.users) != 1:
        return False
    is_sigmoid = (last.op == "call_module" and isinstance(net.get_submodule(str(last.target)), nn.Sigmoid)) or (
        last.op == "call_function" and last.target in (torch.sigmoid, torch.ops.aten.sigmoid.default))
    if not is_sigmoid or not isinstance(last.args[0], fx.Node):
        return False
    output.replace_input_with(last, last.args[0])
    net.graph.erase_node(last)
    net.graph.eliminate_dead_code()
    net.recompile()
    return True


def _leaves_for_any_tracer(net: fx.GraphModule) -> fx.GraphModule:
    """Mark the front ends' size helpers (dim_size, check_size) as wrapped, so the generated code registers them
    with torch.fx and a plain `fx.symbolic_trace` of this model (receptive field, eager peak estimate) keeps
    them as single nodes instead of tracing into them."""
    from ..engine.frontends.ir import check_size, dim_size

    marked = False
    for node in net.graph.nodes:
        if node.op == "call_function" and node.target in (dim_size, check_size):
            node.meta["is_wrapped"] = marked = True
    if marked:
        net.recompile()
    return net

