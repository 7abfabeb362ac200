"""ONNX elementwise ops, activations, Resize, Pad, Concat and reshapes -> the engine IR.

Activations become their torch.nn module; arithmetic, concatenation, resizing and padding become
`operator.*`, torch.cat, F.interpolate and F.pad calls. Multi-node patterns that torch.onnx expands
are put back together: the erf form -> GELU, GroupNorm's reshape /
InstanceNorm / reshape / mul / add -> one GroupNorm, and FPN's stack-then-sum -> a chain of adds.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import fx, nn

from .ir import dim_size
from .onnx_graph import Builder, Dims, Empty, GeluPart, Grouped, GroupNormed, Stacked, Value
from .onnx_layers import group_norm_end
from .onnx_shapes import as_dims, axes_of, slice_spec

Handler = Callable[[Builder, dict[str, Any]], "Value | list[Value]"]  # a list: one value per output (Split)


def _module(factory: Callable[[dict[str, Any]], nn.Module]) -> Handler:
    return lambda b, attrs: b.call_module(factory(attrs), b.tensor(0), rank=b.rank(b.tensor(0)))


def _pending_affine(b: Builder, value: Value | None, const: Value | None, index: int, stage: str) -> bool:
    """Whether `value` is a GroupNorm whose `stage` ("weight"/"bias") a per-channel `const` can fill."""
    module = b.module_of(value)
    return (isinstance(module, nn.GroupNorm) and isinstance(value, fx.Node) and isinstance(const, np.ndarray)
            and value.meta.get("affine_pending") in ((stage,) if stage == "weight" else ("weight", "bias"))
            and const.size == module.num_channels and const.ndim >= 3 and const.shape[-2:] == (1, 1)
            and b.only_reader(index))


def _absorb_affine(b: Builder, node: fx.Node, const: np.ndarray, stage: str) -> fx.Node:
    module = b.module_of(node)
    assert isinstance(module, nn.GroupNorm)
    getattr(module, stage).data = torch.from_numpy(const.reshape(-1).astype(np.float32))
    node.meta["affine_pending"] = "bias" if stage == "weight" else None
    return node


def _binary(function: Callable[[Any, Any], Any]) -> Handler:
    def apply(b: Builder, attrs: dict[str, Any]) -> Value:
        left, right = b.value(0), b.value(1)
        if isinstance(left, (Dims, Stacked)) or isinstance(right, (Dims, Stacked)):
            raise b.error("mixes a size vector or a stacked tensor with a tensor; unsupported")
        if function in (operator.add, operator.mul):
            stage = "bias" if function is operator.add else "weight"
            for index, (this, other) in enumerate(((left, right), (right, left))):
                if _pending_affine(b, this, other, index, stage):
                    assert isinstance(this, fx.Node) and isinstance(other, np.ndarray)
                    return _absorb_affine(b, this, other, stage)
        fused = _gelu_step(b, function, left, right)
        if fused is not None:
            return fused
        node = b.call(function, b.operand(left), b.operand(right), rank=None)
        ranks = [v.meta.get("rank") if isinstance(v, fx.Node) else v.ndim for v in (left, right)
                 if isinstance(v, (fx.Node, np.ndarray))]
        node.meta["rank"] = max(int(r) for r in ranks if r is not None)
        if function is operator.truediv and isinstance(right, np.ndarray) and right.size == 1 \
                and math.isclose(float(right.reshape(-1)[0]), math.sqrt(2), rel_tol=1e-5):
            node.meta["divided_by_sqrt2"] = left
        return node
    return apply


def _gelu_step(b: Builder, function: Any, left: Value | None, right: Value | None) -> Value | None:
    """One step of x * (1 + erf(x / sqrt 2)) * 0.5 (any operand order); None when not a step."""
    for this, other in ((left, right), (right, left)):
        if not isinstance(this, GeluPart):
            continue
        number = float(other.reshape(-1)[0]) if isinstance(other, np.ndarray) and other.size == 1 else None
        if function is operator.add and this.stage == "erf" and number == 1:
            return GeluPart(this.x, "1+erf")
        if function is operator.mul and this.stage == "1+erf" and other is this.x:
            return GeluPart(this.x, "x*(1+erf)")
        if function is operator.mul and this.stage == "x*(1+erf)" and number == 0.5:
            return b.call_module(nn.GELU(), this.x, rank=b.rank(this.x))
        raise b.error("breaks the GELU pattern x * 0.5 * (1 + erf(x / sqrt 2)); a lone Erf is unsupported")
    return None


def erf(b: Builder, attrs: dict[str, Any]) -> Value:
    node = b.tensor(0)
    x = node.meta.get("divided_by_sqrt2")
    if not isinstance(x, fx.Node):
        raise b.error("is supported only inside GELU's x * 0.5 * (1 + erf(x / sqrt 2))")
    return GeluPart(x, "erf")


def clip(b: Builder, attrs: dict[str, Any]) -> Value:
    x = b.tensor(0)
    low = attrs.get("min") if b.opset < 11 else (None if b.value(1) is None else float(b.const(1).reshape(())))
    high = attrs.get("max") if b.opset < 11 else (None if b.value(2) is None else float(b.const(2).reshape(())))
    if low == 0 and high == 6:
        module: nn.Module = nn.ReLU6()
    elif low == 0 and high is None:
        module = nn.ReLU()
    else:
        module = nn.Hardtanh(-math.inf if low is None else low, math.inf if high is None else high)
    return b.call_module(module, x, rank=b.rank(x))


def hard_sigmoid(b: Builder, attrs: dict[str, Any]) -> Value:
    x = b.tensor(0)
    alpha, beta = float(attrs.get("alpha", 0.2)), float(attrs.get("beta", 0.5))
    if math.isclose(alpha, 1 / 6, rel_tol=1e-6) and beta == 0.5:
        return b.call_module(nn.Hardsigmoid(), x, rank=b.rank(x))
    scaled = b.call(operator.add, b.call(operator.mul, x, alpha, rank=b.rank(x)), beta, rank=b.rank(x))
    return b.call_module(nn.Hardtanh(0.0, 1.0), scaled, rank=b.rank(x))


def softmax(b: Builder, attrs: dict[str, Any]) -> Value:
    x = b.tensor(0)
    rank = b.rank(x)
    axis = int(attrs.get("axis", -1 if b.opset >= 13 else 1)) % rank
    if b.opset < 13 and axis != rank - 1:
        raise b.error(f"before opset 13 flattens from axis {axis}; only the last axis is supported")
    return b.call_module(nn.Softmax(dim=axis), x, rank=rank)


def resize(b: Builder, attrs: dict[str, Any]) -> Value:
    x = b.tensor(0)
    if b.rank(x) != 4:
        raise b.error("is supported on 4-D tensors only")
    scales_index, sizes_index = (1, None) if b.node.op_type == "Upsample" or b.opset < 11 else (2, 3)
    sizes = as_dims(b.value(sizes_index)) if sizes_index is not None else None
    scales = b.value(scales_index)
    kwargs: dict[str, Any] = {}
    if sizes is not None and sizes.items:
        if len(sizes.items) != 4:
            raise b.error(f"has {len(sizes.items)} sizes; 4 (N, C, H, W) expected")
        kwargs["size"] = tuple(int(s) if isinstance(s, (int, float)) else s for s in sizes.items[2:])
    elif isinstance(scales, np.ndarray) and scales.size == 4:
        if float(scales[0]) != 1 or float(scales[1]) != 1:
            raise b.error(f"scales the batch or channel axis ({scales.tolist()}); unsupported")
        kwargs["scale_factor"] = (float(scales[2]), float(scales[3]))
    else:
        raise b.error("needs constant scales or sizes computed from shapes")
    mode = attrs.get("mode", "nearest")
    transform = attrs.get("coordinate_transformation_mode", "half_pixel" if b.opset >= 11 else "asymmetric")
    if attrs.get("antialias", 0) or attrs.get("exclude_outside", 0):
        raise b.error("uses antialias or exclude_outside; unsupported")
    if mode == "nearest":
        nearest = attrs.get("nearest_mode", "round_prefer_floor" if b.opset >= 11 else "floor")  # Upsample floors
        if transform == "asymmetric" and nearest == "floor":
            kwargs["mode"] = "nearest"
        elif transform in ("half_pixel", "pytorch_half_pixel") and nearest == "round_prefer_ceil":
            kwargs["mode"] = "nearest-exact"
        else:
            raise b.error(f"uses nearest with {transform}/{nearest}; torch has no equal mode")
    elif mode in ("linear", "cubic") and transform in ("align_corners", "half_pixel", "pytorch_half_pixel"):
        if mode == "cubic" and not math.isclose(float(attrs.get("cubic_coeff_a", -0.75)), -0.75):
            raise b.error("uses a cubic coefficient other than torch's -0.75")
        kwargs["mode"] = "bilinear" if mode == "linear" else "bicubic"
        kwargs["align_corners"] = transform == "align_corners"
    else:
        raise b.error(f"uses mode {mode} with {transform}; torch has no equal mode")
    return b.call(F.interpolate, x, **kwargs)


def pad(b: Builder, attrs: dict[str, Any]) -> Value:
    x = b.tensor(0)
    rank = b.rank(x)
    if b.opset < 11:
        pads, value = as_dims(np.array(attrs["pads"])), float(attrs.get("value", 0.0))
    else:
        pads = as_dims(b.value(1))
        value = float(b.const(2).reshape(-1)[0]) if b.value(2) is not None else 0.0
    if pads is None or len(pads.items) % 2:
        raise b.error("needs pads known now or computed from shapes")
    axes = axes_of(b, {}, 3) if b.opset >= 18 and b.value(3) is not None else list(range(len(pads.items) // 2))
    begin, end = pads.items[:len(axes)], pads.items[len(axes):]
    per_axis = {a % rank: (s, e) for a, s, e in zip(axes, begin, end)}
    if any(per_axis.get(a, (0, 0)) != (0, 0) for a in range(rank - 2)):
        raise b.error("pads the batch or channel axis; unsupported")
    torch_pads: list[Any] = []
    for axis in reversed(range(2, rank)):
        torch_pads.extend(per_axis.get(axis, (0, 0)))
    mode = {"constant": "constant", "reflect": "reflect", "edge": "replicate"}.get(attrs.get("mode", "constant"))
    if mode is None:
        raise b.error(f"uses mode {attrs.get('mode')}; supported: constant, reflect, edge")
    kwargs: dict[str, Any] = {"mode": mode} if mode != "constant" else ({"value": value} if value else {})
    return b.call(F.pad, x, tuple(torch_pads), rank=rank, **kwargs)


def constant_of_shape(b: Builder, attrs: dict[str, Any]) -> Value:
    """ConstantOfShape of a size computed from the input: only an empty tensor (a zero in its shape) is taken."""
    dims = as_dims(b.value(0))
    if dims is None or not any(isinstance(item, int) and item == 0 for item in dims.items):
        raise b.error("builds a tensor whose size depends on the input; only empty ones are supported")
    return Empty(dims)


def split(b: Builder, attrs: dict[str, Any]) -> list[Value]:
    """Split along the channels of a 4-D map (Res2Net, CSP, Ghost blocks): torch.split, one getitem per output."""
    x = b.tensor(0)
    rank, outputs = b.rank(x), len(b.node.output)
    if rank != 4 or int(attrs.get("axis", 0)) % rank != 1:
        raise b.error("splits along an axis other than the channels of a 4-D map; unsupported")
    if "split" in attrs:
        sizes = [int(s) for s in attrs["split"]]
    elif len(b.node.input) > 1 and b.node.input[1]:
        sizes = [int(s) for s in b.const(1).reshape(-1)]
    else:
        channels = b.static_dim(x, 1)
        if channels is None or channels % outputs:
            raise b.error("splits into equal parts a channel count unknown at import time")
        sizes = [channels // outputs] * outputs
    parts = b.call(torch.split, x, sizes, 1, rank=None)
    return [b.call(operator.getitem, parts, i, rank=4) for i in range(len(sizes))]


def slice_tensor(b: Builder, attrs: dict[str, Any]) -> Value:
    """Slice of a tensor by starts / ends known at import time (GhostNet keeps its first C channels)."""
    x = b.tensor(0)
    rank = b.rank(x)
    spec = slice_spec(b, rank)
    if any(s.step not in (None, 1) for s in spec):
        raise b.error("slices a tensor with a step; unsupported")
    return b.call(operator.getitem, x, tuple(spec), rank=rank)


def concat(b: Builder, attrs: dict[str, Any]) -> Value:
    parts = [b.value(i) for i in range(len(b.node.input)) if b.value(i) is not None]
    parts = [p for p in parts if not isinstance(p, Empty)]  # concatenating an empty tensor adds nothing
    if len(parts) == 1 and isinstance(parts[0], fx.Node):
        return parts[0]
    axis = int(attrs["axis"])
    if all(isinstance(p, Stacked) for p in parts) and axis == 0:
        return Stacked([node for p in parts for node in p.nodes])  # type: ignore[union-attr]
    tensors = [p if isinstance(p, fx.Node) else b.operand(p) for p in parts]
    if not all(isinstance(t, fx.Node) for t in tensors):
        raise b.error("concatenates something other than tensors; unsupported")
    rank = b.rank(tensors[0])  # type: ignore[arg-type]
    return b.call(torch.cat, tensors, dim=axis % rank, rank=rank)


def unsqueeze(b: Builder, attrs: dict[str, Any]) -> Value:
    if axes_of(b, attrs, 1) != [0]:
        raise b.error("unsqueezes a tensor on an axis other than 0; unsupported")
    return Stacked([b.tensor(0)])


def reduce_sum(b: Builder, attrs: dict[str, Any]) -> Value:
    stacked = b.value(0)
    axes = axes_of(b, attrs, 1)
    if isinstance(stacked, fx.Node) and axes:  # a sum over axes known now (ResNeSt's split-attention radix)
        rank = b.rank(stacked)
        keep = bool(attrs.get("keepdims", 1))
        return b.call(torch.sum, stacked, sorted(a % rank for a in axes), keep, rank=rank if keep else rank - len(axes))
    if not isinstance(stacked, Stacked) or axes != [0] or attrs.get("keepdims", 1):
        raise b.error("is supported only as the sum of tensors stacked on axis 0 (keepdims 0) or of a tensor over "
                      "axes known at import time")
    total = stacked.nodes[0]
    for node in stacked.nodes[1:]:
        total = b.call(operator.add, total, node, rank=b.rank(node))
    return total


def reshape(b: Builder, attrs: dict[str, Any]) -> Value:
    value, shape = b.value(0), b.value(1)
    if isinstance(value, GroupNormed):
        return group_norm_end(b, value, shape)
    x = b.tensor(0)
    target = as_dims(shape)
    if target is not None and b.rank(x) == 4 and len(target.items) == 3 and target.items[0] in (0, 1) \
            and target.items[2] == -1 and isinstance(target.items[1], int):
        channels = b.static_dim(x, 1)
        if channels is not None and channels % target.items[1] == 0:
            return Grouped(x, target.items[1])
    if target is not None and len(target.items) == 2 and target.items[0] in (0, 1) and target.items[1] == -1:
        return b.call(torch.flatten, x, 1, rank=2)
    if target is None or target.is_float:
        raise b.error("reshapes a tensor to a shape that is not a size vector")
    sizes: list[Any] = []  # ONNX's 0 copies the input's size on that axis (unless allowzero)
    for axis, item in enumerate(target.items):
        if isinstance(item, int) and item == 0 and not attrs.get("allowzero", 0):
            static = b.static_dim(x, axis)
            item = static if static is not None else b.call(dim_size, x, axis, rank=None)
        sizes.append(item)
    return b.call(torch.reshape, x, sizes, rank=len(sizes))


def transpose(b: Builder, attrs: dict[str, Any]) -> Value:
    x = b.tensor(0)
    rank = b.rank(x)
    perm = [int(p) for p in attrs.get("perm", reversed(range(rank)))]
    if x.op == "call_function" and x.target is torch.permute and isinstance(x.args[0], fx.Node) \
            and [list(x.args[1])[p] for p in perm] == list(range(rank)):  # type: ignore[arg-type]
        return x.args[0]  # undoes the permute before it (a LayerNorm2d's way back)
    return b.call(torch.permute, x, perm, rank=rank)


def flatten(b: Builder, attrs: dict[str, Any]) -> Value:
    if int(attrs.get("axis", 1)) != 1:
        raise b.error("flattens from an axis other than 1; unsupported")
    return b.call(torch.flatten, b.tensor(0), 1, rank=2)


OPS: dict[str, Handler] = {
    "Add": _binary(operator.add),
    "ConstantOfShape": constant_of_shape,
    "Split": split,
    "Slice": slice_tensor,
    "Sub": _binary(operator.sub),
    "Mul": _binary(operator.mul),
    "Div": _binary(operator.truediv),
    "Erf": erf,
    "Relu": _module(lambda a: nn.ReLU()),
    "Sigmoid": _module(lambda a: nn.Sigmoid()),
    "Tanh": _module(lambda a: nn.Tanh()),
    "HardSwish": _module(lambda a: nn.Hardswish()),
    "LeakyRelu": _module(lambda a: nn.LeakyReLU(float(a.get("alpha", 0.01)))),
    "Gelu": _module(lambda a: nn.GELU(approximate=a.get("approximate", "none"))),
    "Clip": clip,
    "HardSigmoid": hard_sigmoid,
    "Softmax": softmax,
    "Resize": resize,
    "Upsample": resize,
    "Pad": pad,
    "Concat": concat,
    "Transpose": transpose,
    "Unsqueeze": unsqueeze,
    "ReduceSum": reduce_sum,
    "Reshape": reshape,
    "Flatten": flatten,
}
