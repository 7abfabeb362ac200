"""Pass: `conv(x) + residual` (then an activation) written straight into the residual's storage.

A ResNet basic block ends in `relu(bn2(conv2(y)) + identity)`: run as written, the conv's output and the
activation's output are each a new full-size map beside the identity. When the identity is read by that
add alone, the conv adds its result into it (one oneDNN call with a sum post-op on the CPU) and the
activation runs in place: the block's output reuses the identity's memory.

A conv with its own activation before the add (LinkNet's decoder: `relu(conv(x)) + skip`) cannot use
the sum post-op (it would add before the activation): it is computed a band of rows at a time and each
band added into the residual, so only a band of its output exists.
"""
from __future__ import annotations

import operator

import torch
from torch import Tensor, fx, nn

from .capture import call_counts, module_of
from .fuse import ACTIVATIONS, ConvAct, activation_kind
from .virtual import produced_rows

_ADDS = (operator.add, torch.add)
BAND_BYTES = 2**20  # an activated conv's output rows computed at a time


class ResidualConv(nn.Module):
    """(x, residual) -> residual + conv(x), then the activation; in the residual's storage when it fits."""

    def __init__(self, conv: ConvAct, activation: str | None) -> None:
        super().__init__()
        self.conv = conv
        self.activation = activation
        self.band_bytes = BAND_BYTES
        self.transient_bytes = 0  # an activated conv's band, added into the residual

    def forward(self, x: Tensor, residual: Tensor) -> Tensor:
        fits = residual.dtype == x.dtype and tuple(residual.shape) == self._output_shape(x)
        if fits and self.conv.activation is not None:
            self._add_bands(x, residual)
            out = residual
        elif residual.is_meta:  # estimate_peak: no new bytes (the conv writes into the residual)
            return residual
        elif fits:
            self.conv.add_into(residual, x)
            out = residual
        else:  # a broadcast residual: plain arithmetic
            out = residual + self.conv(x)
        return ACTIVATIONS[self.activation](out) if self.activation is not None else out

    def _add_bands(self, x: Tensor, residual: Tensor) -> None:
        """residual += activation(conv(x)), a band of about `band_bytes` of output rows at a time."""
        _, channels, height, width = residual.shape
        rows = max(1, min(height, self.band_bytes // max(1, channels * width * residual.element_size())))
        self.transient_bytes = 0
        for top in range(0, height, rows):
            band = produced_rows(x, top, min(height, top + rows), self.conv)
            self.transient_bytes = max(self.transient_bytes, band.untyped_storage().nbytes())
            if not residual.is_meta:
                residual[:, :, top:top + rows] += band

    def _output_shape(self, x: Tensor) -> tuple[int, ...]:
        conv = self.conv.conv
        sizes = [(extent + 2 * int(p) - d * (k - 1) - 1) // s + 1  # type: ignore[call-overload]
                 for extent, k, s, d, p in zip(x.shape[2:], conv.kernel_size, conv.stride, conv.dilation,
                                               conv.padding)]
        return (x.shape[0], conv.out_channels, *sizes)

    def extra_repr(self) -> str:
        return f"activation={self.activation}"


def fuse_residual_convs(graph_module: fx.GraphModule) -> int:
    """Replace add([activation](conv(x)), r) [-> activation], the add r's last reader, by one ResidualConv;
    returns how many."""
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
    return (isinstance(module, ConvAct) and len(node.users) == 1
            and calls[node.target] == 1 and isinstance(module.conv.padding, tuple) and len(node.args) == 1)
