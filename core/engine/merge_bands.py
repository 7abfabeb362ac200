"""Pass: a conv that reads an FPN merge, upsample(coarse) + conv1x1(skip), builds the merge band by band.

In a feature pyramid each level is `F.interpolate(coarser, scale_factor=2) + lateral_conv(skip)`, read
by the next conv: at stride 4 that merged map (256 channels in smp's FPN) is the largest tensor of the
network, and so are the upsampled map and the lateral conv's output beside it. Run as a banded step,
each band upsamples the coarse rows it needs and the 1x1 conv adds into them: none of the three exists whole.

The same holds for a sum of upsampled maps (smp FPN's merge of its four branches, each upsampled to stride 4):
`acc + upsample(y)` adds the upsampled rows into the sum band by band (in place where the sum dies there).
"""
from __future__ import annotations

import operator

import torch
import torch.nn.functional as F
from torch import Tensor, fx, nn

from .band_pool import row_bands
from .bands import BandedInvertedResidual, _is_pointwise
from .capture import module_of
from .chain import DEFAULT_BAND_BYTES, resize_of
from .fuse import ConvAct
from .layout import CHANNELS_LAST
from .row_resize import Resize
from .virtual import upsample_part

_ADDS = (operator.add, torch.add)
# A merge step's bands are thin: what a band redoes at its edges (the 1x1 lateral conv, the upsampled rows)
# is cheap beside its kxk conv. At smp FPN's stride-4 merge (256 channels, 1024 input) 4-row bands hold
# 5 MB of temporaries where 8-row bands held 8.4 MB, for about 2% more time (2-row bands: +8%).
MERGE_BAND_BYTES = 2**20
MERGE_MIN_ROWS = 4


def band_merge_convs(graph_module: fx.GraphModule) -> int:
    """Replace conv(upsample(a) + conv1x1(b)) by one banded step reading (b, a); returns how many."""
    graph = graph_module.graph
    replaced = 0
    for node in list(graph.nodes):
        conv = module_of(graph_module, node)
        merge = node.args[0] if node.args else None
        if not isinstance(conv, ConvAct) or len(node.args) != 1 or not isinstance(merge, fx.Node):
            continue
        if conv.conv.stride[0] != conv.conv.stride[1] or not isinstance(conv.conv.padding, tuple):
            continue
        if merge.op != "call_function" or merge.target not in _ADDS or len(merge.users) != 1 or merge.kwargs:
            continue
        operands = [a for a in merge.args if isinstance(a, fx.Node)]
        if len(operands) != 2:
            continue
        upsampled = next((a for a in operands if len(a.users) == 1 and upsample_part(a) is not None), None)
        lateral = next((a for a in operands if a is not upsampled), None)
        lateral_conv = module_of(graph_module, lateral) if lateral is not None else None
        if upsampled is None or lateral is None or len(lateral.users) != 1 or not _is_pointwise(lateral_conv):
            continue
        assert isinstance(lateral_conv, ConvAct)
        if lateral_conv.activation is not None or not isinstance(lateral.args[0], fx.Node):
            continue
        banded = BandedInvertedResidual(lateral_conv, conv, None, residual=False)
        banded.addend = upsample_part(upsampled)
        banded.band_bytes, banded.min_rows = MERGE_BAND_BYTES, MERGE_MIN_ROWS
        name = f"{node.target}_merge_banded".replace(".", "_")
        graph_module.add_submodule(name, banded)
        with graph.inserting_after(node):
            step = graph.call_module(name, (lateral.args[0], upsampled.args[0]))
        node.replace_all_uses_with(step)
        graph.erase_node(node)
        replaced += 1
    graph.eliminate_dead_code()
    graph_module.delete_all_unused_submodules()
    graph_module.recompile()
    return replaced


class UpsampleAdd(nn.Module):
    """acc + interpolate(y, scale_factor, mode, align_corners), the resized rows made and added one band
    at a time."""

    def __init__(self, resize: Resize) -> None:
        super().__init__()
        self.resize = resize
        self.band_bytes = DEFAULT_BAND_BYTES
        self.transient_bytes = 0

    def forward(self, acc: Tensor, y: Tensor) -> Tensor:
        return self.forward_in_place(acc.clone(memory_format=CHANNELS_LAST), y)

    def forward_in_place(self, acc: Tensor, y: Tensor) -> Tensor:
        """The sum written into `acc` (which the caller no longer needs)."""
        in_h, in_w = y.shape[2], y.shape[3]
        out_h, out_w = self.resize.output_size(in_h, in_w, None)
        self.transient_bytes = 0
        if acc.dim() != 4 or tuple(acc.shape) != (y.shape[0], y.shape[1], out_h, out_w):
            assert self.resize.scale is not None  # broadcasting: as the graph says, whole
            return acc.add_(F.interpolate(y, scale_factor=self.resize.scale, mode=self.resize.mode,
                                          **({"align_corners": self.resize.align_corners}
                                             if self.resize.mode == "bilinear" else {})))
        rows = max(1, self.band_bytes // max(1, acc.shape[1] * out_w * acc.element_size()))
        for top, bottom in row_bands(out_h, rows):
            first, second, _ = self.resize.source_coordinates(range(top, bottom), in_h, out_h)
            lo, hi = min(first), max(second) + 1
            band = self.resize.rows(y[:, :, lo:hi], lo, range(top, bottom), in_h, out_h, out_w)
            self.transient_bytes = max(self.transient_bytes, band.untyped_storage().nbytes())
            if not acc.is_meta:
                acc[:, :, top:bottom] += band
        return acc

    def extra_repr(self) -> str:
        return repr(self.resize)


def band_upsample_adds(graph_module: fx.GraphModule) -> int:
    """Replace a + interpolate(b, scale) (read only by the add) by one UpsampleAdd step; returns how many."""
    graph = graph_module.graph
    replaced = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in _ADDS or node.kwargs or len(node.args) != 2:
            continue
        operands = [a for a in node.args if isinstance(a, fx.Node)]
        resized = [(a, found[0]) for a in operands if len(a.users) == 1 and (found := resize_of(a)) is not None
                   and found[1] is None and isinstance(a.args[0], fx.Node)]
        if len(operands) != 2 or not resized:
            continue
        upsampled, resize = resized[-1]
        other = next(a for a in operands if a is not upsampled)
        name = f"{node.name}_upsample_add"
        graph_module.add_submodule(name, UpsampleAdd(resize))
        with graph.inserting_after(node):
            step = graph.call_module(name, (other, upsampled.args[0]))
        node.replace_all_uses_with(step)
        graph.erase_node(node)
        replaced += 1
    graph.eliminate_dead_code()
    graph_module.recompile()
    return replaced
