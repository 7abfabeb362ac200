"""compile(model) -> Plan: capture the graph, run the passes, place it on the device."""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import fx, nn

from ..model.padding import crop_like, pad_to_multiple
from .bands import BandedInvertedResidual, band_concat_convs, band_upsampled_convs, split_inverted_residuals
from .budget import apply_memory_budget, band_modules
from .capture import CaptureError, capture
from .chain import BandedChain, banded_tail
from .fold import fold_batchnorm, remove_no_ops, upsample_modules_to_calls
from .frontends.channel_norm import ChannelLayerNorm
from .frontends.ir import IR_FUNCTIONS, check_size
from .frontends.spelled_out import lift_spelled_out_activations
from .fuse import ConvAct, fuse_conv_activation
from .groupnorm import GroupNormAct, fuse_groupnorm_activation
from .head import LabelsHead, labels_head
from .layout import to_channels_last
from .liveness import free_shape_only_reads, shape_of
from .merge_bands import UpsampleAdd, band_merge_convs, band_upsample_adds
from .plan import Plan
from .recompute import recompute_image_convs
from .residual import ResidualConv, fuse_residual_convs
from .schedule import full_size_term_first, run_consumers_early
from .shapes import input_channels, sizes_to_scales, warm_meta_kernels
from .size_arith import fold_size_arithmetic
from .stem import band_image_stem
from .transposed import TransposedConvAct, fuse_transposed_convs
from .virtual import fuse_concat_inputs

DTYPES = (torch.float32, torch.bfloat16, torch.float16)

# Nodes the engine knows the memory behaviour of; anything else runs as a plain eager call.
_KNOWN_MODULES = (ConvAct, TransposedConvAct, BandedInvertedResidual, LabelsHead, BandedChain, ResidualConv,
                  GroupNormAct, UpsampleAdd, nn.BatchNorm2d, nn.ReLU, nn.ReLU6, nn.Hardtanh,
                  nn.Hardswish, nn.SiLU, nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d, nn.Upsample,
                  nn.Hardsigmoid, nn.Sigmoid, nn.GELU, nn.GroupNorm, nn.Softmax, nn.LeakyReLU, ChannelLayerNorm)
_KNOWN_FUNCTIONS = IR_FUNCTIONS | {torch.add, torch.mul, F.max_pool2d, F.avg_pool2d, F.relu, F.relu6, F.hardswish,
                                   F.silu, torch.relu, torch.sigmoid, crop_like, pad_to_multiple, shape_of}


def compile(model: nn.Module, *, device: torch.device | str, dtype: torch.dtype = torch.float32,
            memory_budget: int | None = None, bands: bool = True, head: bool = True) -> Plan:
    """A Plan that runs `model` (eval, traceable by torch.fx) with the lean passes applied.

    `bands` / `head` switch the row-band passes off (for comparison); `memory_budget` (bytes) bounds
    the peak by choosing band sizes. A model fx cannot trace runs eagerly as one step (the plan says so).
    """
    if dtype not in DTYPES:
        raise ValueError(f"unsupported dtype {dtype}; valid: {', '.join(str(d) for d in DTYPES)}")
    if memory_budget is not None and memory_budget <= 0:
        raise ValueError(f"memory_budget must be positive bytes, got {memory_budget}")
    device = torch.device(device)
    warm_meta_kernels()  # else the first image pays torch's one-time imports for shape-only runs (2 s here)
    try:
        graph_module = capture(model)
    except CaptureError as err:
        eager = copy.deepcopy(model).eval().to(device, dtype)  # the caller's model stays as it is
        return Plan(None, eager, device=device, dtype=dtype, notes=[str(err)], fallbacks=["<whole model>"])
    channels = input_channels(graph_module)
    notes = [
        f"removed {remove_no_ops(graph_module)} identity/dropout nodes",
        f"{upsample_modules_to_calls(graph_module)} nn.Upsample modules read as F.interpolate calls",
        f"removed {fold_size_arithmetic(graph_module, channels)} pads that are zero at every size",
        f"{sizes_to_scales(graph_module, channels)} resizes to another tensor's size are "
        "integer scales",
        f"{lift_spelled_out_activations(graph_module)} spelled-out activations (x * sigmoid(x)) made one module",
        f"folded {fold_batchnorm(graph_module)} BatchNorm layers into convolutions",
        f"fused {fuse_conv_activation(graph_module)} conv + activation pairs",
        f"{fuse_transposed_convs(graph_module)} transposed convs (learned upsampling) known to the engine",
        f"{free_shape_only_reads(graph_module.graph, (crop_like,))} crops read their reference's shape only",
        f"{full_size_term_first(graph_module)} sums of branches start from a full-size branch, computed first",
        f"{run_consumers_early(graph_module.graph)} shape reads and sums moved next to their inputs",
    ]
    graph_module.recompile()
    if bands:
        notes.append(f"{split_inverted_residuals(graph_module)} inverted-residual blocks run in row bands")
        notes.append(f"{band_concat_convs(graph_module)} convs over a concatenation run in row bands")
        notes.append(f"{band_merge_convs(graph_module)} convs over an FPN merge (upsample + 1x1 conv) run in row bands")
        notes.append(f"{band_upsample_adds(graph_module)} sums with an upsampled map add its rows band by band")
        fused = fuse_concat_inputs(graph_module, (BandedInvertedResidual,))
        notes.append(f"{fused} concatenations (and their upsampling) made virtual: built band by band")
        notes.append(f"{recompute_image_convs(graph_module)} skips that are one conv of the image recomputed per band")
        notes.append(f"stem: {band_image_stem(graph_module)} steps from the image to its first pool in row bands")
    notes.append(f"{fuse_residual_convs(graph_module)} conv + residual adds written into the residual")
    notes.append(f"{fuse_groupnorm_activation(graph_module)} GroupNorm (+ activation) steps normalise in place")
    if head:  # a tail of two or more convs runs as one chain; else a 1x1 head alone; else any chain
        stages = banded_tail(graph_module, min_convs=2)
        if not stages and labels_head(graph_module):
            notes.append("labels-out head: argmax per band")
        else:
            stages = stages or banded_tail(graph_module)
            notes.append(f"labels-out tail: {stages} stages (convs, resizes, per-pixel ops) in row bands, argmax per "
                         "band" if stages else "no labels-out head: argmax over full logits")
    if bands:
        wrapped = band_upsampled_convs(graph_module)
        fuse_concat_inputs(graph_module, (BandedInvertedResidual,), lone_upsample=True)
        notes.append(f"{wrapped} convs over an upsampled map (nn.Upsample -> conv) run in row bands")
    graph_module.to(device=device, dtype=dtype)
    notes.append(f"{to_channels_last(graph_module)} weights stored channels_last")
    for module in band_modules(graph_module):
        module.parallel_bands = device.type == "cpu"
    if memory_budget is not None:
        notes.append(apply_memory_budget(graph_module, memory_budget))
    guarded = _has_size_check(graph_module) and not any(_has_size_check(m) for m in model.modules()
                                                         if isinstance(m, fx.GraphModule))  # ours, not the file's
    if guarded:
        notes.append("the capture holds for some input sizes only (the model branches on its size): "
                     "other sizes run eagerly")
    size_fallback = copy.deepcopy(model).eval().to(device, dtype) if guarded else None
    return Plan(graph_module, size_fallback, device=device, dtype=dtype, notes=notes,
                fallbacks=unknown_nodes(graph_module))


def _has_size_check(graph_module: fx.GraphModule) -> bool:
    return any(node.target is check_size for node in graph_module.graph.nodes)


def unknown_nodes(graph_module: fx.GraphModule) -> list[str]:
    """Names of the nodes the engine runs as plain eager calls (memory behaviour not modelled)."""
    names = []
    for node in graph_module.graph.nodes:
        if node.op == "call_module" and not isinstance(graph_module.get_submodule(node.target), _KNOWN_MODULES):
            names.append(f"{node.target} ({type(graph_module.get_submodule(node.target)).__name__})")
        elif node.op == "call_function" and node.target not in _KNOWN_FUNCTIONS:
            names.append(f"{node.name} ({getattr(node.target, '__name__', node.target)})")
        elif node.op == "call_method":
            names.append(f"{node.name} (.{node.target})")
    return names
