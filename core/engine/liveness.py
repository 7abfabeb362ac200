"""Pass: liveness over the graph: which values die after each node, and which adds may run in place."""
from __future__ import annotations

import operator

import torch
from torch import fx

IN_PLACE_ADD_TARGETS = (operator.add, torch.add)


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


def in_place_add_operand(node: fx.Node, dying: list[fx.Node]) -> int | None:
    """For `a + b` where a (or b) dies at this node: the argument index the sum may overwrite.

    The executor still checks at run time that the operand's storage is not shared and its shape
    and dtype equal the result's; the left operand is preferred.
    """
    if node.op != "call_function" or node.target not in IN_PLACE_ADD_TARGETS:
        return None
    if len(node.args) != 2 or node.kwargs:
        return None
    for index, operand in enumerate(node.args):
        if isinstance(operand, fx.Node) and operand in dying and node.args.count(operand) == 1:
            return index
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
