"""Pass: static facts about the captured graph's shapes, read by running it on meta tensors.

`value_shapes` runs a meta copy of the graph (shapes only, no arithmetic) and records every node's
output shape. `sizes_to_scales` uses two runs at different sizes to turn resizes to a size read from
another tensor (`F.interpolate(x, size=(dim_size(skip, 2), dim_size(skip, 3)))`, how smp's U-Net and
many exported graphs upsample) into the integer scale they always are, so the passes that build
upsampled rows band by band (virtual concatenations, banded chains) recognise them.
"""
from __future__ import annotations

import copy
import itertools
from typing import Any, TypeVar

import torch
import torch.nn.functional as F
from torch import fx, nn

from ..model.padding import pad_to_multiple
from .frontends.ir import dim_size

ModuleT = TypeVar("ModuleT", bound=nn.Module)


class _ShapeRecorder(fx.Interpreter):
    def __init__(self, module: fx.GraphModule) -> None:
        super().__init__(module)
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.ints: dict[str, int] = {}  # nodes computing a Python int (size arithmetic)

    def run_node(self, n: fx.Node) -> Any:
        value = super().run_node(n)
        if isinstance(value, torch.Tensor):
            self.shapes[n.name] = tuple(int(d) for d in value.shape)
        elif isinstance(value, int) and not isinstance(value, bool):
            self.ints[n.name] = value
        return value


def value_shapes(graph_module: fx.GraphModule, input_shape: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
    """node name -> output shape for one input shape (meta tensors: nothing computed, nothing allocated)."""
    return _record(graph_module, input_shape).shapes


def value_ints(graph_module: fx.GraphModule, input_shape: tuple[int, ...]) -> dict[str, int]:
    """node name -> value, for the nodes computing an int (sizes and their arithmetic), at one input shape."""
    return _record(graph_module, input_shape).ints


def meta_copy(module: ModuleT) -> ModuleT:
    """A copy of the graph (or any module) whose weights are meta tensors, made without copying the real weights
    first (a 31M-parameter U-Net's 124 MB were copied twice per shape pass)."""
    memo: dict[int, Any] = {}
    for tensor in itertools.chain(module.parameters(), module.buffers()):
        meta = torch.empty_like(tensor, device="meta")
        memo[id(tensor)] = nn.Parameter(meta, tensor.requires_grad) if isinstance(tensor, nn.Parameter) else meta
    return copy.deepcopy(module, memo).to("meta")  # .to: any tensor held outside parameters and buffers


def _record(graph_module: fx.GraphModule, input_shape: tuple[int, ...]) -> _ShapeRecorder:
    recorder = _ShapeRecorder(meta_copy(graph_module))
    with torch.inference_mode():
        recorder.run(torch.empty(input_shape, device="meta"))
    return recorder


# Two input sizes (multiples of the graph's size multiple: rows x columns) that a fact about sizes must hold at.
SAMPLE_MULTIPLES = ((3, 5), (7, 4))


def size_multiple(graph_module: fx.GraphModule) -> int | None:
    """The multiple the graph pads its input to (a pad_to_multiple node), else None."""
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and node.target is pad_to_multiple and isinstance(node.args[1], int):
            return int(node.args[1])
    return None


def sample_sizes(graph_module: fx.GraphModule, multiple: int,
                 pairs: tuple[tuple[int, int], ...] = SAMPLE_MULTIPLES) -> list[tuple[int, int]]:
    """Input sizes (height, width), multiples of `multiple` (`pairs` of them: two, for facts that must hold at
    every size), grown until their sides reach the graph's minimum size, if it pads to one (below it both
    would be padded to the same side, and the second size would prove nothing). They grow by multiples of
    32 multiples, so that every halving of the map down to 1/32 keeps their odd and even sides (scaled, an
    odd side would become even, and a resize that holds at even sizes only would pass as a scale)."""
    rows, cols = (min(pair[axis] for pair in pairs) for axis in (0, 1))
    min_h, min_w = size_minimum(graph_module)
    steps = max(0, -(-(min_h // multiple - rows) // 32), -(-(min_w // multiple - cols) // 32))
    return [((h + 32 * steps) * multiple, (w + 32 * steps) * multiple) for h, w in pairs]


def size_minimum(graph_module: fx.GraphModule) -> tuple[int, int]:
    """The smallest height and width the graph pads its input up to (pad_to_multiple's minimum), else 0s."""
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and node.target is pad_to_multiple and len(node.args) > 2 \
                and isinstance(node.args[2], (tuple, list)):
            return int(node.args[2][0]), int(node.args[2][1])
    return 0, 0


def input_channels(graph_module: fx.GraphModule) -> int:
    """The channels the graph's first convolution takes (3 when none is found)."""
    for module in graph_module.modules():
        if isinstance(module, torch.nn.Conv2d):
            return int(module.in_channels)
    return 3


def sizes_to_scales(graph_module: fx.GraphModule, in_channels: int) -> int:
    """Resizes to a size read with dim_size that is the same integer multiple of their input at every
    size become scale_factor resizes; returns how many changed. Needs a pad_to_multiple node."""
    multiple = size_multiple(graph_module)
    resizes = [n for n in graph_module.graph.nodes if n.op == "call_function" and n.target is F.interpolate
               and isinstance(n.kwargs.get("size"), (tuple, list)) and len(n.args) == 1
               and all(isinstance(s, fx.Node) and s.target is dim_size for s in n.kwargs["size"])]
    if multiple is None or not resizes:
        return 0
    try:
        runs = [value_shapes(graph_module, (1, in_channels, height, width))
                for height, width in sample_sizes(graph_module, multiple)]
    except Exception:  # a graph meta tensors cannot run: leave it as it is
        return 0
    changed = 0
    for node in resizes:
        source = node.args[0]
        assert isinstance(source, fx.Node)
        ratios = set()
        for shapes in runs:
            if node.name not in shapes or source.name not in shapes:
                break
            (_, _, in_h, in_w), (_, _, out_h, out_w) = shapes[source.name], shapes[node.name]
            ratios.add((out_h / in_h, out_w / in_w))
        if len(ratios) != 1:
            continue
        scale_h, scale_w = ratios.pop()
        if scale_h != scale_w or scale_h != int(scale_h) or scale_h < 1:
            continue
        kwargs = dict(node.kwargs)
        kwargs["size"], kwargs["scale_factor"] = None, float(scale_h)
        node.kwargs = kwargs
        changed += 1
    graph_module.graph.eliminate_dead_code()
    graph_module.recompile()
    return changed


def warm_meta_kernels() -> None:
    """Run a convolution and a concatenation on meta tensors once.

    Plan.estimate_peak runs the plan on meta tensors (shapes only); torch's meta kernels import its
    symbolic-shape and dynamo machinery on first use, about two seconds on two cores. Called with the model
    load, so that cost is not billed to the first image."""
    x = torch.empty((1, 1, 4, 4), device="meta")
    torch.cat([F.conv2d(x, torch.empty((1, 1, 3, 3), device="meta"), padding=1), x], dim=1)
