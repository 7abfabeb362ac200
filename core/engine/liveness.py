"""Pass: liveness over the graph: which values die after each node, and which sums and products may
overwrite an operand."""
from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, fx

IN_PLACE_OPS: dict[Any, Callable[[Tensor, Tensor], Tensor]] = {
    operator.add: Tensor.add_, torch.add: Tensor.add_, operator.mul: Tensor.mul_, torch.mul: Tensor.mul_,
}


def values_dying_after(graph: fx.Graph) -> dict[fx.Node, list[fx.Node]]:
    """node -> the values whose last reader is that node (free them right after it runs).

    A value nobody reads dies right after the node that made it. Values the output reads never die.
    """
    dying: dict[fx.Node, list[fx.Node]] = {node: [] for node in graph.nodes}
    seen: set[fx.Node] = set()
    for node in reversed(list(graph.nodes)):
        if node.op == "output":
            seen.update(node.all_input_nodes)
            continue
        for value in node.all_input_nodes:
            if value not in seen:
                seen.add(value)
                dying[node].append(value)
        if not node.users and node not in seen:
            dying[node].append(node)
    return dying


def in_place_operands(node: fx.Node, dying: list[fx.Node]) -> tuple[int, ...]:
    """For `a + b` or `a * b`: the argument indices, in order of preference, whose value dies at this
    node, so the result may overwrite it (a sum of residuals, a squeeze-excitation gate times its map).

    `write_in_place` checks at run time that the operand's storage is not shared and that its shape
    and dtype are the result's (a (1, C, 1, 1) gate cannot hold the gated map; the map can).
    """
    if node.op != "call_function" or node.target not in IN_PLACE_OPS:
        return ()
    if len(node.args) != 2 or node.kwargs:
        return ()
    return tuple(index for index, operand in enumerate(node.args)
                 if isinstance(operand, fx.Node) and operand in dying and node.args.count(operand) == 1)


def write_in_place(node: fx.Node, args: Any, operands: tuple[int, ...],
                   may_overwrite: Callable[[Tensor], bool]) -> Tensor | None:
    """`node`'s sum or product written into the first of `operands` that can hold it; None if none can."""
    for index in operands:
        target, other = args[index], args[1 - index]
        if (isinstance(target, Tensor) and isinstance(other, Tensor) and target.dtype == other.dtype
                and target.shape == torch.broadcast_shapes(target.shape, other.shape) and may_overwrite(target)):
            return IN_PLACE_OPS[node.target](target, other)
    return None


def shape_of(value: torch.Tensor) -> torch.Tensor:
    """A stand-in with `value`'s shape and device but one byte of storage: an expanded uint8 scalar.

    Not floating point, so the executor never makes it channels_last (which would materialise it).
    """
    return torch.empty((), dtype=torch.uint8, device=value.device).expand(value.shape)


def free_shape_only_reads(graph: fx.Graph, shape_readers: tuple[object, ...], argument: int = 1) -> int:
    """Give each `shape_readers` call (e.g. crop_like(y, reference)) a shape stand-in of its reference.

    The reference (often the network's input) would otherwise stay alive until that late reader;
    with the stand-in made right after it, it dies after its last real reader. Returns the count.
    """
    count = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in shape_readers or len(node.args) <= argument:
            continue
        reference = node.args[argument]
        if not isinstance(reference, fx.Node) or len(reference.users) < 2:
            continue
        with graph.inserting_after(reference):
            stand_in = graph.call_function(shape_of, (reference,))
        node.update_arg(argument, stand_in)
        count += 1
    graph.lint()
    return count
