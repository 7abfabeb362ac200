"""Virtual inputs: a banded step reads rows of cat([upsample(a), b, conv(c), ...]) without the
concatenation (or the upsampled tensor, or the conv's output) ever existing whole. Each band builds only
the rows it reads."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, fx, nn

from .capture import module_of
from .fuse import ConvAct
from .layout import CHANNELS_LAST
from .row_resize import upsampled_rows
from .transposed import TransposedConvAct

UPSAMPLE_MODES = ("nearest", "bilinear")
Producer = ConvAct | TransposedConvAct
Producers = nn.ModuleList | Sequence[Producer]  # the convs producer parts recompute


@dataclass(frozen=True)
class Part:
    """One input of the concatenation: used as is (scale None), upsampled by an integer scale, or the
    output of a conv recomputed band by band from the argument (`producer`: an index into the reading
    module's `producers`)."""

    scale: int | None = None
    mode: str = "nearest"  # nearest | bilinear
    producer: int | None = None
    align_corners: bool = False  # bilinear only (as many hand-written U-Nets' nn.Upsample asks)


def virtual_size(tensors: tuple[Tensor, ...], parts: tuple[Part, ...],
                 producers: Producers = ()) -> tuple[int, int, int]:
    """(channels, height, width) of the concatenation the parts describe."""
    sizes = [_part_size(t, p, producers) for t, p in zip(tensors, parts)]
    return sum(c for c, _, _ in sizes), sizes[0][1], sizes[0][2]


def _part_size(tensor: Tensor, part: Part, producers: Producers) -> tuple[int, int, int]:
    if part.producer is not None:
        producer = cast(Producer, producers[part.producer])
        if isinstance(producer, TransposedConvAct):
            return producer.conv.out_channels, *producer.output_size(tensor.shape[2], tensor.shape[3])
        return producer.conv.out_channels, *conv_output_size(producer.conv, tensor.shape[2], tensor.shape[3])
    scale = part.scale or 1
    return tensor.shape[1], tensor.shape[2] * scale, tensor.shape[3] * scale


def conv_output_size(conv: Any, height: int, width: int) -> tuple[int, int]:
    """(height, width) of a Conv2d's (or any window's: kernel_size, stride, padding, dilation) output."""
    sizes = []
    for extent, k, s, d, p in zip((height, width), conv.kernel_size, conv.stride, conv.dilation, conv.padding):
        sizes.append((extent + 2 * int(p) - d * (k - 1) - 1) // s + 1)  # type: ignore[call-overload]
    return sizes[0], sizes[1]


def produced_rows(source: Tensor, first: int, last: int, producer: Producer) -> Tensor:
    """Rows [first, last) of producer(source), from the source rows its window reads; rows beyond the
    source's edge are the zeros the conv's own padding would add."""
    if isinstance(producer, TransposedConvAct):
        return producer.rows(source, first, last)
    conv = producer.conv
    padding = cast(tuple[int, int], conv.padding)
    stride, pad = conv.stride[0], padding[0]
    top = first * stride - pad
    bottom = (last - 1) * stride - pad + conv.dilation[0] * (conv.kernel_size[0] - 1) + 1
    height = source.shape[2]
    rows = source[:, :, max(top, 0):min(bottom, height)]
    pad_top, pad_bottom = max(0, -top), max(0, bottom - height)
    if pad_top or pad_bottom:
        if rows.is_meta:
            rows = rows.new_empty((rows.shape[0], rows.shape[1], rows.shape[2] + pad_top + pad_bottom, rows.shape[3]))
        else:
            rows = F.pad(rows, (0, 0, pad_top, pad_bottom))
    return producer(rows, padding=(0, padding[1]))


def virtual_rows(tensors: tuple[Tensor, ...], parts: tuple[Part, ...], first: int, last: int,
                 producers: Producers = ()) -> tuple[Tensor, int]:
    """Rows [first, last) of the concatenation (1, C, last - first, W), channels_last; and the most
    bytes its making held at once (0 when it is a view of the one input)."""
    if len(tensors) == 1 and parts[0] == Part():
        return tensors[0][:, :, first:last], 0
    pieces = [_part_rows(t, p, first, last, producers) for t, p in zip(tensors, parts)]
    made = sum(piece.untyped_storage().nbytes() for piece, p in zip(pieces, parts) if p != Part())
    if len(pieces) == 1:
        return pieces[0], made
    rows = torch.cat(pieces, dim=1).contiguous(memory_format=CHANNELS_LAST)
    return rows, made + rows.untyped_storage().nbytes()


def _part_rows(tensor: Tensor, part: Part, first: int, last: int, producers: Producers) -> Tensor:
    if part.producer is not None:
        return produced_rows(tensor, first, last, cast(Producer, producers[part.producer]))
    if part.scale is not None:
        return upsampled_rows(tensor, first, last, part.scale, part.mode, part.align_corners)
    return tensor[:, :, first:last]


def upsample_part(node: fx.Node, align_corners_ok: bool = False) -> Part | None:
    """Part(scale, mode) for F.interpolate(x, scale_factor=k, mode=nearest|bilinear), else None; bilinear
    with align_corners=True too when the caller builds rows with `upsampled_rows` (`align_corners_ok`)."""
    if node.op != "call_function" or node.target is not F.interpolate or len(node.args) != 1:
        return None
    kwargs = dict(node.kwargs)
    scale, mode = kwargs.pop("scale_factor", None), kwargs.pop("mode", "nearest")
    align = kwargs.pop("align_corners", None)
    kwargs.pop("recompute_scale_factor", None)
    if kwargs.pop("antialias", False) or kwargs.pop("size", None) is not None:
        return None
    if isinstance(scale, (tuple, list)) and len(set(scale)) == 1:  # (2.0, 2.0): how ONNX Resize scales come in
        scale = scale[0]
    if kwargs or not isinstance(scale, (int, float)) or float(scale) != int(scale) or int(scale) < 1:
        return None
    if mode not in UPSAMPLE_MODES or (align and (mode != "bilinear" or not align_corners_ok)):
        return None
    return Part(int(scale), str(mode), align_corners=bool(align))


def _channel_cat_inputs(node: fx.Node) -> list[fx.Node] | None:
    """The inputs of torch.cat(..., dim=1), with those that are themselves such a cat read by it alone (UNet++'s
    dense skips: cat([up(x), cat([a, b])])) replaced by their own inputs; None for any other node."""
    if node.op != "call_function" or node.target is not torch.cat:
        return None
    dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else 0)
    inputs = node.args[0]
    if dim != 1 or not isinstance(inputs, (list, tuple)) or not all(isinstance(i, fx.Node) for i in inputs):
        return None
    flat: list[fx.Node] = []
    for item in inputs:
        assert isinstance(item, fx.Node)
        nested = _channel_cat_inputs(item) if len(item.users) == 1 else None
        flat.extend(nested if nested is not None else [item])
    return flat


def concat_parts(node: fx.Node, graph_module: fx.GraphModule, lone_upsample: bool = False
                 ) -> tuple[list[fx.Node], tuple[Part, ...], list[Producer]] | None:
    """For torch.cat([...], dim=1) read only by one node: its inputs, each with its upsampling folded in,
    and each transposed conv read by the cat alone as a producer part. With `lone_upsample`, an upsampled
    tensor read by one node is taken as a concatenation of one part."""
    inputs = _channel_cat_inputs(node)
    if inputs is None and lone_upsample and upsample_part(node, align_corners_ok=True) is not None:
        inputs = [node]
    if inputs is None or len(node.users) != 1:
        return None
    sources: list[fx.Node] = []
    parts: list[Part] = []
    producers: list[Producer] = []
    for item in inputs:
        assert isinstance(item, fx.Node)
        part = upsample_part(item, align_corners_ok=True) if len(item.users) == 1 else None
        producer = module_of(graph_module, item) if len(item.users) == 1 else None
        if isinstance(producer, TransposedConvAct) and isinstance(item.args[0], fx.Node) and len(item.args) == 1:
            sources.append(item.args[0])
            parts.append(Part(producer=len(producers)))
            producers.append(producer)
        elif part is not None and isinstance(item.args[0], fx.Node):
            sources.append(item.args[0])
            parts.append(part)
        else:
            sources.append(item)
            parts.append(Part())
    return sources, tuple(parts), producers


def fuse_concat_inputs(graph_module: fx.GraphModule, banded_types: tuple[type, ...],
                       lone_upsample: bool = False) -> int:
    """Let each banded step whose input is a concatenation (of upsampled tensors) read it virtually; with
    `lone_upsample`, a step whose input is one upsampled tensor too.

    The module gets `parts`; its node's arguments become the concatenation's sources. Returns the count.
    """
    fused = 0
    for node in list(graph_module.graph.nodes):
        module = module_of(graph_module, node)
        if not isinstance(module, banded_types) or getattr(module, "residual", False) or len(node.args) != 1:
            continue
        cat = node.args[0]
        found = concat_parts(cat, graph_module, lone_upsample) if isinstance(cat, fx.Node) else None
        if found is None:
            continue
        sources, parts, producers = found
        known = getattr(module, "producers")  # noqa: B009 (banded types read virtual inputs: they all have one)
        parts = tuple(Part(producer=len(known) + p.producer) if p.producer is not None else p for p in parts)
        known.extend(producers)
        setattr(module, "parts", parts)  # noqa: B010 (the module type is one of banded_types)
        node.args = tuple(sources)
        fused += 1
    graph_module.graph.eliminate_dead_code()
    graph_module.delete_all_unused_submodules()
    graph_module.recompile()
    return fused
