"""A front end's IR graph as a leanseg model: wrapped in a GraphModel, probed (input channels, classes, size
multiple) by running it on small inputs, and checked against its card. Model files (`sources`) and `.leanseg`
bundles (`bundle`) both end here.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import torch
from torch import fx

from .card import ModelCard
from .checkpoint import CheckpointError, LoadedModel, ModelInfo
from .graph_model import GraphModel, GraphModelConfig

_PROBE_MULTIPLES = (1, 2, 4, 8, 16, 32, 64, 128)
# A net whose pooling pyramid needs more than (3, 5) x its multiple (smp's PAN pools its 1/32 map three more
# times) is probed again at twice and four times that size; the size it ran at becomes its minimum.
_PROBE_GROWTH = (1, 2, 4)


def graph_model_with_card(net: fx.GraphModule, card: ModelCard, path: Path | None, kind: str) -> LoadedModel:
    """Wrap the IR graph, probe it (channels, classes, size multiple) and check the card against it."""
    where = str(path) if path is not None else "model"
    channels = _input_channels(net)
    if channels is not None and card.source != "defaults" and channels != card.channels:
        raise CheckpointError(f"{where}: the card says {card.channels} input channels, the graph takes {channels}")
    channels = channels or card.channels
    if channels != card.channels:
        card = replace(card, channels=channels, mean=(0.5,) * channels, std=(0.25,) * channels)
    multiple, classes, min_size = _probe(net, channels, card.size_multiple, where)
    if classes > 255:
        raise CheckpointError(f"{where}: the graph outputs {classes} classes; labels are 8-bit, at most 255")
    if card.classes and len(card.classes) != classes:
        raise CheckpointError(f"{where}: the card lists {len(card.classes)} classes, the graph outputs {classes}")
    card = replace(card, size_multiple=multiple)
    config = GraphModelConfig(num_classes=classes, in_channels=channels, size_multiple=multiple, min_size=min_size,
                              source_format=kind)
    model = GraphModel(net, size_multiple=multiple, min_size=min_size, bgr=card.channel_order == "BGR",
                       probabilities=card.output_kind == "probabilities").eval()
    info = ModelInfo(
        config=config,  # type: ignore[arg-type]
        class_names=card.class_names(classes), class_colours=card.class_colours(classes),
        mean=card.mean, std=card.std,
        provenance={"format": kind, "card": card.source, "name": card.name or (path.stem if path else ""),
                    "architecture": card.architecture, "card_json": json.dumps(card.to_json())},
    )
    return LoadedModel(model=model, info=info, path=path)


def _input_channels(net: fx.GraphModule) -> int | None:
    """The input's channel count, from the first convolution that reads the input directly."""
    from ..engine.frontends.ir import check_size

    placeholder = next((n for n in net.graph.nodes if n.op == "placeholder"), None)
    inputs = {placeholder} | {n for n in net.graph.nodes if n.target is check_size}  # check_size passes x on
    for node in net.graph.nodes:
        if node.op == "call_module" and inputs & set(node.all_input_nodes):
            module = net.get_submodule(str(node.target))
            if isinstance(module, torch.nn.Conv2d):
                return int(module.in_channels)
    return None


def _probe(net: fx.GraphModule, channels: int, multiple: int, where: str) -> tuple[int, int, int]:
    """(size multiple, classes, minimum size or 0): run the graph on small inputs; the card's multiple is
    checked, not trusted."""
    stride = _total_stride(net, channels)
    # Without a card, the net's total stride comes first: a U-Net that upsamples to its skips' sizes runs at
    # any size, but only sizes that divide by its stride keep every level aligned (and its resizes integer).
    candidates = (multiple,) if multiple else tuple(dict.fromkeys([*([stride] if stride else []),
                                                                   *_PROBE_MULTIPLES]))
    last_error = ""
    # Every multiple at the smallest size first: a multiple a net runs at any size beats a minimum size.
    for m, growth in [(m, 1) for m in candidates] + [(candidates[0], g) for g in _PROBE_GROWTH[1:]]:
        size = growth * m
        try:
            shapes = [_output_shape(net, channels, rows * size, cols * size) for rows, cols in ((3, 5), (5, 3))]
        except (RuntimeError, ValueError, IndexError, TypeError) as err:
            last_error = str(err).splitlines()[0] if str(err) else type(err).__name__
            continue
        (k1, *rest1), (k2, *rest2) = shapes
        sizes_ok = rest1 == [3 * size, 5 * size] and rest2 == [5 * size, 3 * size]
        if k1 == k2 and sizes_ok:
            return m, k1, 3 * size if growth > 1 else 0
        last_error = f"output {shapes} does not keep the input's height and width"
    largest = 5 * _PROBE_GROWTH[-1] * candidates[0]
    tried = (f"size multiple {multiple} (from the card)" if multiple else f"size multiples {list(_PROBE_MULTIPLES)}") \
        + f", inputs up to {largest} px a side"
    raise CheckpointError(f"{where}: the graph does not run as a segmentation net (1, C, H, W) -> (1, K, H, W) "
                          f"at {tried}: {last_error[:200]}")


def _total_stride(net: fx.GraphModule, channels: int) -> int | None:
    """The input's height over the smallest feature map's (a power of two up to 128), from a meta run."""
    from ..engine.shapes import value_shapes

    try:
        shapes = value_shapes(net, (1, channels, 256, 256))
    except Exception:  # a graph meta tensors cannot run: the probe below decides
        return None
    constants = {node.name for node in net.graph.nodes if node.op == "get_attr"}  # weights are no feature maps
    heights = [shape[2] for name, shape in shapes.items()
               if name not in constants and len(shape) == 4 and shape[2] > 1]  # not global pools
    stride = 256 // min(heights) if heights else 0
    return stride if stride in _PROBE_MULTIPLES and stride > 1 else None


def _output_shape(net: fx.GraphModule, channels: int, height: int, width: int) -> list[int]:
    with torch.inference_mode():
        y = net(torch.zeros(1, channels, height, width))
    if not isinstance(y, torch.Tensor) or y.dim() != 4 or y.shape[0] != 1:
        shape = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
        raise ValueError(f"the output is {shape}, not (1, K, H, W)")
    return [int(v) for v in y.shape[1:]]
