"""The engine IR's vocabulary: what a front end may emit, so every pass sees one kind of graph.

A front end emits `call_module` nodes for layers with weights or state (one module per node, never
shared) and `call_function` nodes from IR_FUNCTIONS. Sizes that depend on the input's height and
width (an upsample to the input's size, a pad to a multiple) are computed in the graph from
`dim_size(x, axis)` nodes and plain `operator` arithmetic on ints, so one graph serves every size.
"""
from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, cast

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
    """An input size the captured graph does not hold for; the plan then runs the model eagerly, when it has the
    eager model (a graph from a file has none)."""


@torch.fx.wrap
def check_size(x: Tensor, heights: tuple[int, int], widths: tuple[int, int],
               multiples: tuple[int, int] = (1, 1), program: str | None = None) -> Tensor:
    """x, when its height and width lie in the ranges the graph holds for and divide by `multiples` (a program
    exported for sizes 32 * n); else OutsideCapturedSizes, which says why the range is what it is.

    `program`: None for leanseg's own capture of a module (torch.export with any size, so the range is where a
    branch on the size holds); else an exported program, named so ("": unnamed), whose range torch.export
    recorded (its Dim min/max, or a branch it followed: the program does not say which)."""
    height, width = int(x.shape[2]), int(x.shape[3])
    inside = heights[0] <= height <= heights[1] and widths[0] <= width <= widths[1]
    if not inside and program is None:
        raise OutsideCapturedSizes(f"the captured graph holds for heights {heights[0]}..{heights[1]} and widths "
                                   f"{widths[0]}..{widths[1]}, not height {height} and width {width} (the model "
                                   "branches on its input size)")
    if not inside:
        larger = height > heights[1] or width > widths[1]
        raise OutsideCapturedSizes(
            f"{program or 'the program'} was exported for heights {heights[0]}..{heights[1]} and widths "
            f"{widths[0]}..{widths[1]} px, not height {height} and width {width} (the range torch.export recorded: "
            "the Dim min/max "
            f"given for the height and width, or a branch on the input size); to run "
            f"{'larger' if larger else 'smaller'} images, export it again with a "
            f"{'larger max' if larger else 'smaller min'}")
    if height % multiples[0] or width % multiples[1]:
        held = "the captured graph holds" if program is None else f"{program or 'the program'} was exported"
        raise OutsideCapturedSizes(f"{held} for heights that divide by {multiples[0]} and widths "
                                   f"that divide by {multiples[1]}, not height {height} and width {width}")
    return x


def size_checks(graph_module: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """The graph's check_size nodes (a graph from a program exported, or captured, for some sizes only)."""
    return [node for node in graph_module.graph.nodes if node.op == "call_function" and node.target is check_size]


def checked_sizes(node: torch.fx.Node) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    """(heights, widths, multiples) a check_size node holds for: (low, high) ranges and (height, width) multiples."""
    heights, widths = cast(tuple[int, int], node.args[1]), cast(tuple[int, int], node.args[2])
    multiples = cast(tuple[int, int], node.args[3]) if len(node.args) > 3 else (1, 1)
    return heights, widths, multiples


def captured_size_range(graph_module: torch.fx.GraphModule) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """((lowest height, highest height), (lowest width, highest width)) the graph holds for, where it checks its
    input's size; None where it holds for any size."""
    checks = [checked_sizes(node) for node in size_checks(graph_module)]
    if not checks:
        return None
    return ((max(heights[0] for heights, _, _ in checks), min(heights[1] for heights, _, _ in checks)),
            (max(widths[0] for _, widths, _ in checks), min(widths[1] for _, widths, _ in checks)))


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
