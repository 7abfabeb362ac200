"""Passes that shrink the graph: fold BatchNorm into convolutions, drop identities and dropout; and one that
evens it out: nn.Upsample modules become the F.interpolate calls the front ends make."""
from __future__ import annotations

from typing import Any

import torch.nn.functional as F
from torch import fx, nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from .capture import call_counts, module_of, replace_submodule

_NO_OPS = (nn.Identity, nn.Dropout, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout)


def fold_batchnorm(graph_module: fx.GraphModule) -> int:
    """Fold every BatchNorm2d that reads only a Conv2d's (or ConvTranspose2d's) output into that conv's weight
    and bias.

    conv(x) -> bn  becomes  conv'(x) with w' = w * g / sqrt(v + eps), b' = (b - m) * g / sqrt(v + eps) + beta.
    Returns the number of BatchNorms folded; the graph is recompiled.
    """
    folded = 0
    calls = call_counts(graph_module)
    for node in list(graph_module.graph.nodes):
        bn = module_of(graph_module, node)
        if not isinstance(bn, nn.BatchNorm2d) or not bn.track_running_stats:
            continue
        source = node.args[0]
        if not isinstance(source, fx.Node) or list(source.users) != [node]:
            continue
        conv = module_of(graph_module, source)
        if not isinstance(conv, (nn.Conv2d, nn.ConvTranspose2d)) or calls[source.target] > 1 or calls[node.target] > 1:
            continue  # shared weights: folding would change the other call
        assert isinstance(source.target, str)
        transpose = isinstance(conv, nn.ConvTranspose2d)  # its weight is (in, out / groups, kh, kw)
        if transpose and conv.groups != 1:
            continue  # torch's folding scales the weight's dim 1 as if it held every output channel
        replace_submodule(graph_module, source.target, fuse_conv_bn_eval(conv.eval(), bn.eval(), transpose=transpose))
        node.replace_all_uses_with(source)
        graph_module.graph.erase_node(node)
        folded += 1
    _finish(graph_module)
    return folded


def remove_no_ops(graph_module: fx.GraphModule) -> int:
    """Drop nn.Identity and (eval-mode) dropout nodes; returns how many were removed."""
    removed = 0
    for node in list(graph_module.graph.nodes):
        if isinstance(module_of(graph_module, node), _NO_OPS) and isinstance(node.args[0], fx.Node):
            node.replace_all_uses_with(node.args[0])
            graph_module.graph.erase_node(node)
            removed += 1
    _finish(graph_module)
    return removed


def upsample_modules_to_calls(graph_module: fx.GraphModule) -> int:
    """nn.Upsample nodes (a traced nn.Module's) become the F.interpolate calls a `.pt2` or `.onnx` lifts to,
    so the passes that build upsampled rows band by band see one form; returns how many."""
    changed = 0
    for node in list(graph_module.graph.nodes):
        module = module_of(graph_module, node)
        if not isinstance(module, nn.Upsample) or len(node.args) != 1 or node.kwargs:
            continue
        kwargs: dict[str, Any] = {"mode": module.mode}
        if module.size is not None:
            kwargs["size"] = module.size
        else:
            kwargs["scale_factor"] = module.scale_factor
        if module.mode in ("linear", "bilinear", "bicubic", "trilinear"):
            kwargs["align_corners"] = bool(module.align_corners)
        with graph_module.graph.inserting_after(node):
            call = graph_module.graph.call_function(F.interpolate, node.args, kwargs)
        node.replace_all_uses_with(call)
        graph_module.graph.erase_node(node)
        changed += 1
    _finish(graph_module)
    return changed


def _finish(graph_module: fx.GraphModule) -> None:
    graph_module.graph.eliminate_dead_code()
    graph_module.delete_all_unused_submodules()
    graph_module.recompile()
