"""A front end's IR graph as a leanseg model: wrapped in a GraphModel, probed (input channels, classes, size
multiple) by running it on small inputs, and checked against its card. Model files (`sources`) and `.leanseg`
bundles (`bundle`) both end here. Each probe run holds GRAPH_LOCK, as every model run does: a model opened on one
thread while another traces would otherwise run into the tracer ("module is not installed as a submodule").
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import torch
from torch import fx

from ..engine.graph_lock import GRAPH_LOCK
from .card import GREY_MEAN, GREY_STD, ModelCard, default_palette
from .checkpoint import CheckpointError, LoadedModel, ModelInfo
from .graph_model import GraphModel, GraphModelConfig, drop_final_sigmoid

_PROBE_MULTIPLES = (1, 2, 4, 8, 16, 32, 64, 128)
# Sides (in multiples) tried as a minimum when one multiple a side is too small: smp's PAN pools its 1/32 map
# three more times and runs from 4 multiples of 32 up.
_MINIMUM_STEPS = (2, 3, 4, 6, 8, 12, 16)


def graph_model_with_card(net: fx.GraphModule, card: ModelCard, path: Path | None, kind: str) -> LoadedModel:
    """Wrap the IR graph, probe it (channels, classes, size multiple) and check the card against it."""
    where = str(path) if path is not None else "model"
    channels = _input_channels(net)
    if channels is not None and channels not in (1, 3):
        raise CheckpointError(f"{where}: the graph takes {channels} input channels; leanseg gives a net 1 (grey) or 3 "
                              "(RGB) channels: export it for one of those (an RGBA net: drop the alpha channel's "
                              "weights from its first convolution)")
    if channels is not None and card.source != "defaults" and channels != card.channels:
        said = f"{card.channels} input channel{'s' if card.channels != 1 else ''}"
        raise CheckpointError(f"{where}: the card {card.source} says {said}, the graph takes {channels}: set "
                              f"input.channels to {channels}, with {channels} values in input.mean and input.std")
    channels = channels or card.channels
    if channels != card.channels:
        card = replace(card, channels=channels, mean=GREY_MEAN * channels, std=GREY_STD * channels)
    _refuse_one_size_export(net, where)
    _name_the_program(net, path.name if path is not None else "")
    multiple, classes, min_size = _probe_with_card(net, channels, card, where)
    if classes > 255:
        raise CheckpointError(f"{where}: the graph outputs {classes} classes; labels are 8-bit, at most 255")
    one_channel = classes == 1
    probabilities = card.output_kind == "probabilities"
    if one_channel:
        card, classes = binary_card(card, where), 2
        if drop_final_sigmoid(net):  # its logit instead: the same labels, and the engine's tail takes it in
            probabilities = False
    elif card.classes and len(card.classes) != classes:
        raise CheckpointError(f"{where}: the card {card.source} lists {len(card.classes)} classes, the graph "
                              f"outputs {classes}: give it {classes} names")
    card = replace(card, size_multiple=multiple)
    max_size = _largest_size(net, multiple)
    config = GraphModelConfig(num_classes=classes, in_channels=channels, size_multiple=multiple, min_size=min_size,
                              max_size=max_size, source_format=kind, one_channel=one_channel)
    model = GraphModel(net, config, bgr=card.channel_order == "BGR", probabilities=probabilities).eval()
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


def binary_card(card: ModelCard, where: str) -> ModelCard:
    """The card of a graph with one output channel (a binary net), for its two classes: background and the
    card's one class ("foreground" without a card); a card may also name both, background first."""
    if len(card.classes) > 2:
        raise CheckpointError(f"{where}: the card {card.source} lists {len(card.classes)} classes, the graph "
                              "outputs 1 channel (a binary net): give it 1 name (its class) or 2 (background, "
                              "then its class)")
    names = card.classes if len(card.classes) == 2 else ("background", *(card.classes or ("foreground",)))
    colours = card.colours or default_palette(1)  # the background black: the overlay marks the class alone
    if len(colours) == 1:
        colours = ((0, 0, 0), *colours)
    return replace(card, classes=names, colours=colours if len(colours) == 2 else ())


def _refuse_one_size_export(net: fx.GraphModule, where: str) -> None:
    """A program exported without dynamic sizes runs at its one size: images of any other size cannot run."""
    from ..engine.frontends.ir import checked_sizes, size_checks

    for node in size_checks(net):
        heights, widths, _ = checked_sizes(node)
        if heights[0] == heights[1] and widths[0] == widths[1]:
            raise CheckpointError(
                f"{where}: exported for {widths[0]}x{heights[0]} px (width x height) inputs only: export it again "
                "with a dynamic height and width (torch.export's dynamic_shapes; README, 'Exporting a PyTorch model')")


def _name_the_program(net: fx.GraphModule, name: str) -> None:
    """Put the file's name in the graph's size checks, so an image outside the exported range is refused naming it
    (a bundle's stored graph gets the bundle's name)."""
    from ..engine.frontends.ir import size_checks

    checks = size_checks(net)
    for node in checks:
        node.kwargs = {**node.kwargs, "program": name}
    if checks:  # without size checks the code is unchanged: no recompile
        net.recompile()


def _largest_size(net: fx.GraphModule, multiple: int) -> tuple[int, int]:
    """The largest (height, width), multiples of `multiple`, the graph holds for (a program exported with a Dim max):
    what an image, or a tile of it, padded to the multiple may be at most; (0, 0) for no limit."""
    from ..engine.frontends.ir import captured_size_range

    size_range = captured_size_range(net)
    if size_range is None:
        return 0, 0
    (_, highest_height), (_, highest_width) = size_range
    return tuple(0 if high >= 2**30 else high // multiple * multiple  # type: ignore[return-value]
                 for high in (highest_height, highest_width))


def _probe_with_card(net: fx.GraphModule, channels: int, card: ModelCard,
                     where: str) -> tuple[int, int, tuple[int, int]]:
    """_probe at the card's size multiple; when that fails and another multiple works, the error says which."""
    try:
        return _probe(net, channels, card.size_multiple, where)
    except CheckpointError as refused:
        if not card.size_multiple:
            raise
        try:
            found = _probe(net, channels, 0, where)[0]
        except CheckpointError:
            raise refused from None  # no multiple works: the card's is not the problem
        raise CheckpointError(f"{where}: the card {card.source} says input.size_multiple {card.size_multiple}, but "
                              f"the graph runs at multiples of {found}: set it to {found} or leave it out") from None


def _probe(net: fx.GraphModule, channels: int, multiple: int, where: str) -> tuple[int, int, tuple[int, int]]:
    """(size multiple, classes, (minimum height, minimum width), 0 for none): run the graph on small inputs;
    the card's multiple is checked, not trusted."""
    stride = _total_stride(net, channels)
    # Without a card, the net's total stride comes first: a U-Net that upsamples to its skips' sizes runs at
    # any size, but only sizes that divide by its stride keep every level aligned (and its resizes integer).
    candidates = (multiple,) if multiple else tuple(dict.fromkeys([*([stride] if stride else []),
                                                                   *_PROBE_MULTIPLES]))
    last_error = telling = ""  # telling: the first failure where the graph ran (its output's shape is wrong)
    chosen = None
    for m in candidates:
        classes, last_error, ran = _runs(net, channels, [(3 * m, 5 * m), (5 * m, 3 * m)])
        if classes is not None:
            chosen = m
            break
        telling = telling or (last_error if ran else "")
    # The smallest input the model is ever given is one multiple a side (or its minimum): find that minimum
    # for the chosen multiple, or for the card's or the stride's when (3, 5) multiples were too small.
    searched = chosen if chosen is not None else candidates[0] if multiple or stride else None
    if searched is not None:
        minimum, classes, error = _minimum_sides(net, channels, searched)
        if minimum is not None and classes is not None:
            return searched, classes, minimum
        last_error = error or last_error
    if chosen is None:
        last_error = telling or last_error  # a wrong output shape says more than a size the graph refuses
    fixed = _fixed_output(net, channels, searched or candidates[0])
    if fixed is not None:
        raise CheckpointError(
            f"{where}: its output is {fixed[1]}x{fixed[0]} px (width x height) whatever the input's size: it was "
            "exported for one size; "
            "export it again with a dynamic height and width (torch.onnx.export's dynamic_axes, torch.export's "
            "dynamic_shapes; README, 'Exporting a PyTorch model')")
    largest = max(5 * max(candidates), (_MINIMUM_STEPS[-1] + 2) * searched if searched else 0)
    tried = (f"multiples of {multiple} px (the card's input.size_multiple)" if multiple
             else f"multiples of {', '.join(map(str, candidates[:-1]))} or {candidates[-1]} px")
    raise CheckpointError(f"{where}: the graph does not run as a segmentation net (1, C, H, W) -> (1, K, H, W) on "
                          f"any input tried (heights and widths that are {tried}, up to {largest} px): "
                          f"{_first_words(last_error, 300)}")


def _first_words(text: str, limit: int) -> str:
    """`text`, or its words up to `limit` characters and an ellipsis."""
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " …"


def _minimum_sides(net: fx.GraphModule, channels: int, m: int) -> tuple[tuple[int, int] | None, int | None, str]:
    """((minimum height, minimum width), classes, error): (0, 0) when the graph runs at m x m. Else the
    smallest square of k0 multiples it runs at, then each side alone lowered with the other at k0 multiples.
    Every size above the minimum must work too, checked at (+1, +2) and (+2, +1) multiples: a net that only
    runs at even multiples needs a larger multiple, not a minimum."""
    classes, error, _ran = _runs(net, channels, [(m, m)])
    if classes is not None:
        return (0, 0), classes, ""
    square = next((k for k in _MINIMUM_STEPS if _runs(net, channels, [(k * m, k * m)])[0] is not None), None)
    if square is None:
        return None, None, error
    lowest_rows = next(k for k in range(1, square + 1) if _runs(net, channels, [(k * m, square * m)])[0] is not None)
    lowest_cols = next(k for k in range(1, square + 1) if _runs(net, channels, [(square * m, k * m)])[0] is not None)
    # Where the sides depend on each other (an InstanceNorm refuses a 1 x 1 map, not 1 x 2), the square.
    for rows, cols in dict.fromkeys([(lowest_rows, lowest_cols), (square, square)]):
        sizes = [(rows * m, cols * m), ((rows + 1) * m, (cols + 2) * m), ((rows + 2) * m, (cols + 1) * m)]
        classes, error, _ran = _runs(net, channels, sizes)
        if classes is not None:
            return (rows * m if rows > 1 else 0, cols * m if cols > 1 else 0), classes, ""
    return None, None, f"runs at {square * m} px a side but not at all of {sizes}: {error}"


def _runs(net: fx.GraphModule, channels: int, sizes: list[tuple[int, int]]) -> tuple[int | None, str, bool]:
    """(classes, "", True) when the graph maps every (height, width) in `sizes` to (1, K, height, width) with one
    K; else (None, why not, whether the graph ran to an output: False for a size it refuses or fails at)."""
    try:
        shapes = [_output_shape(net, channels, height, width) for height, width in sizes]
    except (RuntimeError, ValueError, IndexError, TypeError) as err:
        return None, str(err).splitlines()[0] if str(err) else type(err).__name__, isinstance(err, _OutputShapeError)
    if len({shape[0] for shape in shapes}) == 1 and all(shape[1:] == list(size) for shape, size in zip(shapes, sizes)):
        return shapes[0][0], "", True
    changed = next(((size, shape) for size, shape in zip(sizes, shapes) if shape[1:] != list(size)), None)
    if changed is None:  # every size kept, but the class count changed with the size
        return None, f"the class count changes with the input size: {sorted({shape[0] for shape in shapes})}", True
    (height, width), (classes, out_height, out_width) = changed[0], changed[1]
    if (classes, out_height) == (height, width):
        return None, (f"a {width}x{height} px (width x height) input gives a (1, {height}, {width}, {out_width}) "
                      f"output, channels last: make it return (1, K, H, W) (permute(0, 3, 1, 2) at its end)"), True
    return None, (f"a {width}x{height} px (width x height) input gives a {out_width}x{out_height} output "
                  f"({classes} classes): a segmentation net keeps the input's height and width (upsample its "
                  "logits to the input's size)"), True


def _fixed_output(net: fx.GraphModule, channels: int, m: int) -> tuple[int, int] | None:
    """(height, width) of the output when inputs of several sizes (multiples of m) all give that one size, unlike
    their own: a net whose resize to the input's size was exported as a constant; else None (also for a 1-pixel
    side, which global pooling gives at any export size)."""
    outputs = set()
    for height, width in ((3 * m, 5 * m), (5 * m, 3 * m), (4 * m, 4 * m)):
        try:
            outputs.add(tuple(_output_shape(net, channels, height, width)[1:]))
        except (RuntimeError, ValueError, IndexError, TypeError):
            return None
    if len(outputs) != 1:
        return None
    out_height, out_width = outputs.pop()  # three input sizes, one output size: at most one of them matches it
    if min(out_height, out_width) == 1:  # pooled away (a classifier's global pooling), not a size baked in
        return None
    return out_height, out_width


def _total_stride(net: fx.GraphModule, channels: int) -> int | None:
    """The input's height over the smallest feature map's (a power of two up to 128), from a meta run."""
    from ..engine.shapes import value_shapes

    try:
        with GRAPH_LOCK:
            shapes = value_shapes(net, (1, channels, 256, 256))
    except Exception:  # a graph meta tensors cannot run: the probe below decides
        return None
    constants = {node.name for node in net.graph.nodes if node.op == "get_attr"}  # weights are no feature maps
    heights = [shape[2] for name, shape in shapes.items()
               if name not in constants and len(shape) == 4 and shape[2] > 1]  # not global pools
    stride = 256 // min(heights) if heights else 0
    return stride if stride in _PROBE_MULTIPLES and stride > 1 else None


class _OutputShapeError(ValueError):
    """The graph ran, and its output is not one (1, K, H, W) tensor."""


def _output_shape(net: fx.GraphModule, channels: int, height: int, width: int) -> list[int]:
    # forward, not __call__: fx's __call__ prints each failing size's traceback
    with GRAPH_LOCK, torch.inference_mode():
        y = net.forward(torch.zeros(1, channels, height, width))
    if not isinstance(y, torch.Tensor) or y.dim() != 4 or y.shape[0] != 1:
        shape = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
        squeezed = isinstance(y, torch.Tensor) and tuple(y.shape) == (1, height, width)
        raise _OutputShapeError(f"the output is {shape}, not (1, K, H, W)" + (
            ": keep the class axis (a binary net: (1, 1, H, W))" if squeezed else ""))
    return [int(v) for v in y.shape[1:]]
