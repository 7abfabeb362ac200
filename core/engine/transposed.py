"""Transposed convolutions (a U-Net's learned "up-conv") as engine steps: fused with their activation, and
able to compute any band of their output rows from the input rows under it, so a banded step that reads
one (through a virtual concatenation) never needs its full-size output.

Output row y of a transposed conv (stride s, padding p, kernel k, dilation d) sums input rows i with
y = i * s - p + j * d for some tap j: the rows [ceil((y + p - d (k - 1)) / s), floor((y + p) / s)].
"""
from __future__ import annotations

import math
from functools import partial
from typing import cast

import torch.nn.functional as F
from torch import Tensor, fx, nn

from .capture import call_counts, module_of
from .fuse import ACTIVATIONS, absorb_activation
from .layout import CHANNELS_LAST


class TransposedConvAct(nn.Module):
    """ConvTranspose2d followed by an in-place activation (or none): one step, one output tensor."""

    def __init__(self, conv: nn.ConvTranspose2d, activation: str | None) -> None:
        super().__init__()
        if activation is not None and activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; valid: {', '.join(ACTIVATIONS)}")
        self.conv = conv
        self.activation = activation

    def forward(self, x: Tensor) -> Tensor:
        return self._activate(self.conv(x))

    def output_size(self, height: int, width: int) -> tuple[int, int]:
        sizes = []
        for axis, extent in enumerate((height, width)):
            stride, pad, dilation = self.conv.stride[axis], self._padding[axis], self.conv.dilation[axis]
            span = dilation * (self.conv.kernel_size[axis] - 1)
            sizes.append((extent - 1) * stride - 2 * pad + span + 1 + self.conv.output_padding[axis])
        return sizes[0], sizes[1]

    def source_rows(self, first: int, last: int, height: int) -> tuple[int, int]:
        """Input rows [top, bottom) that output rows [first, last) read."""
        stride, pad = self.conv.stride[0], self._padding[0]
        span = self.conv.dilation[0] * (self.conv.kernel_size[0] - 1)
        return max(0, math.ceil((first + pad - span) / stride)), min(height, (last - 1 + pad) // stride + 1)

    def rows(self, source: Tensor, first: int, last: int) -> Tensor:
        """Output rows [first, last) of self(source), from the source rows under them only."""
        conv = self.conv
        top, bottom = self.source_rows(first, last, source.shape[2])
        width = self.output_size(source.shape[2], source.shape[3])[1]
        if source.is_meta:
            return source.new_empty((1, conv.out_channels, last - first, width))
        # Rows [lo, hi) of the band's own transposed conv (no row padding: the band's first row is row 0)
        lo = first + self._padding[0] - top * conv.stride[0]
        hi = lo + last - first
        if bottom > top:
            band = F.conv_transpose2d(source[:, :, top:bottom], conv.weight, None, conv.stride, (0, self._padding[1]),
                                      (0, conv.output_padding[1]), conv.groups, conv.dilation)
        else:  # rows between the input rows' reach (a kernel smaller than its stride): bias alone
            band, lo, hi = source.new_zeros((1, conv.out_channels, last - first, width)), 0, last - first
        if lo < 0 or hi > band.shape[2]:  # rows no input row reaches (a kernel smaller than its stride)
            band = F.pad(band, (0, 0, max(0, -lo), max(0, hi - band.shape[2])))
            lo, hi = lo + max(0, -lo), hi + max(0, -lo)
        band = band[:, :, lo:hi]
        if conv.bias is not None:
            band = band + conv.bias.view(1, -1, 1, 1)
        return self._activate(band.contiguous(memory_format=CHANNELS_LAST))

    @property
    def _padding(self) -> tuple[int, int]:
        return cast(tuple[int, int], self.conv.padding)

    def _activate(self, y: Tensor) -> Tensor:
        if self.activation is None or y.is_meta:
            return y
        return ACTIVATIONS[self.activation](y)

    def extra_repr(self) -> str:
        return f"activation={self.activation}"


def fuse_transposed_convs(graph_module: fx.GraphModule) -> int:
    """Replace each 2-D ConvTranspose2d (called once, zero padding) and the activation that is its only
    reader by one TransposedConvAct; returns how many were replaced."""
    replaced = 0
    calls = call_counts(graph_module)
    for node in list(graph_module.graph.nodes):
        conv = module_of(graph_module, node)
        if not isinstance(conv, nn.ConvTranspose2d) or calls[node.target] > 1 or conv.padding_mode != "zeros":
            continue
        absorb_activation(graph_module, node, partial(TransposedConvAct, conv))
        replaced += 1
    graph_module.graph.eliminate_dead_code()
    graph_module.delete_all_unused_submodules()
    graph_module.recompile()
    return replaced
