"""The engine IR's vocabulary: what a front end may emit, so every pass sees one kind of graph.

A front end emits `call_module` nodes for layers with weights or state (one module per node, never
shared) and `call_function` nodes from IR_FUNCTIONS. Sizes that depend on the input's height and
width (an upsample to the input's size, a pad to a multiple) are computed in the graph from
`dim_size(x, axis)` nodes and plain `operator` arithmetic on ints, so one graph serves every size.
"""
from __future__ import annotations

import operator

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class FrontendError(ValueError):
    """A graph a front end cannot bring into the IR; the message names the node and the reason."""


@torch.fx.wrap
def dim_size(x: Tensor, axis: int) -> int:
    """x.shape[axis] as a graph node (so shape arithmetic stays in the graph, not baked in)."""
    return int(x.shape[axis])


IR_MODULES: tuple[type[nn.Module], ...] = (
    nn.Conv2d, nn.ConvTranspose2d, nn.BatchNorm2d, nn.GroupNorm, nn.Linear,
    nn.ReLU, nn.ReLU6, nn.Hardtanh, nn.Hardswish, nn.Hardsigmoid, nn.SiLU, nn.GELU, nn.Sigmoid, nn.Tanh,
    nn.LeakyReLU, nn.Softmax, nn.Identity,
    nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d,
)

IR_FUNCTIONS = frozenset({
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.getitem,
    torch.cat, torch.flatten, torch.mean, F.interpolate, F.pad, dim_size,
})
