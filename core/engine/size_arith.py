"""Pass: fold the size arithmetic a capture keeps, so pads that are zero at every size disappear.

A U-Net written for any input size pads its upsampled map to the skip's size before concatenating
(`diff = skip.size(2) - up.size(2); F.pad(up, [diff // 2, diff - diff // 2, ...])`, as in
milesial/Pytorch-UNet). torch.export proves both sizes are one symbol and records `s - s`; left as it is,
the graph reads the sizes at run time and copies the upsampled map whole into a pad of zero rows, and
the shape reads keep the conv before them from folding its BatchNorm. Here `a - a` is 0, arithmetic on
constants is done, and a constant pad of zeros is its input.

torch.onnx keeps no such proof: both sizes are read with Shape. A pad whose amounts evaluate to zero at
two input sizes (run on meta tensors) is taken as zero at every size; were it not, the concatenation
after it would meet maps of two sizes and raise, not compute something else.
"""
from __future__ import annotations

import operator
from typing import Any

import torch.nn.functional as F
from torch import fx

from .shapes import sample_sizes, size_multiple, value_ints

_ARITHMETIC = {operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod, operator.neg}


def fold_size_arithmetic(graph_module: fx.GraphModule, in_channels: int) -> int:
    """Replace integer arithmetic whose value is known by the value, and zero pads by their input; returns
    how many pads were removed. The graph is recompiled."""
    graph = graph_module.graph
    for node in list(graph.nodes):
        value = _known_value(node)
        if value is None:
            continue
        for user in list(node.users):
            user.args = _replaced(user.args, node, value)
            user.kwargs = _replaced(user.kwargs, node, value)
        graph.erase_node(node)
    removed = 0
    zero_at_samples = _pads_zero_at_sample_sizes(graph_module, in_channels)
    for node in list(graph.nodes):
        if _is_zero_pad(node) or node in zero_at_samples:
            node.replace_all_uses_with(node.args[0])  # type: ignore[arg-type]
            graph.erase_node(node)
            removed += 1
    graph.eliminate_dead_code()
    graph_module.recompile()
    return removed


def _replaced(argument: Any, node: fx.Node, value: int) -> Any:
    """`argument` (a node's args or kwargs) with `node` replaced by `value` wherever it appears."""
    return fx.node.map_arg(argument, lambda arg: value if arg is node else arg)  # type: ignore[return-value]


def _known_value(node: fx.Node) -> int | None:
    if node.op != "call_function" or node.target not in _ARITHMETIC or node.kwargs:
        return None
    args = node.args
    if node.target is operator.sub and len(args) == 2 and isinstance(args[0], fx.Node) and args[0] is args[1]:
        return 0
    if all(isinstance(arg, int) and not isinstance(arg, bool) for arg in args):
        try:
            return int(node.target(*args))  # type: ignore[operator]
        except ZeroDivisionError:
            return None
    return None


def _is_zero_pad(node: fx.Node) -> bool:
    if node.op != "call_function" or node.target is not F.pad or len(node.args) < 2:
        return False
    amounts: Any = node.args[1]
    return (_mode(node) == "constant" and isinstance(node.args[0], fx.Node) and isinstance(amounts, (list, tuple))
            and all(isinstance(a, int) and a == 0 for a in amounts))


def _pads_zero_at_sample_sizes(graph_module: fx.GraphModule, in_channels: int) -> set[fx.Node]:
    """Constant pads computed at run time whose every amount is 0 at both sample sizes."""
    pads = [n for n in graph_module.graph.nodes if n.op == "call_function" and n.target is F.pad
            and not _is_zero_pad(n) and _mode(n) == "constant" and isinstance(n.args[1], (list, tuple))]
    multiple = size_multiple(graph_module)
    if not pads or multiple is None:
        return set()
    try:
        runs = [value_ints(graph_module, (1, in_channels, height, width))
                for height, width in sample_sizes(graph_module, multiple)]
    except Exception:  # a graph meta tensors cannot run: leave its pads as they are
        return set()

    def zero(amount: Any) -> bool:
        if isinstance(amount, fx.Node):
            return all(run.get(amount.name) == 0 for run in runs)
        return isinstance(amount, int) and amount == 0

    return {n for n in pads if all(zero(a) for a in n.args[1])}


def _mode(node: fx.Node) -> Any:
    return node.kwargs.get("mode", node.args[2] if len(node.args) > 2 else "constant")
