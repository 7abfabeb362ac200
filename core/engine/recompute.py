"""Pass: a skip that is one conv of the input image is recomputed band by band where it is read late.

A ResNet's stem (7x7 conv, stride 2, 64 channels) is also the U-Net's stride-2 skip: held from the
first layer to the last decoder block, it is the largest tensor alive for the whole run (64 MB at
1024x1024, 5x the image). The image itself is held anyway, and one conv of it is cheap beside the
network, so the decoder's banded step reads the image and recomputes the stem's rows for each band
(`Part.producer`); the stem's own output dies as soon as the encoder has read it.
"""
from __future__ import annotations

from torch import fx

from ..model.padding import pad_to_multiple
from .bands import BandedInvertedResidual
from .capture import module_of
from .frontends.ir import check_size
from .fuse import ConvAct
from .virtual import Part

_SAME_IMAGE = (pad_to_multiple, check_size)  # the image, padded or checked: held as long as it is read


def recompute_image_convs(graph_module: fx.GraphModule) -> int:
    """Parts of virtual inputs that are ConvAct(image) with more bytes than the image become producer
    parts reading the image; returns how many."""
    changed = 0
    for node in list(graph_module.graph.nodes):
        module = module_of(graph_module, node)
        if not isinstance(module, BandedInvertedResidual) or module.parts == (Part(),) or module.addend is not None:
            continue
        args, parts = list(node.args), list(module.parts)
        for index, (arg, part) in enumerate(zip(args, parts)):
            producer = module_of(graph_module, arg) if isinstance(arg, fx.Node) and part == Part() else None
            if not isinstance(producer, ConvAct) or not _grows(producer) or not is_image(arg.args[0]):
                continue
            module.producers.append(producer)
            parts[index] = Part(producer=len(module.producers) - 1)
            args[index] = arg.args[0]
            changed += 1
        module.parts = tuple(parts)
        node.args = tuple(args)
    graph_module.graph.eliminate_dead_code()
    graph_module.recompile()
    return changed


def _grows(producer: ConvAct) -> bool:
    """The conv's output holds more bytes than its input (channels per output pixel vs per input pixel)."""
    conv = producer.conv
    return conv.out_channels > conv.in_channels * conv.stride[0] * conv.stride[1]


def is_image(node: object) -> bool:
    """The node is the graph's input image, or it padded or size-checked (held as long as it is read)."""
    while isinstance(node, fx.Node):
        if node.op == "placeholder":
            return True
        if node.op != "call_function" or node.target not in _SAME_IMAGE:
            return False
        node = node.args[0]
    return False
