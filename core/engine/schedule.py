"""Pass: order the graph so values die sooner: shape reads and sums run as soon as their inputs exist.

A capture keeps the model's own order. Exported graphs read a tensor's size right where a later
resize needs it (keeping that tensor alive until then), and a sum of branches (an FPN's merge) is
taken after every branch is built, so all of them are alive at once. Moving each such cheap consumer
right after its last input lets the executor's liveness free those tensors at once: a shape read
frees its tensor early, a running sum holds one accumulator instead of every branch.
"""
from __future__ import annotations

import operator

import torch
from torch import fx

from .frontends.ir import dim_size

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
