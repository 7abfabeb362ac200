"""ONNX layers with weights or windows -> standard torch.nn modules (Conv, BatchNorm, GroupNorm, pools, Gemm).

Each ONNX node gets its own module instance. Padding torch cannot express on the layer (asymmetric
pads) becomes an F.pad node in front of it.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import fx, nn

from .channel_norm import ChannelLayerNorm
from .onnx_graph import Builder, Grouped, GroupNormed, Value
from .onnx_shapes import as_dims, axes_of


def _weight(array: np.ndarray) -> nn.Parameter:
    return nn.Parameter(torch.from_numpy(np.array(array, dtype=np.float32, copy=True)), requires_grad=False)


def _window(b: Builder, attrs: dict[str, Any], kernel: tuple[int, int]) -> tuple[Any, ...]:
    """(strides, dilations, symmetric padding or None, ONNX pads [top, left, bottom, right])."""
    strides = tuple(attrs.get("strides", (1, 1)))
    dilations = tuple(attrs.get("dilations", (1, 1)))
    if len(kernel) != 2 or len(strides) != 2:
        raise b.error("is supported in 2-D only")
    pads = list(attrs.get("pads", (0, 0, 0, 0)))
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad == "VALID":
        pads = [0, 0, 0, 0]
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        if strides != (1, 1):
            raise b.error(f"uses auto_pad {auto_pad} with strides {strides}: its padding depends on the input size")
        totals = [d * (k - 1) for d, k in zip(dilations, kernel)]
        small = [t // 2 for t in totals]
        large = [t - s for t, s in zip(totals, small)]
        pads = small + large if auto_pad == "SAME_UPPER" else large + small
    symmetric = (pads[0], pads[1]) if pads[0] == pads[2] and pads[1] == pads[3] else None
    return strides, dilations, symmetric, pads


def _pad_front(b: Builder, x: fx.Node, pads: list[int], value: float = 0.0) -> fx.Node:
    top, left, bottom, right = pads
    return b.call(F.pad, x, (left, right, top, bottom), value=value) if any(pads) else x


def conv(b: Builder, attrs: dict[str, Any]) -> Value:
    x, weight = b.tensor(0), b.const(1)
    bias = b.value(2)
    if weight.ndim != 4:
        raise b.error(f"has a {weight.ndim - 2}-D kernel; only 2-D convolutions are supported")
    out_channels, in_per_group, kh, kw = weight.shape
    groups = int(attrs.get("group", 1))
    strides, dilations, symmetric, pads = _window(b, attrs, (kh, kw))
    module = nn.Conv2d(in_per_group * groups, out_channels, (kh, kw), stride=strides, dilation=dilations,
                       groups=groups, padding=symmetric or 0, bias=bias is not None)
    module.weight = _weight(weight)
    if bias is not None:
        module.bias = _weight(b.const(2))
    return b.call_module(module, x if symmetric else _pad_front(b, x, pads))


def conv_transpose(b: Builder, attrs: dict[str, Any]) -> Value:
    x, weight = b.tensor(0), b.const(1)
    if weight.ndim != 4 or "output_shape" in attrs:
        raise b.error("is supported only as a 2-D ConvTranspose without output_shape")
    in_channels, out_per_group, kh, kw = weight.shape
    groups = int(attrs.get("group", 1))
    strides, dilations, symmetric, _ = _window(b, attrs, (kh, kw))
    if symmetric is None:
        raise b.error("has asymmetric pads; unsupported for ConvTranspose")
    module = nn.ConvTranspose2d(in_channels, out_per_group * groups, (kh, kw), stride=strides, padding=symmetric,
                                output_padding=tuple(attrs.get("output_padding", (0, 0))), groups=groups,
                                dilation=dilations, bias=b.value(2) is not None)
    module.weight = _weight(weight)
    if b.value(2) is not None:
        module.bias = _weight(b.const(2))
    return b.call_module(module, x)


def batch_norm(b: Builder, attrs: dict[str, Any]) -> Value:
    x = b.tensor(0)
    scale, shift, mean, var = (b.const(i) for i in range(1, 5))
    module = nn.BatchNorm2d(len(scale), eps=float(attrs.get("epsilon", 1e-5)))
    module.weight, module.bias = _weight(scale), _weight(shift)
    assert module.running_mean is not None and module.running_var is not None
    module.running_mean.copy_(torch.from_numpy(mean.astype(np.float32)))
    module.running_var.copy_(torch.from_numpy(var.astype(np.float32)))
    return b.call_module(module, x)


def instance_norm(b: Builder, attrs: dict[str, Any]) -> Value:
    """InstanceNorm on (N, C, H, W) is GroupNorm with C groups; on a Grouped tensor, GroupNorm's middle."""
    value, scale, shift = b.value(0), b.const(1), b.const(2)
    eps = float(attrs.get("epsilon", 1e-5))
    if isinstance(value, Grouped):
        if not (np.all(scale == 1) and np.all(shift == 0)):
            raise b.error("normalises a reshaped tensor with a non-identity scale; unsupported")
        return GroupNormed(value.node, value.groups, eps)
    x = b.tensor(0)
    if b.rank(x) != 4:
        raise b.error("is supported on 4-D tensors only")
    module = nn.GroupNorm(len(scale), len(scale), eps=eps)
    module.weight, module.bias = _weight(scale), _weight(shift)
    return b.call_module(module, x)


def group_norm_end(b: Builder, normed: GroupNormed, shape: Value | None) -> Value:
    """Reshape(GroupNormed, Shape(x)) -> nn.GroupNorm on x (identity affine; a later Mul/Add fills it)."""
    x = normed.node
    dims = as_dims(shape)
    channels = b.static_dim(x, 1)
    if dims is None or len(dims.items) != 4 or channels is None or channels % normed.groups:
        raise b.error("reshapes a group-normalised tensor to something other than its input's shape")
    for axis, item in enumerate(dims.items):
        static = b.static_dim(x, axis)
        same = item == static if isinstance(item, int) else (
            isinstance(item, fx.Node) and item.args == (x, axis))
        if not same and not (axis == 0 and item in (0, 1)):
            raise b.error("reshapes a group-normalised tensor to something other than its input's shape")
    module = nn.GroupNorm(normed.groups, channels, eps=normed.eps)
    node = b.call_module(module, x)
    node.meta["affine_pending"] = "weight"
    return node


def _pool_attrs(b: Builder, attrs: dict[str, Any]) -> tuple[Any, ...]:
    kernel = tuple(int(k) for k in attrs["kernel_shape"])
    strides, dilations, symmetric, pads = _window(b, attrs, kernel)  # type: ignore[arg-type]
    return kernel, strides, dilations, symmetric, pads, bool(attrs.get("ceil_mode", 0))


def max_pool(b: Builder, attrs: dict[str, Any]) -> Value:
    if len(b.node.output) > 1 and b.node.output[1]:
        raise b.error("returns indices; unsupported")
    x = b.tensor(0)
    kernel, strides, dilations, symmetric, pads, ceil_mode = _pool_attrs(b, attrs)
    module = nn.MaxPool2d(kernel, strides, symmetric or 0, dilation=dilations, ceil_mode=ceil_mode)
    return b.call_module(module, x if symmetric else _pad_front(b, x, pads, float("-inf")))


def avg_pool(b: Builder, attrs: dict[str, Any]) -> Value:
    x = b.tensor(0)
    kernel, strides, dilations, symmetric, pads, ceil_mode = _pool_attrs(b, attrs)
    include_pad = bool(attrs.get("count_include_pad", 0))
    if dilations != (1, 1) or (symmetric is None and not include_pad):
        raise b.error("has dilations or asymmetric pads that exclude the padding; unsupported")
    module = nn.AvgPool2d(kernel, strides, symmetric or 0, ceil_mode=ceil_mode, count_include_pad=include_pad)
    return b.call_module(module, x if symmetric else _pad_front(b, x, pads))


def global_avg_pool(b: Builder, attrs: dict[str, Any]) -> Value:
    return b.call_module(nn.AdaptiveAvgPool2d(1), b.tensor(0))


def reduce_mean(b: Builder, attrs: dict[str, Any]) -> Value:
    x = b.tensor(0)
    rank = b.rank(x)
    axes = sorted(a % rank for a in axes_of(b, attrs, 1))
    if rank != 4 or axes != [2, 3]:
        raise b.error(f"reduces over axes {axes}; only the spatial axes [2, 3] of a 4-D tensor are supported")
    if attrs.get("keepdims", 1):
        return b.call_module(nn.AdaptiveAvgPool2d(1), x)
    return b.call(torch.mean, x, dim=(2, 3), rank=2)


def gemm(b: Builder, attrs: dict[str, Any]) -> Value:
    x, weight = b.tensor(0), b.const(1)
    if attrs.get("transA", 0) or b.rank(x) != 2:
        raise b.error("is supported only as x @ W (+ c) with a 2-D x")
    weight = weight * attrs.get("alpha", 1.0)
    weight = weight if attrs.get("transB", 0) else weight.T
    bias = b.value(2)
    module = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
    module.weight = _weight(weight)
    if bias is not None:
        module.bias = _weight(np.broadcast_to(b.const(2) * attrs.get("beta", 1.0), (weight.shape[0],)))
    return b.call_module(module, x, rank=2)


def matmul(b: Builder, attrs: dict[str, Any]) -> Value:
    x = b.tensor(0)
    if not isinstance(b.value(1), np.ndarray):  # two run-time operands (an attention block's scores and values)
        other = b.tensor(1)
        return b.call(torch.matmul, x, other, rank=max(b.rank(x), b.rank(other)))
    weight = b.const(1)
    if weight.ndim != 2:
        raise b.error("is supported only with a constant 2-D right operand")
    module = nn.Linear(weight.shape[0], weight.shape[1], bias=False)
    module.weight = _weight(weight.T)
    return b.call_module(module, x, rank=b.rank(x))


def layer_norm(b: Builder, attrs: dict[str, Any]) -> Value:
    """LayerNormalization over the last axis of a channels-last view of a 4-D map (timm's LayerNorm2d:
    Transpose(0, 2, 3, 1) -> LayerNormalization -> Transpose(0, 3, 1, 2)): a ChannelLayerNorm on the map,
    viewed channels-last again for the Transpose back, which then cancels."""
    x = b.tensor(0)
    is_channels_last_view = x.op == "call_function" and x.target is torch.permute \
        and list(x.args[1]) == [0, 2, 3, 1]  # type: ignore[arg-type]
    permuted = x.args[0] if is_channels_last_view else None
    if not isinstance(permuted, fx.Node) or int(attrs.get("axis", -1)) not in (-1, 3):
        raise b.error("normalises something other than the channels of a 4-D map; unsupported")
    scale = b.const(1)
    shift = b.const(2) if len(b.node.input) > 2 and b.node.input[2] else np.zeros_like(scale)
    module = ChannelLayerNorm(len(scale), float(attrs.get("epsilon", 1e-5)))
    module.weight, module.bias = _weight(scale), _weight(shift)
    return b.call(torch.permute, b.call_module(module, permuted), [0, 2, 3, 1], rank=4)


LAYERS: dict[str, Callable[[Builder, dict[str, Any]], Value]] = {
    "Conv": conv,
    "ConvTranspose": conv_transpose,
    "BatchNormalization": batch_norm,
    "InstanceNormalization": instance_norm,
    "LayerNormalization": layer_norm,
    "MaxPool": max_pool,
    "AveragePool": avg_pool,
    "GlobalAveragePool": global_avg_pool,
    "ReduceMean": reduce_mean,
    "Gemm": gemm,
    "MatMul": matmul,
}
