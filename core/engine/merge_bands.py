"""Pass: a conv that reads an FPN merge, upsample(coarse) + conv1x1(skip), builds the merge band by band.

In a feature pyramid each level is `F.interpolate(coarser, scale_factor=2) + lateral_conv(skip)`, read
by the next conv: at stride 4 that merged map (256 channels in smp's FPN) is the largest tensor of the
network, and so are the upsampled map and the lateral conv's output beside it. Run as a banded step,
each band upsamples the coarse rows it needs and the 1x1 conv adds into them: none of the three exists whole.
"""
from __future__ import annotations

import operator

import torch
from torch import fx

from .bands import BandedInvertedResidual, _is_pointwise
from .capture import module_of
from .fuse import ConvAct
from .virtual import upsample_part

_ADDS = (operator.add, torch.add)


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
