"""The engine IR's vocabulary: what a front end may emit, so every pass sees one kind of graph.

A front end emits `call_module` nodes for layers with weights or state (one module per node, never
shared) and `call_function` nodes from IR_FUNCTIONS. Sizes that depend on the input's height and
width (an upsample to the input's size, a pad to a multiple) are computed in the graph from
`dim_size(x, axis)` nodes and plain `operator` arithmetic on ints, so one graph serves every size.
"""
from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .channel_norm import ChannelLayerNorm


class FrontendError(ValueError):
    """A graph a front end cannot bring into the IR; the message names the node and the reason."""


@torch.fx.wrap
def dim_size(x: Tensor, axis: int) -> int:
    """x.shape[axis] as a graph node (so shape arithmetic stays in the graph, not baked in)."""
    return int(x.shape[axis])


class OutsideCapturedSizes(ValueError):
    """An input size the captured graph does not hold for; the plan then runs the model eagerly."""


@torch.fx.wrap
def check_size(x: Tensor, heights: tuple[int, int], widths: tuple[int, int],
               multiples: tuple[int, int] = (1, 1)) -> Tensor:
    """x, when its height and width lie in the ranges the captured graph holds for (a capture that
    followed a branch on the size is valid only there) and divide by `multiples` (a program exported for
    sizes 32 * n); else a ValueError that says so."""
    height, width = int(x.shape[2]), int(x.shape[3])
    if not (heights[0] <= height <= heights[1] and widths[0] <= width <= widths[1]):
        raise OutsideCapturedSizes(f"the captured graph holds for heights {heights[0]}..{heights[1]} and widths "
                         f"{widths[0]}..{widths[1]}, not {height}x{width} (the model branches on its input size)")
    if height % multiples[0] or width % multiples[1]:
        raise OutsideCapturedSizes(f"the captured graph holds for heights that divide by {multiples[0]} and widths "
                                   f"that divide by {multiples[1]}, not {height}x{width}")
    return x


IR_MODULES: tuple[type[nn.Module], ...] = (
    nn.Conv2d, nn.ConvTranspose2d, nn.BatchNorm2d, nn.GroupNorm, nn.Linear,
    nn.ReLU, nn.ReLU6, nn.Hardtanh, nn.Hardswish, nn.Hardsigmoid, nn.SiLU, nn.GELU, nn.Sigmoid, nn.Tanh,
    nn.LeakyReLU, nn.Softmax, nn.Identity,
    nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d, ChannelLayerNorm,
)

IR_FUNCTIONS_BY_NAME: dict[str, Callable[..., Any]] = {  # the names an IR file stores them by
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
    "floordiv": operator.floordiv, "getitem": operator.getitem, "cat": torch.cat, "flatten": torch.flatten,
    "mean": torch.mean, "interpolate": F.interpolate, "pad": F.pad, "dim_size": dim_size,
    "check_size": check_size,
    # attention blocks (MAnet's position attention)
    "reshape": torch.reshape, "permute": torch.permute, "transpose": torch.transpose, "matmul": torch.matmul,
    "bmm": torch.bmm, "softmax": torch.softmax,
    # channel splits (Res2Net, CSP, GhostNet) and ResNeSt's sum over its split-attention radix
    "split": torch.split, "chunk": torch.chunk, "sum": torch.sum,
}
IR_FUNCTIONS = frozenset(IR_FUNCTIONS_BY_NAME.values())
