"""Receptive field of a fully convolutional net, read from its torch.fx graph.

For every value in the graph we know its jump J (input pixels per index, from strides and
upsampling) and, walking back from the output, its reach: the span of indices that output
pixel `o` reads from it, in input pixels relative to `o`. A tile reproduces the whole-image
output at `o` exactly when, at every value, that span lies inside the tile (or runs off the
image on a side where the tile touches the image border). The halo is the widest such span.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from fractions import Fraction

import torch
import torch.nn.functional as F
from torch import fx, nn

from ..model import padding
from .frontends.channel_norm import ChannelLayerNorm
from .frontends.ir import check_size, dim_size
from .graph_lock import symbolic_trace
from .shapes import input_channels, meta_copy, size_minimum, size_multiple, sizes_to_scales
from .size_arith import fold_size_arithmetic


class ReceptiveFieldError(ValueError):
    """The graph holds an operation whose spatial footprint is unknown or unbounded."""


@dataclass(frozen=True)
class IndexMap:
    """Output index o reads input indices [scale*o + low, scale*o + high]; scale = J_out / J_in."""

    scale: Fraction
    low: Fraction
    high: Fraction


@dataclass(frozen=True)
class ReceptiveField:
    halo_px: int  # input pixels needed on every side of an output pixel (max of the four below)
    before_px: tuple[int, int]  # (rows above, columns left) an output pixel reads
    after_px: tuple[int, int]  # (rows below, columns right)
    total_stride: int  # the largest jump (and the multiple the model pads its input to); tiles start at multiples

    @property
    def aligned_halo_px(self) -> int:
        """The halo rounded up to the total stride, so tiles stay aligned."""
        return -(-self.halo_px // self.total_stride) * self.total_stride


POINTWISE_MODULES: tuple[type[nn.Module], ...] = (
    nn.BatchNorm2d, nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.PReLU, nn.GELU, nn.SiLU, nn.Sigmoid, nn.Tanh,
    nn.Hardswish, nn.Hardsigmoid, nn.Mish, nn.ELU, nn.Identity, nn.Dropout, nn.Dropout2d, nn.Flatten,
    ChannelLayerNorm,
)
POINTWISE_FUNCTIONS: set[object] = {
    operator.add, operator.iadd, operator.mul, operator.imul, operator.sub, operator.truediv, operator.neg,
    operator.floordiv, operator.mod,
    torch.add, torch.mul, torch.sub, torch.cat, torch.relu, torch.sigmoid, torch.tanh, torch.clamp,
    F.relu, F.relu6, F.gelu, F.silu, F.sigmoid, F.hardswish, F.leaky_relu, F.dropout, F.batch_norm,
    padding.pad_to_multiple, check_size,
    torch.split, torch.chunk,  # along channels (the front ends lift only those)
    torch.log,  # GraphModel's log-probabilities of a net that ends in a softmax
}
CHANNEL_FUNCTIONS: set[object] = {torch.softmax, F.softmax, torch.log_softmax, F.log_softmax}  # pointwise along dim 1
POINTWISE_METHODS = {"add", "add_", "mul", "mul_", "sub", "relu", "relu_", "sigmoid", "tanh", "clamp", "clamp_min",
                     "contiguous", "float", "half", "to", "type_as", "clone", "detach", "argmax"}
SHAPE_ONLY_METHODS = {"size", "dim", "numel"}
SHAPE_ONLY_FUNCTIONS: set[object] = {dim_size}
IDENTITY = IndexMap(Fraction(1), Fraction(0), Fraction(0))


def compute_receptive_field(model: nn.Module | fx.GraphModule) -> ReceptiveField:
    """The receptive field of `model` (traced with torch.fx unless already a GraphModule).

    A graph that reads its own sizes (a `.pt2` / `.onnx` net: `dim_size` nodes, resizes to a skip's size)
    is read from a weightless copy whose size arithmetic is folded and whose resizes to another tensor's
    size, when they are the same integer scale at every size, are scales (the compiler's own passes)."""
    graph_module = model if isinstance(model, fx.GraphModule) else symbolic_trace(model)
    _check_any_tile_size_runs(graph_module)
    if any(node.target is dim_size for node in graph_module.graph.nodes):
        graph_module = meta_copy(graph_module)
        channels = input_channels(graph_module)
        try:
            fold_size_arithmetic(graph_module, channels)
            sizes_to_scales(graph_module, channels)
        except Exception as err:  # noqa: BLE001 - an analysis that cannot run leaves the model untileable
            raise ReceptiveFieldError(f"its size arithmetic cannot be read ({type(err).__name__}: {err})") from err
    # tiles also start at multiples of what the model pads its input to (bottom, right): a tile that ends at the
    # image's border is then padded as the whole image is
    before, after, stride = [], [], size_multiple(graph_module) or 1
    for axis in (0, 1):
        low, high, jump = _reach_along(graph_module, axis)
        before.append(math.ceil(low))
        after.append(math.ceil(high))
        stride = math.lcm(stride, math.ceil(jump))
    halo = max(before + after)
    return ReceptiveField(halo, (before[0], before[1]), (after[0], after[1]), stride)


def _check_any_tile_size_runs(graph_module: fx.GraphModule) -> None:
    """Exact tiles are smaller than the image and of any multiple of the stride: a graph that pads its input up
    to a minimum size (an edge tile would be padded otherwise than the whole image) or holds only from some
    size on (a capture that followed a branch on the size) cannot be tiled exactly."""
    if any(size_minimum(graph_module)):
        raise ReceptiveFieldError(f"it pads its input up to at least {size_minimum(graph_module)} (height, width): "
                                  "a tile smaller than that would be padded otherwise than the whole image")
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and node.target is check_size:
            (lowest_height, _), (lowest_width, _) = node.args[1], node.args[2]  # type: ignore[misc]
            multiples = node.args[3] if len(node.args) > 3 else (1, 1)
            if lowest_height > multiples[0] or lowest_width > multiples[1]:  # type: ignore[index]
                raise ReceptiveFieldError(f"the captured graph holds only for heights from {lowest_height} and widths "
                                          f"from {lowest_width} (it branches on its input size); smaller tiles would "
                                          "leave what it captured")


def _reach_along(gm: fx.GraphModule, axis: int) -> tuple[Fraction, Fraction, Fraction]:
    """(pixels before, pixels after, largest jump) along one spatial axis (0: rows, 1: columns)."""
    nodes = list(gm.graph.nodes)
    maps: dict[fx.Node, list[tuple[fx.Node, IndexMap]]] = {}
    jump: dict[fx.Node, Fraction] = {}
    for node in nodes:
        if node.op == "placeholder":
            jump[node] = Fraction(1)
            continue
        if node.op in ("get_attr", "output"):
            continue
        inputs = _input_maps(gm, node, axis)
        maps[node] = inputs
        jumps = {jump[src] * index_map.scale for src, index_map in inputs if src in jump}
        if len(jumps) > 1:
            raise ReceptiveFieldError(f"{node.name} ({node.target}) combines values of different strides {jumps}")
        if jumps:
            jump[node] = jumps.pop()
    (result,) = [n for n in nodes if n.op == "output"]
    reach: dict[fx.Node, tuple[Fraction, Fraction]] = {}
    for src in result.all_input_nodes:
        reach[src] = (Fraction(0), Fraction(0))
    for node in reversed(nodes):
        if node not in reach or node not in maps:
            continue
        low, high = reach[node]
        for src, index_map in maps[node]:
            if src not in jump:
                continue
            candidate = (low + index_map.low * jump[src], high + index_map.high * jump[src])
            old = reach.get(src, candidate)
            reach[src] = (min(old[0], candidate[0]), max(old[1], candidate[1]))
    before = max((-low for low, _ in reach.values()), default=Fraction(0))
    after = max((high + jump[node] - 1 for node, (_, high) in reach.items() if node in jump), default=Fraction(0))
    return max(before, Fraction(0)), max(after, Fraction(0)), max(jump.values())


def _input_maps(gm: fx.GraphModule, node: fx.Node, axis: int) -> list[tuple[fx.Node, IndexMap]]:
    """Which tensor inputs `node` reads, and how its output index maps onto theirs."""
    tensor_args = [a for a in node.all_input_nodes if a.op != "get_attr"]
    if node.op == "call_module":
        module = gm.get_submodule(str(node.target))
        return [(tensor_args[0], _module_map(module, axis))] if tensor_args else []
    if node.op == "call_method":
        if node.target in SHAPE_ONLY_METHODS:
            return []
        if node.target in POINTWISE_METHODS or (node.target == "flip" and _along_channels(node)):
            return [(a, IDENTITY) for a in tensor_args]
        raise ReceptiveFieldError(f"{node.name}: unknown method .{node.target}(); cannot bound its footprint")
    target = node.target
    if target in SHAPE_ONLY_FUNCTIONS:
        return []
    if target in POINTWISE_FUNCTIONS or (target in CHANNEL_FUNCTIONS and _along_channels(node)):
        return [(a, IDENTITY) for a in tensor_args]
    if target is padding.crop_like:  # crops at the bottom/right; the reference gives only a shape
        return [(node.args[0], IDENTITY)] if isinstance(node.args[0], fx.Node) else []
    if target is operator.getitem:
        return _getitem_map(node)
    if target is F.interpolate:
        return [(node.args[0], _interpolate_map(node, axis))]  # type: ignore[list-item]
    if target in (F.max_pool2d, F.avg_pool2d):
        return [(node.args[0], _pool_function_map(node, axis))]  # type: ignore[list-item]
    if target is F.pad:
        pads = node.args[1] if len(node.args) > 1 else node.kwargs["pad"]
        if not all(isinstance(amount, int) for amount in pads):  # type: ignore[union-attr]
            raise ReceptiveFieldError(f"{node.name}: a pad by amounts computed at run time cannot be bounded")
        before = int(pads[2 - 2 * axis]) if len(pads) > 2 - 2 * axis else 0  # type: ignore[index, arg-type]
        return [(node.args[0], IndexMap(Fraction(1), Fraction(-before), Fraction(-before)))]  # type: ignore[list-item]
    raise ReceptiveFieldError(f"{node.name}: unknown function {getattr(target, '__name__', target)}; "
                              "cannot bound its footprint")


def _along_channels(node: fx.Node) -> bool:
    """A softmax or flip over dim 1 only (GraphModel's BGR flip, a softmax head): pointwise in space."""
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", node.kwargs.get("dims"))
    return dims in (1, -3, (1,), [1], (-3,), [-3])


def _module_map(module: nn.Module, axis: int) -> IndexMap:
    if isinstance(module, POINTWISE_MODULES) or (isinstance(module, nn.Softmax) and module.dim == 1):
        return IDENTITY
    if isinstance(module, (nn.Conv2d, nn.MaxPool2d, nn.AvgPool2d)):
        kernel, stride, pad, dilation = (_pair(getattr(module, name, 1))[axis]
                                         for name in ("kernel_size", "stride", "padding", "dilation"))
        if isinstance(module, nn.Conv2d) and module.padding == "same":
            pad = dilation * (kernel - 1) // 2
        return IndexMap(Fraction(stride), Fraction(-pad), Fraction(dilation * (kernel - 1) - pad))
    if isinstance(module, nn.ConvTranspose2d):
        kernel, stride, pad, dilation = (_pair(getattr(module, name))[axis]
                                         for name in ("kernel_size", "stride", "padding", "dilation"))
        return IndexMap(Fraction(1, stride), Fraction(pad - dilation * (kernel - 1), stride), Fraction(pad, stride))
    if isinstance(module, nn.Upsample):
        return _upsample_map(module.scale_factor, module.mode, module.align_corners, axis, str(module))
    raise ReceptiveFieldError(f"module {type(module).__name__} has an unknown or unbounded spatial footprint "
                              "(global pooling, attention?); such a model cannot be tiled exactly")


def _pool_function_map(node: fx.Node, axis: int) -> IndexMap:
    values = dict(zip(("kernel_size", "stride", "padding", "dilation"), node.args[1:]))
    values.update({k: v for k, v in node.kwargs.items() if k in ("kernel_size", "stride", "padding", "dilation")})
    kernel = _pair(values["kernel_size"])[axis]
    stride = _pair(values.get("stride") or values["kernel_size"])[axis]
    pad = _pair(values.get("padding", 0))[axis]
    dilation = _pair(values.get("dilation", 1))[axis]
    return IndexMap(Fraction(stride), Fraction(-pad), Fraction(dilation * (kernel - 1) - pad))


def _interpolate_map(node: fx.Node, axis: int) -> IndexMap:
    kwargs = dict(node.kwargs)
    names = ("size", "scale_factor", "mode", "align_corners")
    kwargs.update({name: value for name, value in zip(names, node.args[1:])})
    if kwargs.get("size") is not None:
        raise ReceptiveFieldError(f"{node.name}: interpolate to a fixed size depends on the image size; "
                                  "use scale_factor to make the model tileable")
    return _upsample_map(kwargs.get("scale_factor"), kwargs.get("mode", "nearest"), kwargs.get("align_corners"),
                         axis, node.name)


def _upsample_map(scale_factor: object, mode: object, align_corners: object, axis: int, where: str) -> IndexMap:
    if scale_factor is None:
        raise ReceptiveFieldError(f"{where}: upsampling without a scale factor cannot be tiled")
    factor = Fraction(_pair(scale_factor)[axis]).limit_denominator(64)  # type: ignore[arg-type]
    if factor.denominator != 1:
        raise ReceptiveFieldError(f"{where}: non-integer scale factor {factor} cannot be tiled")
    if mode == "nearest":
        return IndexMap(1 / factor, -(factor - 1) / factor, Fraction(0))
    if mode in ("bilinear", "linear", "bicubic") and not align_corners:
        taps = 1 if mode != "bicubic" else 2  # neighbours read on each side of the source position
        centre = Fraction(1, 2) / factor - Fraction(1, 2)
        return IndexMap(1 / factor, centre - taps, centre + taps)
    raise ReceptiveFieldError(f"{where}: {mode} upsampling with align_corners={align_corners} cannot be tiled "
                              "exactly (its sampling grid depends on the image size)")


def _getitem_map(node: fx.Node) -> list[tuple[fx.Node, IndexMap]]:
    source, index = node.args[0], node.args[1]
    if not isinstance(source, fx.Node):
        return []
    slices = index if isinstance(index, tuple) else (index,)
    shifts = [s for s in slices if isinstance(s, slice) and s.start not in (None, 0)]
    if shifts:
        raise ReceptiveFieldError(f"{node.name}: a slice starting at {shifts[0].start} shifts the image; "
                                  "cannot tile it exactly")
    return [(source, IDENTITY)]


def _pair(value: object) -> tuple:  # type: ignore[type-arg]
    return tuple(value) if isinstance(value, (tuple, list)) else (value, value)  # type: ignore[arg-type]
