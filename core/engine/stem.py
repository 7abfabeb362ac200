"""Pass: the network's stem (convs, per-pixel ops and a max pool read straight from the image) runs in
row bands, so only its last, smallest output exists whole.

A ResNet begins with a 7x7 conv at stride 2 to 64 channels, then a 3x3 max pool at stride 2: the conv's
output is 21x the image's bytes, the pool's a quarter of that. Banded, each band of pooled rows computes
the conv rows under its window (fused-layer execution, as the tail chain does) and the full-size conv
output never exists.
"""
from __future__ import annotations

from torch import fx, nn

from .capture import module_of
from .chain import POINTWISE, BandedChain
from .fuse import ConvAct
from .recompute import is_image

_STAGES = (ConvAct, nn.MaxPool2d, *POINTWISE)
STEM_MIN_ROWS = 8  # a band of r pooled rows recomputes about 1/(2r) of its conv rows: few rows cost little


def band_image_stem(graph_module: fx.GraphModule) -> int:
    """Replace the chain of row-local steps that starts at a conv of the image and shrinks back by one
    interior BandedChain; returns its length (0: no such chain)."""
    graph = graph_module.graph
    start = next((n for n in graph.nodes if isinstance(module_of(graph_module, n), ConvAct) and is_image(n.args[0])),
                 None)
    if start is None:
        return 0
    chain = [start]
    while len(chain[-1].users) == 1:
        user = next(iter(chain[-1].users))
        module = module_of(graph_module, user)
        if not isinstance(module, _STAGES) or len(user.args) != 1 or user.kwargs or not _row_local(module):
            break
        chain.append(user)
    modules = [module_of(graph_module, n) for n in chain]
    if not any(isinstance(m, nn.MaxPool2d) for m in modules):
        return 0  # the last output would be as large as the conv's: nothing to gain
    while not isinstance(modules[-1], nn.MaxPool2d):  # end at the pool: the smallest output
        chain.pop()
        modules.pop()
    name = f"{chain[-1].name}_banded_stem"
    banded = BandedChain([m for m in modules if m is not None], [False] * len(modules), crop=False, interior=True)
    banded.min_rows = STEM_MIN_ROWS
    graph_module.add_submodule(name, banded)
    with graph.inserting_after(chain[-1]):
        step = graph.call_module(name, (start.args[0],))
    chain[-1].replace_all_uses_with(step)
    for node in reversed(chain):
        graph.erase_node(node)
    graph_module.delete_all_unused_submodules()
    graph_module.recompile()
    return len(chain)


def _row_local(module: nn.Module | None) -> bool:
    """Each output row reads a window of input rows, padded with the identity the band pads with."""
    if isinstance(module, nn.MaxPool2d):
        return not module.ceil_mode and not module.return_indices
    if isinstance(module, ConvAct):
        return isinstance(module.conv.padding, tuple) and module.conv.padding_mode == "zeros"
    return module is not None
