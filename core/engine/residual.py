"""Pass: `conv(x) + residual` (then an activation) written straight into the residual's storage.

A ResNet basic block ends in `relu(bn2(conv2(y)) + identity)`: run as written, the conv's output and the
activation's output are each a new full-size map beside the identity. When the identity is read by that
add alone, the conv adds its result into it (one oneDNN call with a sum post-op on the CPU) and the
activation runs in place: the block's output reuses the identity's memory.
"""
from __future__ import annotations

import operator

import torch
from torch import Tensor, fx, nn

from .capture import call_counts, module_of
from .fuse import ACTIVATIONS, ConvAct, activation_kind

_ADDS = (operator.add, torch.add)


class ResidualConv(nn.Module):
    """(x, residual) -> residual + conv(x), then the activation; in the residual's storage when it fits."""

    def __init__(self, conv: ConvAct, activation: str | None) -> None:
        super().__init__()
        self.conv = conv
        self.activation = activation

    def forward(self, x: Tensor, residual: Tensor) -> Tensor:
        if residual.is_meta:  # estimate_peak: no new bytes (the conv writes into the residual)
            return residual
        fits = residual.dtype == x.dtype and tuple(residual.shape) == self._output_shape(x)
        if fits:
            self.conv.add_into(residual, x)
            out = residual
        else:  # a broadcast residual: plain arithmetic
            out = residual + self.conv(x)
        return ACTIVATIONS[self.activation](out) if self.activation is not None else out

    def _output_shape(self, x: Tensor) -> tuple[int, ...]:
        conv = self.conv.conv
        sizes = [(extent + 2 * int(p) - d * (k - 1) - 1) // s + 1  # type: ignore[call-overload]
                 for extent, k, s, d, p in zip(x.shape[2:], conv.kernel_size, conv.stride, conv.dilation,
                                               conv.padding)]
        return (x.shape[0], conv.out_channels, *sizes)

    def extra_repr(self) -> str:
        return f"activation={self.activation}"


def fuse_residual_convs(graph_module: fx.GraphModule) -> int:
    """Replace add(conv(x), r) [-> activation], the add r's last reader, by one ResidualConv; returns how many."""
    graph = graph_module.graph
    calls = call_counts(graph_module)
    position = {node: index for index, node in enumerate(graph.nodes)}
    fused = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in _ADDS or len(node.args) != 2 or node.kwargs:
            continue
        operands = [a for a in node.args if isinstance(a, fx.Node)]
        if len(operands) != 2:
            continue
        conv_node = next((a for a in operands if _plain_conv(graph_module, a, calls)), None)
        residual = next((a for a in operands if a is not conv_node), None)
        if conv_node is None or residual is None or residual.op != "call_module" or residual is conv_node.args[0]:
            continue  # (a conv cannot write into the tensor it reads)
        if any(position[user] > position[node] for user in residual.users):
            continue  # read again after the add: its storage is not free to take
        conv = module_of(graph_module, conv_node)
        assert isinstance(conv, ConvAct)
        reader = next(iter(node.users)) if len(node.users) == 1 else None
        kind = activation_kind(graph_module, reader) if reader is not None else None
        name = f"{conv_node.target}_residual".replace(".", "_")
        graph_module.add_submodule(name, ResidualConv(conv, kind))
        with graph.inserting_before(node):
            step = graph.call_module(name, (conv_node.args[0], residual))
        last = reader if kind is not None and reader is not None else node
        last.replace_all_uses_with(step)
        if last is not node:
            graph.erase_node(last)
        graph.erase_node(node)
        graph.erase_node(conv_node)
        fused += 1
    graph_module.delete_all_unused_submodules()
    graph_module.recompile()
    return fused


def _plain_conv(graph_module: fx.GraphModule, node: fx.Node, calls: dict) -> bool:
    module = module_of(graph_module, node)
    return (isinstance(module, ConvAct) and module.activation is None and len(node.users) == 1
            and calls[node.target] == 1 and isinstance(module.conv.padding, tuple) and len(node.args) == 1)
