"""Passes: order the graph so values die sooner.

`full_size_term_first`: a sum of several branches (an FPN's merge) starts from the branch already at the
sum's size and computes it first; the upsampled branches follow, each added into it band by band.
`run_consumers_early`: shape reads and sums run as soon as their inputs exist.

A capture keeps the model's own order. Exported graphs read a tensor's size right where a later
resize needs it (keeping that tensor alive until then), and a sum of branches (an FPN's merge) is
taken after every branch is built, so all of them are alive at once. Moving each such cheap consumer
right after its last input lets the executor's liveness free those tensors at once: a shape read
frees its tensor early, a running sum holds one accumulator instead of every branch.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Callable

import torch
from torch import fx

from .chain import resize_of
from .frontends.ir import dim_size
from .shapes import input_channels, sample_sizes, size_multiple, value_shapes

_SUMS = (operator.add, torch.add)


def run_consumers_early(graph: fx.Graph) -> int:
    """Move dim_size reads and two-tensor adds right after their last input; returns how many moved."""
    position = {node: index for index, node in enumerate(graph.nodes)}
    moved = 0
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        is_size = node.target is dim_size
        is_sum = node.target in _SUMS and len(node.args) == 2 and all(isinstance(a, fx.Node) for a in node.args)
        if not (is_size or is_sum) or not node.all_input_nodes:
            continue
        last_input = max(node.all_input_nodes, key=position.__getitem__)
        if last_input.next is node:
            continue
        last_input.append(node)  # dependencies hold: every input is at or before last_input
        moved += 1
        position = {n: i for i, n in enumerate(graph.nodes)}
    return moved


def full_size_term_first(graph_module: fx.GraphModule) -> int:
    """Sums of three or more branches start from a branch already at the sum's size, computed before the
    others; returns how many sums were reordered.

    An FPN's merge adds four branches, three of them upsampled as their last step. Summed in the model's
    order, the first upsampled branch is built whole as the accumulator while the last branch's convs
    run at full size beside it. Started from the branch that is already full size (computed first, while
    only the pyramid levels are alive), every upsampled branch is added into it band by band and none
    exists whole. Float sums are reassociated: results move by rounding only.
    """
    graph = graph_module.graph
    roots = [node for node in graph.nodes if _is_sum(node) and not any(_chained(node, user) for user in node.users)]
    chains = [(root, terms) for root in roots if len(terms := _terms(root)) >= 3 and _resized(terms[0])]
    if not chains:
        return 0
    try:
        shapes = _sample_shapes(graph_module)
    except Exception:  # a graph meta tensors cannot run: leave it as it is
        return 0
    reordered = 0
    for root, terms in chains:
        base = next((t for t in terms if not _resized(t) and shapes.get(t.name) == shapes.get(root.name)), None)
        if base is None or root.name not in shapes:
            continue
        order = [base] + sorted((t for t in terms if t is not base), key=_latest_input(graph), reverse=True)
        with graph.inserting_before(root):
            total = base
            for term in order[1:]:
                total = graph.call_function(operator.add, (total, term))
        root.replace_all_uses_with(total)
        _erase_chain(graph, root)
        for index, term in enumerate(order[:-1]):
            _hoist_before(graph, _exclusive_ancestors(term), order[index + 1:])
        _shrinking_steps_before(graph, base, order[1:], shapes)
        reordered += 1
    graph_module.recompile()
    return reordered


def _is_sum(node: fx.Node) -> bool:
    return (node.op == "call_function" and node.target in _SUMS and not node.kwargs and len(node.args) == 2
            and all(isinstance(a, fx.Node) for a in node.args))


def _chained(inner: fx.Node, outer: fx.Node) -> bool:
    """`inner` is a partial sum that only `outer` reads."""
    return _is_sum(inner) and _is_sum(outer) and list(inner.users) == [outer]


def _terms(root: fx.Node) -> list[fx.Node]:
    terms: list[fx.Node] = []
    for arg in root.args:
        assert isinstance(arg, fx.Node)
        terms.extend(_terms(arg) if _chained(arg, root) else [arg])
    return terms


def _resized(node: fx.Node) -> bool:
    found = resize_of(node)
    return found is not None and found[1] is None and len(node.users) == 1


def _erase_chain(graph: fx.Graph, root: fx.Node) -> None:
    inner = [a for a in root.args if isinstance(a, fx.Node) and _chained(a, root)]
    graph.erase_node(root)
    for node in inner:
        _erase_chain(graph, node)


def _sample_shapes(graph_module: fx.GraphModule) -> dict[str, tuple[int, ...]]:
    height, width = sample_sizes(graph_module, size_multiple(graph_module) or 32, ((4, 5),))[0]
    return value_shapes(graph_module, (1, input_channels(graph_module), height, width))


def _exclusive_ancestors(node: fx.Node) -> set[fx.Node]:
    """`node` and the computations that only it (through each other) reads."""
    members = {node}
    frontier = [node]
    while frontier:
        for arg in frontier.pop().all_input_nodes:
            if arg.op in ("call_module", "call_function", "call_method") and arg not in members \
                    and all(user in members for user in arg.users):
                members.add(arg)
                frontier.append(arg)
    return members


def _shrinking_steps_before(graph: fx.Graph, base: fx.Node, later: list[fx.Node],
                            shapes: dict[str, tuple[int, ...]]) -> None:
    """The first steps of the `later` branches that hold no more after them than before (a conv narrowing
    a pyramid level it is the last reader of, its norm) run before the base branch's own steps, so the
    narrower values, not the wide ones, sit beside the base's full-size output."""
    position: dict[fx.Node, float] = {node: index for index, node in enumerate(graph.nodes)}
    members = _exclusive_ancestors(base)
    latest = max((position[a] for a in _read_from_outside(members)), default=-1)
    anchor = min((n for n in members if position[n] > latest), key=position.__getitem__)
    for term in later:
        for node in sorted(_exclusive_ancestors(term), key=position.__getitem__):
            if position[node] < position[anchor]:
                continue
            inputs = node.all_input_nodes
            if not all(position[a] < position[anchor] for a in inputs) or node.name not in shapes:
                break
            dying = [a for a in inputs if all(u is node or position[u] < position[anchor] for u in a.users)]
            if _numel(shapes[node.name]) > sum(_numel(shapes.get(a.name, ())) for a in dying):
                break
            anchor.prepend(node)
            position[node] = position[anchor] - 0.5  # before the anchor, after everything placed so far


def _numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape) if shape else 0


def _latest_input(graph: fx.Graph) -> Callable[[fx.Node], int]:
    """Sort key: where the last value a branch reads from outside itself is made. The branch reading the
    newest value goes first (a stack: the pyramid level made last is consumed first, and dies sooner)."""
    position = {node: index for index, node in enumerate(graph.nodes)}

    def latest(term: fx.Node) -> int:
        return max((position[a] for a in _read_from_outside(_exclusive_ancestors(term))), default=-1)
    return latest


def _read_from_outside(members: set[fx.Node]) -> list[fx.Node]:
    """The values `members` read that none of them makes."""
    return [a for n in members for a in n.all_input_nodes if a not in members]


def _hoist_before(graph: fx.Graph, nodes: set[fx.Node], later: list[fx.Node]) -> None:
    """Move `nodes` (in order) to just before the first computation of the `later` terms, where their
    inputs allow."""
    position = {node: index for index, node in enumerate(graph.nodes)}
    others = {n for term in later for n in _exclusive_ancestors(term)}
    anchor = min(others, key=position.__getitem__)
    placed = {n for n in position if position[n] < position[anchor]}
    for node in sorted(nodes, key=position.__getitem__):
        if node in placed:
            continue
        if not all(arg in placed for arg in node.all_input_nodes):
            continue  # something it reads comes later: it stays where it is
        anchor.prepend(node)
        placed.add(node)
