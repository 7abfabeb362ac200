"""Pass: fuse a convolution with the activation that follows it (the activation runs in place)."""
from __future__ import annotations

import operator
from collections.abc import Callable
from functools import partial

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, fx, nn

from .capture import call_counts, module_of, replace_submodule, single_user

Activation = Callable[[Tensor], Tensor]


def _relu(x: Tensor) -> Tensor:
    return x.clamp_min_(0.0)


def _relu6(x: Tensor) -> Tensor:
    return x.clamp_(0.0, 6.0)


def _hardswish(x: Tensor) -> Tensor:
    return F.hardswish(x, inplace=True)


def _silu(x: Tensor) -> Tensor:
    return F.silu(x, inplace=True)


LEAKY_SLOPE = 0.01  # PyTorch's default and nnU-Net's: the LeakyReLU fused; other slopes run as their own step


def _leaky_relu(x: Tensor) -> Tensor:
    return F.leaky_relu(x, LEAKY_SLOPE, inplace=True)


ACTIVATIONS: dict[str, Activation] = {"relu": _relu, "relu6": _relu6, "hardswish": _hardswish, "silu": _silu,
                                      "leaky_relu": _leaky_relu}


def activation_kind(graph_module: fx.GraphModule, node: fx.Node) -> str | None:
    """'relu' | 'relu6' | 'hardswish' | 'silu' | 'leaky_relu' (slope 0.01) when `node` is that activation
    (module or function)."""
    module = module_of(graph_module, node)
    if isinstance(module, nn.ReLU6) or (isinstance(module, nn.Hardtanh) and (module.min_val, module.max_val) == (0, 6)):
        return "relu6"
    if isinstance(module, nn.ReLU):
        return "relu"
    if isinstance(module, nn.Hardswish):
        return "hardswish"
    if isinstance(module, nn.SiLU):
        return "silu"
    if isinstance(module, nn.LeakyReLU) and np.float32(module.negative_slope) == np.float32(LEAKY_SLOPE):
        return "leaky_relu"  # compared as the float32 the kernels use: ONNX stores 0.01 as float32
    if node.op == "call_function" and node.target in (F.relu, torch.relu) and len(node.args) == 1:
        return "relu"
    if node.op == "call_function" and node.target is F.relu6 and len(node.args) == 1:
        return "relu6"
    if node.op == "call_function" and node.target is F.silu and len(node.args) == 1:
        return "silu"
    if node.op == "call_function" and node.target is F.hardswish and len(node.args) == 1:
        return "hardswish"
    return None


# oneDNN's conv with a fused post-op, as torch.compile's CPU backend uses it; None where absent.
_ONEDNN_POINTWISE = getattr(getattr(torch.ops, "mkldnn", None), "_convolution_pointwise", None) \
    if torch.backends.mkldnn.is_available() else None
_ONEDNN_ADD_INTO = getattr(getattr(torch.ops, "mkldnn", None), "_convolution_pointwise_", None) \
    if torch.backends.mkldnn.is_available() else None
if _ONEDNN_ADD_INTO is not None:
    _ONEDNN_ADD_INTO = _ONEDNN_ADD_INTO.binary
# oneDNN's bf16 convolutions need AVX512-BF16 or AMX; on other CPUs the fused call raises, so bf16 goes
# through F.conv2d there (the precision option warns that it is slow).
_ONEDNN_BF16 = bool(_ONEDNN_POINTWISE is not None and torch.ops.mkldnn._is_mkldnn_bf16_supported())
_ONEDNN_ATTRS: dict[str | None, tuple[str, list[float]]] = {
    None: ("none", []), "relu": ("relu", []), "relu6": ("hardtanh", [0.0, 6.0]),
    "hardswish": ("hardswish", []), "silu": ("swish", []), "leaky_relu": ("leaky_relu", [LEAKY_SLOPE]),
}


class ConvAct(nn.Module):
    """Conv2d followed by an in-place activation (or none): one step, one output tensor."""

    def __init__(self, conv: nn.Conv2d, activation: str | None) -> None:
        super().__init__()
        if activation is not None and activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; valid: {', '.join(ACTIVATIONS)}")
        self.conv = conv
        self.activation = activation

    def forward(self, x: Tensor, padding: tuple[int, int] | None = None) -> Tensor:
        """(B, Cin, H, W) -> (B, Cout, H', W'); `padding` overrides the conv's (row bands pad rows themselves)."""
        conv = self.conv
        assert isinstance(conv.padding, tuple) and conv.padding_mode == "zeros"
        pad = list(padding if padding is not None else conv.padding)
        if x.device.type == "cpu" and _ONEDNN_POINTWISE is not None and (x.dtype != torch.bfloat16 or _ONEDNN_BF16):
            # One oneDNN call with the activation as a post-op: bit-identical to conv then activation.
            attr, scalars = _ONEDNN_ATTRS[self.activation]
            return _ONEDNN_POINTWISE(x, conv.weight, conv.bias, pad, list(conv.stride), list(conv.dilation),
                                     conv.groups, attr, scalars, "")
        y = F.conv2d(x, conv.weight, conv.bias, conv.stride, pad, conv.dilation, conv.groups)
        if self.activation is None or y.is_meta:
            # The activations work in place (no new bytes), so a meta run (estimate_peak) skips them:
            # their meta kernels go through Python reference decompositions, 10 ms per call.
            return y
        return ACTIVATIONS[self.activation](y)

    def add_into(self, target: Tensor, x: Tensor) -> None:
        """target += conv(x) (no activation), writing straight into `target` (a view is fine)."""
        conv = self.conv
        assert self.activation is None and isinstance(conv.padding, tuple)
        if x.is_meta:
            return  # no new bytes, and the meta add goes through slow Python decompositions (estimate_peak)
        if x.device.type == "cpu" and _ONEDNN_ADD_INTO is not None and (x.dtype != torch.bfloat16 or _ONEDNN_BF16):
            _ONEDNN_ADD_INTO(target, x, conv.weight, conv.bias, list(conv.padding), list(conv.stride),
                             list(conv.dilation), conv.groups, "add", None, None, [], None)
            return
        target.add_(F.conv2d(x, conv.weight, conv.bias, conv.stride, conv.padding, conv.dilation, conv.groups))

    def extra_repr(self) -> str:
        return f"activation={self.activation}"


def fuse_conv_activation(graph_module: fx.GraphModule) -> int:
    """Replace conv -> act (the act the conv's only reader) by one ConvAct; wrap lone convs too.

    Every Conv2d becomes a ConvAct, so later passes match one kind of node. Returns fusions made.
    """
    fused = 0
    calls = call_counts(graph_module)
    for node in list(graph_module.graph.nodes):
        conv = module_of(graph_module, node)
        if not isinstance(conv, nn.Conv2d) or calls[node.target] > 1 or not isinstance(conv.padding, tuple):
            continue  # a module called twice (shared weights), or padding='same', stays as it is
        if conv.padding_mode != "zeros":
            continue
        fused += absorb_activation(graph_module, node, partial(ConvAct, conv))
    graph_module.graph.eliminate_dead_code()
    graph_module.delete_all_unused_submodules()
    graph_module.recompile()
    return fused


def absorb_activation(graph_module: fx.GraphModule, node: fx.Node, make: Callable[[str | None], nn.Module]) -> bool:
    """Replace `node`'s module by make(kind), kind the activation that is the node's only reader (which is
    then removed) or None; returns whether an activation was absorbed."""
    assert isinstance(node.target, str)
    reader = single_user(node)
    kind = activation_kind(graph_module, reader) if reader is not None else None
    replace_submodule(graph_module, node.target, make(kind))
    if reader is None or kind is None:
        return False
    reader.replace_all_uses_with(node)
    graph_module.graph.erase_node(reader)
    return True


ADD_TARGETS = (operator.add, torch.add, operator.iadd)
