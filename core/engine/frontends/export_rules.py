# mypy: disable-error-code="arg-type,operator"
# (aten node arguments are typed as any fx Argument; each rule reads them by the op's schema)
"""How each aten op of a `torch.export` program becomes the engine IR: a weighted op its nn module again
(aten.conv2d -> nn.Conv2d, aten.batch_norm -> nn.BatchNorm2d, ...), an activation its module, arithmetic and
resizes plain functions; ops that are the identity at inference pass their input on, export's shape
checks are dropped."""
from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import fx, nn

from .export_lifter import Lift, Lifter, is_empty
from .ir import FrontendError, dim_size

aten = torch.ops.aten


def _conv(lifter: Lifter, node: fx.Node) -> fx.Node:
    if node.target is aten.convolution.default:
        x, weight, bias, stride, padding, dilation, transposed, output_padding, groups = node.args
        if transposed:
            return _conv_transpose(lifter, node, x, weight, bias, stride, padding, dilation, output_padding, groups)
    else:
        names = ("x", "weight", "bias", "stride", "padding", "dilation", "groups")
        defaults: dict[str, Any] = {"bias": None, "stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], "groups": 1}
        values = {**defaults, **dict(zip(names, node.args)), **node.kwargs}
        x, weight, bias = values["x"], values["weight"], values["bias"]
        stride, padding, dilation, groups = values["stride"], values["padding"], values["dilation"], values["groups"]
    w = lifter.tensor(weight)
    assert w is not None
    if w.dim() != 4:
        return lifter.function(node.target, *node.args, **node.kwargs)  # type: ignore[arg-type]
    b = lifter.tensor(bias)
    if isinstance(padding, str):
        raise FrontendError(f"{node.name}: padding={padding!r} convolutions are not supported")
    conv = nn.Conv2d(w.shape[1] * groups, w.shape[0], tuple(w.shape[2:]), stride=tuple(_pair(stride)),
                     padding=tuple(_pair(padding)), dilation=tuple(_pair(dilation)), groups=groups, bias=b is not None)
    conv.weight = nn.Parameter(w.clone(), requires_grad=False)
    if b is not None:
        conv.bias = nn.Parameter(b.clone(), requires_grad=False)
    return lifter.module(node, conv, x)


def _conv_transpose(lifter: Lifter, node: fx.Node, x: Any, weight: Any, bias: Any, stride: Any, padding: Any,
                    dilation: Any, output_padding: Any, groups: int) -> fx.Node:
    w, b = lifter.tensor(weight), lifter.tensor(bias)
    assert w is not None
    conv = nn.ConvTranspose2d(w.shape[0], w.shape[1] * groups, tuple(w.shape[2:]), stride=tuple(_pair(stride)),
                              padding=tuple(_pair(padding)), output_padding=tuple(_pair(output_padding)),
                              groups=groups, dilation=tuple(_pair(dilation)), bias=b is not None)
    conv.weight = nn.Parameter(w.clone(), requires_grad=False)
    if b is not None:
        conv.bias = nn.Parameter(b.clone(), requires_grad=False)
    return lifter.module(node, conv, x)


def _conv_transpose2d(lifter: Lifter, node: fx.Node) -> fx.Node:
    """aten.conv_transpose2d.input(x, weight, bias, stride, padding, output_padding, groups, dilation)."""
    names = ("x", "weight", "bias", "stride", "padding", "output_padding", "groups", "dilation")
    defaults: dict[str, Any] = {"bias": None, "stride": [1, 1], "padding": [0, 0], "output_padding": [0, 0],
                                "groups": 1, "dilation": [1, 1]}
    v = {**defaults, **dict(zip(names, node.args)), **node.kwargs}
    return _conv_transpose(lifter, node, v["x"], v["weight"], v["bias"], v["stride"], v["padding"], v["dilation"],
                           v["output_padding"], v["groups"])


def _batch_norm(lifter: Lifter, node: fx.Node) -> Any:
    if node.target is aten.batch_norm.default:
        x, weight, bias, mean, var, training, _momentum, eps = node.args[:8]
        if training:
            raise FrontendError(f"{node.name}: batch norm in training mode; export the model in eval mode")
    else:  # _native_batch_norm_legit_no_training: (x, weight, bias, mean, var, momentum, eps) -> (out, ., .)
        x, weight, bias, mean, var, _momentum, eps = node.args[:7]
    running_mean, running_var = lifter.tensor(mean), lifter.tensor(var)
    assert running_mean is not None and running_var is not None
    norm = nn.BatchNorm2d(running_mean.numel(), eps=float(eps), affine=weight is not None)  # type: ignore[arg-type]
    norm.running_mean.copy_(running_mean)  # type: ignore[union-attr]
    norm.running_var.copy_(running_var)  # type: ignore[union-attr]
    if weight is not None:
        norm.weight = nn.Parameter(lifter.tensor(weight).clone(), requires_grad=False)  # type: ignore[union-attr]
        norm.bias = nn.Parameter(lifter.tensor(bias).clone(), requires_grad=False)  # type: ignore[union-attr]
    out = lifter.module(node, norm, x)
    return out if node.target is aten.batch_norm.default else (out, None, None)


def _group_norm(lifter: Lifter, node: fx.Node) -> fx.Node:
    x, groups, weight, bias, eps = (list(node.args) + [None, None, 1e-5])[:5]
    return _group_norm_module(lifter, node, x, int(groups), weight, bias, float(eps))  # type: ignore[arg-type]


def _instance_norm(lifter: Lifter, node: fx.Node) -> fx.Node:
    """InstanceNorm with the input's statistics (nnU-Net's conv -> InstanceNorm -> LeakyReLU) is GroupNorm with a
    group per channel; with running statistics it is left as it is (runs eagerly, and the plan says so)."""
    x, weight, bias, running_mean, running_var, use_input_stats, _, eps = (list(node.args) + [None] * 8)[:8]
    if not use_input_stats or running_mean is not None or running_var is not None:
        return lifter.function(node.target, *node.args, **node.kwargs)  # type: ignore[arg-type]
    channels = int(node.meta["val"].shape[1])
    return _group_norm_module(lifter, node, x, channels, weight, bias, float(eps if eps is not None else 1e-5))


def _group_norm_module(lifter: Lifter, node: fx.Node, x: Any, groups: int, weight: Any, bias: Any,
                       eps: float) -> fx.Node:
    """nn.GroupNorm(groups) over x, with the program's affine weights (when it has them)."""
    w = lifter.tensor(weight)
    channels = int(node.meta["val"].shape[1])
    norm = nn.GroupNorm(groups, channels, eps=eps, affine=w is not None)
    if w is not None:
        norm.weight = nn.Parameter(w.clone(), requires_grad=False)
        norm.bias = nn.Parameter(lifter.tensor(bias).clone(), requires_grad=False)  # type: ignore[union-attr]
    return lifter.module(node, norm, x)


def _activation(factory: Callable[[fx.Node], nn.Module]) -> Lift:
    return lambda lifter, node: lifter.module(node, factory(node), node.args[0])


def _hardtanh(node: fx.Node) -> nn.Module:
    low, high = (list(node.args[1:]) + [-1.0, 1.0])[:2]
    return nn.ReLU6() if (float(low), float(high)) == (0.0, 6.0) else nn.Hardtanh(float(low), float(high))


def _binary(op: Callable[[Any, Any], Any]) -> Lift:
    def lift(lifter: Lifter, node: fx.Node) -> fx.Node:
        a, b = node.args[:2]
        alpha = node.kwargs.get("alpha", 1)
        if alpha != 1:
            b = lifter.function(operator.mul, b, alpha)
        return lifter.function(op, a, b)
    return lift


def _cat(lifter: Lifter, node: fx.Node) -> Any:
    """torch.cat, without the empty tensors a timm encoder puts in for a stride it does not have."""
    tensors = [t for t in node.args[0] if not is_empty(lifter.env.get(t))]  # type: ignore[union-attr]
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
    if not tensors:
        raise FrontendError(f"{node.name}: concatenates only empty tensors")
    if len(tensors) == 1:
        return lifter.value(tensors[0])
    return lifter.function(torch.cat, tensors, dim)  # type: ignore[arg-type]


def _upsample(mode: str) -> Lift:
    def lift(lifter: Lifter, node: fx.Node) -> fx.Node:
        x, size = node.args[0], node.args[1]
        align_corners = node.args[2] if mode == "bilinear" else None
        scales = node.args[3] if mode == "bilinear" else node.args[2]
        kwargs: dict[str, Any] = {"mode": mode}
        if mode == "bilinear":
            kwargs["align_corners"] = bool(align_corners)
        if size is not None:
            kwargs["size"] = tuple(size)  # type: ignore[arg-type]
        else:
            kwargs["scale_factor"] = tuple(float(s) for s in scales)  # type: ignore[union-attr]
            if len(set(kwargs["scale_factor"])) == 1:
                kwargs["scale_factor"] = kwargs["scale_factor"][0]
        return lifter.function(F.interpolate, x, **kwargs)
    return lift


def _max_pool(lifter: Lifter, node: fx.Node) -> fx.Node:
    args = list(node.args) + [None] * 6
    x, kernel = args[0], args[1]
    stride, padding, dilation = args[2] or kernel, args[3] or 0, args[4] or 1
    pool = nn.MaxPool2d(tuple(_pair(kernel)), tuple(_pair(stride)), tuple(_pair(padding)), tuple(_pair(dilation)),
                        ceil_mode=bool(args[5]))
    return lifter.module(node, pool, x)


def _avg_pool(lifter: Lifter, node: fx.Node) -> fx.Node:
    args = list(node.args) + [None] * 7
    x, kernel, stride = args[0], args[1], args[2] or args[1]
    padding, ceil_mode, count_include_pad = args[3] or [0, 0], bool(args[4]), args[5] if args[5] is not None else True
    if args[6] is not None:
        return lifter.function(node.target, *node.args, **node.kwargs)  # type: ignore[arg-type]
    pool = nn.AvgPool2d(tuple(_pair(kernel)), tuple(_pair(stride)), tuple(_pair(padding)), ceil_mode=ceil_mode,
                        count_include_pad=bool(count_include_pad))
    return lifter.module(node, pool, x)


def _adaptive_avg_pool(lifter: Lifter, node: fx.Node) -> fx.Node:
    return lifter.module(node, nn.AdaptiveAvgPool2d(tuple(node.args[1])), node.args[0])  # type: ignore[arg-type]


def _mean(lifter: Lifter, node: fx.Node) -> fx.Node:
    x, dims = node.args[0], node.args[1]
    keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    rank = len(node.args[0].meta["val"].shape)  # type: ignore[union-attr]
    if keepdim and rank == 4 and sorted(d % 4 for d in dims) == [2, 3]:  # type: ignore[union-attr]
        return lifter.module(node, nn.AdaptiveAvgPool2d(1), x)
    return lifter.function(torch.mean, x, list(dims), bool(keepdim))  # type: ignore[arg-type]


def _pad(lifter: Lifter, node: fx.Node) -> fx.Node:
    """aten.constant_pad_nd(x, pad, value=0), or aten.pad(x, pad, mode="constant", value=None) as nn.ZeroPad2d
    and padding modes write it: F.pad."""
    x, pad = node.args[0], node.args[1]
    names = ("value",) if node.target is aten.constant_pad_nd.default else ("mode", "value")
    options = {**dict(zip(names, node.args[2:])), **node.kwargs}
    mode = options.get("mode", "constant")
    if mode != "constant":
        return lifter.function(F.pad, x, list(pad), mode=mode)  # type: ignore[arg-type]
    return lifter.function(F.pad, x, list(pad), value=float(options.get("value") or 0.0))  # type: ignore[arg-type]


def _sum_of_stack(lifter: Lifter, node: fx.Node) -> Any:
    """sum(stack(xs), dim=0) (smp's FPN merge) as a chain of adds: no stacked copy of every map."""
    source, dims = node.args[0], node.args[1]
    if (isinstance(source, fx.Node) and source.target is aten.stack.default and list(dims) == [0]  # type: ignore[arg-type]
            and (source.args[1] if len(source.args) > 1 else 0) == 0 and len(node.args) < 3):
        parts = list(source.args[0])  # type: ignore[arg-type]
        total = lifter.function(operator.add, parts[0], parts[1])
        for part in parts[2:]:
            total = lifter.graph.call_function(operator.add, (total, lifter.value(part)))
        return total
    keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    return lifter.function(torch.sum, source, list(dims), bool(keepdim))  # type: ignore[arg-type]


def _stack(lifter: Lifter, node: fx.Node) -> Any:
    if all(user.target is aten.sum.dim_IntList for user in node.users):
        return None  # read by the sum rule from the aten graph directly
    return lifter.function(node.target, *node.args, **node.kwargs)  # type: ignore[arg-type]


def _plain(target: Callable[..., Any], arity: int) -> Lift:
    """An op the IR keeps as the torch function of the same meaning (an attention block's reshapes, matmuls
    and softmax), its first `arity` arguments passed on."""
    def lift(lifter: Lifter, node: fx.Node) -> fx.Node:
        return lifter.function(target, *node.args[:arity])
    return lift


def _channel_split(target: Callable[..., Any]) -> Lift:
    """torch.split / torch.chunk along the channels of a 4-D map (a per-pixel op); along any other axis the aten
    call stays as it is."""
    def lift(lifter: Lifter, node: fx.Node) -> fx.Node:
        x, sizes = node.args[0], node.args[1]
        dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)
        rank = len(x.meta["val"].shape)  # type: ignore[union-attr]
        if rank == 4 and dim % rank == 1:  # type: ignore[operator]
            return lifter.function(target, x, sizes, 1)
        return lifter.function(node.target, *node.args, **node.kwargs)  # type: ignore[arg-type]
    return lift


def _sym_size(lifter: Lifter, node: fx.Node) -> fx.Node:
    return lifter.function(dim_size, node.args[0], node.args[1])


def _pair(value: Any) -> list[int]:
    values = [int(v) for v in (value if isinstance(value, (list, tuple)) else [value])]
    return values * 2 if len(values) == 1 else values


RULES: dict[Any, Lift] = {
    aten.conv2d.default: _conv,
    aten.convolution.default: _conv,
    aten.conv_transpose2d.input: _conv_transpose2d,
    aten.batch_norm.default: _batch_norm,
    aten._native_batch_norm_legit_no_training.default: _batch_norm,
    aten.group_norm.default: _group_norm,
    aten.instance_norm.default: _instance_norm,
    aten.relu.default: _activation(lambda n: nn.ReLU()),
    aten.relu_.default: _activation(lambda n: nn.ReLU()),
    aten.hardtanh.default: _activation(_hardtanh),
    aten.hardtanh_.default: _activation(_hardtanh),
    aten.hardswish.default: _activation(lambda n: nn.Hardswish()),
    aten.hardswish_.default: _activation(lambda n: nn.Hardswish()),
    aten.hardsigmoid.default: _activation(lambda n: nn.Hardsigmoid()),
    aten.hardsigmoid_.default: _activation(lambda n: nn.Hardsigmoid()),
    aten.sigmoid.default: _activation(lambda n: nn.Sigmoid()),
    aten.sigmoid_.default: _activation(lambda n: nn.Sigmoid()),
    aten.silu.default: _activation(lambda n: nn.SiLU()),
    aten.silu_.default: _activation(lambda n: nn.SiLU()),
    aten.tanh.default: _activation(lambda n: nn.Tanh()),
    aten.gelu.default: _activation(lambda n: nn.GELU(approximate=str(n.kwargs.get("approximate", "none")))),
    aten.leaky_relu.default: _activation(lambda n: nn.LeakyReLU(float(n.args[1]) if len(n.args) > 1 else 0.01)),
    aten.leaky_relu_.default: _activation(lambda n: nn.LeakyReLU(float(n.args[1]) if len(n.args) > 1 else 0.01)),
    aten.add.Tensor: _binary(operator.add),
    aten.add_.Tensor: _binary(operator.add),
    aten.sub.Tensor: _binary(operator.sub),
    aten.mul.Tensor: _binary(operator.mul),
    aten.mul_.Tensor: _binary(operator.mul),
    aten.div.Tensor: _binary(operator.truediv),
    aten.cat.default: _cat,
    aten.upsample_nearest2d.vec: _upsample("nearest"),
    aten.upsample_bilinear2d.vec: _upsample("bilinear"),
    aten.max_pool2d.default: _max_pool,
    aten.avg_pool2d.default: _avg_pool,
    aten.adaptive_avg_pool2d.default: _adaptive_avg_pool,
    aten.mean.dim: _mean,
    aten.constant_pad_nd.default: _pad,
    aten.pad.default: _pad,
    aten.stack.default: _stack,
    aten.sum.dim_IntList: _sum_of_stack,
    aten.sym_size.int: _sym_size,
    # Attention blocks (MAnet's position attention, DANet, OCR): small maps, one output each
    aten.flatten.using_ints: _plain(torch.flatten, 3),
    aten.transpose.int: _plain(torch.transpose, 3),
    aten.permute.default: _plain(torch.permute, 2),
    aten.view.default: _plain(torch.reshape, 2),
    aten.reshape.default: _plain(torch.reshape, 2),
    aten._unsafe_view.default: _plain(torch.reshape, 2),
    aten.matmul.default: _plain(torch.matmul, 2),
    aten.bmm.default: _plain(torch.bmm, 2),
    aten.softmax.int: _plain(torch.softmax, 2),
    aten._softmax.default: _plain(torch.softmax, 2),
    # Channel splits (Res2Net, CSP and Ghost blocks) and ResNeSt's sum over its split-attention radix
    aten.split.Tensor: _channel_split(torch.split),
    aten.split_with_sizes.default: _channel_split(torch.split),
    aten.chunk.default: _channel_split(torch.chunk),
}
# Ops that are the identity at inference (eval-mode dropout, copies that only change the layout).
_IDENTITY = {aten.dropout.default, aten.dropout_.default, aten.feature_dropout.default,
             aten.feature_dropout_.default, aten.clone.default, aten.contiguous.default, aten.alias.default,
             aten.detach.default, aten.detach_.default}
# Checks torch.export inserts for the symbolic shapes; the lifted graph serves every size anyway.
_SKIPPED = {aten._assert_scalar.default, aten.sym_constrain_range_for_size.default,
            aten._assert_tensor_metadata.default, aten.sym_constrain_range.default}


def _identity(lifter: Lifter, node: fx.Node) -> Any:
    return lifter.value(node.args[0])


def _skipped(lifter: Lifter, node: fx.Node) -> None:
    return None


RULES.update({op: _identity for op in _IDENTITY})
RULES.update({op: _skipped for op in _SKIPPED})
