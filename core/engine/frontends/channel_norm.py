"""LayerNorm over channels: timm's LayerNorm2d (ConvNeXt, and the 2-D heads written like it) reaches the engine
as `permute(x, [0, 2, 3, 1]) -> layer_norm(., [C]) -> permute(., [0, 3, 1, 2])`. It normalises each pixel
over its channels alone, so it is a per-pixel step: this pass makes the three nodes one ChannelLayerNorm
module, which the engine's passes treat as they treat an activation (banded, freed when its input dies)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, fx, nn

_LAYER_NORMS = (torch.ops.aten.layer_norm.default, F.layer_norm)


class ChannelLayerNorm(nn.Module):
    """(N, C, H, W) normalised over C at every pixel, with a per-channel weight and bias (timm's LayerNorm2d)."""

    def __init__(self, num_channels: int, eps: float = 1e-6, affine: bool = True) -> None:
        super().__init__()
        self.num_channels, self.eps, self.affine = num_channels, eps, affine
        self.weight = nn.Parameter(torch.ones(num_channels)) if affine else None
        self.bias = nn.Parameter(torch.zeros(num_channels)) if affine else None

    def forward(self, x: Tensor) -> Tensor:
        # channels_last input: the permute is a view whose last axis is contiguous, as layer_norm wants
        y = F.layer_norm(x.permute(0, 2, 3, 1), (self.num_channels,), self.weight, self.bias, self.eps)
        return y.permute(0, 3, 1, 2)

    def extra_repr(self) -> str:
        return f"{self.num_channels}, eps={self.eps}"


def _permute_of(node: object, dims: list[int]) -> fx.Node | None:
    """The tensor `node` permutes by `dims`, when it is such a permute, else None."""
    if not isinstance(node, fx.Node) or node.op != "call_function" or node.target is not torch.permute:
        return None
    source, order = node.args[0], node.args[1] if len(node.args) > 1 else node.kwargs.get("dims")
    return source if isinstance(source, fx.Node) and list(order) == dims else None  # type: ignore[arg-type]


def _tensor(graph_module: fx.GraphModule, node: object) -> Tensor | None:
    if isinstance(node, fx.Node) and node.op == "get_attr":
        return getattr(graph_module, str(node.target))  # type: ignore[no-any-return]
    return None


def lift_channel_layer_norms(graph_module: fx.GraphModule) -> int:
    """Replace every permute -> layer_norm over the last axis -> permute back by a ChannelLayerNorm module;
    returns how many (the graph is recompiled)."""
    lifted = 0
    for node in list(graph_module.graph.nodes):
        if node.op != "call_function" or node.target not in _LAYER_NORMS or len(node.users) != 1:
            continue
        source = _permute_of(node.args[0], [0, 2, 3, 1])
        back = next(iter(node.users))
        if source is None or _permute_of(back, [0, 3, 1, 2]) is None or back.args[0] is not node:
            continue
        shape = list(node.args[1])  # type: ignore[arg-type]
        weight, bias = (_tensor(graph_module, node.args[i]) if len(node.args) > i else None for i in (2, 3))
        eps = float(node.args[4]) if len(node.args) > 4 else 1e-5  # type: ignore[arg-type]
        if len(shape) != 1 or weight is None or bias is None or weight.shape != (shape[0],):
            continue
        norm = ChannelLayerNorm(int(shape[0]), eps)
        norm.weight.data.copy_(weight)  # type: ignore[union-attr]
        norm.bias.data.copy_(bias)  # type: ignore[union-attr]
        name = f"channel_norm_{lifted}"
        while hasattr(graph_module, name):
            name += "_"
        graph_module.add_module(name, norm.eval())
        with graph_module.graph.inserting_after(back):
            replacement = graph_module.graph.call_module(name, (source,))
        back.replace_all_uses_with(replacement)
        lifted += 1
    if lifted:
        graph_module.graph.eliminate_dead_code()
        graph_module.delete_all_unused_submodules()
        graph_module.recompile()
    return lifted
