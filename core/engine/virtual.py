"""Virtual inputs: a banded step reads rows of cat([upsample(a), b, ...]) without the concatenation
(or the upsampled tensor) ever existing whole. Each band builds only the rows it reads."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, fx

from .capture import module_of
from .layout import CHANNELS_LAST

UPSAMPLE_MODES = ("nearest", "bilinear")


@dataclass(frozen=True)
class Part:
    """One input of the concatenation: used as is (scale None) or upsampled by an integer scale."""

    scale: int | None = None
    mode: str = "nearest"  # nearest | bilinear (align_corners=False)


def source_rows(top: int, bottom: int, scale: int, mode: str, source_height: int) -> tuple[int, int]:
    """Source rows [first, last) whose upsampling reproduces output rows [top, bottom) exactly."""
    if mode == "nearest":
        return top // scale, (bottom - 1) // scale + 1
    first = max(0, math.floor((top + 0.5) / scale - 0.5))
    last = min(source_height, math.floor((bottom - 0.5) / scale - 0.5) + 2)
    return first, last


def upsampled_rows(source: Tensor, top: int, bottom: int, scale: int, mode: str) -> Tensor:
    """Rows [top, bottom) of F.interpolate(source, scale_factor=scale, mode), from a band of `source`."""
    first, last = source_rows(top, bottom, scale, mode, source.shape[2])
    band = source[:, :, first:last]
    if mode == "bilinear":
        up = F.interpolate(band, scale_factor=float(scale), mode="bilinear", align_corners=False)
    else:
        up = F.interpolate(band, scale_factor=float(scale), mode="nearest")
    offset = top - first * scale
    return up[:, :, offset:offset + bottom - top]


def virtual_size(tensors: tuple[Tensor, ...], parts: tuple[Part, ...]) -> tuple[int, int, int]:
    """(channels, height, width) of the concatenation the parts describe."""
    channels = sum(t.shape[1] for t in tensors)
    scale = parts[0].scale or 1
    return channels, tensors[0].shape[2] * scale, tensors[0].shape[3] * scale


def virtual_rows(tensors: tuple[Tensor, ...], parts: tuple[Part, ...], first: int, last: int) -> tuple[Tensor, int]:
    """Rows [first, last) of the concatenation (1, C, last - first, W), channels_last; and the most
    bytes its making held at once (0 when it is a view of the one input)."""
    if len(tensors) == 1 and parts[0].scale is None:
        return tensors[0][:, :, first:last], 0
    pieces = [t[:, :, first:last] if p.scale is None else upsampled_rows(t, first, last, p.scale, p.mode)
              for t, p in zip(tensors, parts)]
    made = sum(piece.untyped_storage().nbytes() for piece, p in zip(pieces, parts) if p.scale is not None)
    if len(pieces) == 1:
        return pieces[0], made
    rows = torch.cat(pieces, dim=1).contiguous(memory_format=CHANNELS_LAST)
    return rows, made + rows.untyped_storage().nbytes()


def upsample_part(node: fx.Node) -> Part | None:
    """Part(scale, mode) for F.interpolate(x, scale_factor=k, mode=nearest|bilinear), else None."""
    if node.op != "call_function" or node.target is not F.interpolate or len(node.args) != 1:
        return None
    kwargs = dict(node.kwargs)
    scale, mode = kwargs.pop("scale_factor", None), kwargs.pop("mode", "nearest")
    align = kwargs.pop("align_corners", None)
    kwargs.pop("recompute_scale_factor", None)
    if kwargs.pop("antialias", False) or kwargs.pop("size", None) is not None:
        return None
    if kwargs or not isinstance(scale, (int, float)) or float(scale) != int(scale) or int(scale) < 1:
        return None
    if mode not in UPSAMPLE_MODES or align:
        return None
    return Part(int(scale), str(mode))


def concat_parts(node: fx.Node) -> tuple[list[fx.Node], tuple[Part, ...]] | None:
    """For torch.cat([...], dim=1) read only by one node: its inputs, each with its upsampling folded in."""
    if node.op != "call_function" or node.target is not torch.cat or len(node.users) != 1:
        return None
    dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else 0)
    inputs = node.args[0]
    if dim != 1 or not isinstance(inputs, (list, tuple)) or not all(isinstance(i, fx.Node) for i in inputs):
        return None
    sources: list[fx.Node] = []
    parts: list[Part] = []
    for item in inputs:
        assert isinstance(item, fx.Node)
        part = upsample_part(item) if len(item.users) == 1 else None
        if part is not None and isinstance(item.args[0], fx.Node):
            sources.append(item.args[0])
            parts.append(part)
        else:
            sources.append(item)
            parts.append(Part())
    return sources, tuple(parts)


def fuse_concat_inputs(graph_module: fx.GraphModule, banded_types: tuple[type, ...]) -> int:
    """Let each banded step whose input is a concatenation (of upsampled tensors) read it virtually.

    The module gets `parts`; its node's arguments become the concatenation's sources. Returns the count.
    """
    fused = 0
    for node in list(graph_module.graph.nodes):
        module = module_of(graph_module, node)
        if not isinstance(module, banded_types) or getattr(module, "residual", False) or len(node.args) != 1:
            continue
        cat = node.args[0]
        found = concat_parts(cat) if isinstance(cat, fx.Node) else None
        if found is None:
            continue
        sources, parts = found
        setattr(module, "parts", parts)  # noqa: B010 (the module type is one of banded_types)
        node.args = tuple(sources)
        fused += 1
    graph_module.graph.eliminate_dead_code()
    graph_module.recompile()
    return fused
