# mypy: disable-error-code="arg-type,operator"
# (aten node arguments are typed as any fx Argument; each rule reads them by the op's schema)
"""Front end: a `torch.export` program (aten ops) lifted into the engine IR (nn modules + plain functions).

`torch.export` captures what torch.fx cannot (Python control flow on shapes, functional convolutions,
padding modules) as a flat graph of aten ops with the weights as inputs. The passes match layers, so
each weighted op becomes its module again (aten.conv2d -> nn.Conv2d, aten.batch_norm -> nn.BatchNorm2d,
...). Shapes read from the input stay in the graph (`dim_size`), so one lifted graph serves every size.
An aten op outside the vocabulary is kept as it is: it runs as a plain eager call and the plan names it.
"""
from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import fx, nn

from .ir import FrontendError, check_size, dim_size

aten = torch.ops.aten
Lift = Callable[["_Lifter", fx.Node], Any]


class _Constant:
    """A weight or buffer of the program: becomes a module's parameter, or a buffer read by get_attr."""

    def __init__(self, tensor: torch.Tensor, name: str) -> None:
        self.tensor, self.name = tensor, name


class _Lifter:
    def __init__(self, program: torch.export.ExportedProgram) -> None:
        self.program = program
        self.root = nn.Module()
        self.graph = fx.Graph()
        self.env: dict[fx.Node, Any] = {}
        self.names: set[str] = set()

    # -- building blocks -------------------------------------------------------------------------
    def value(self, arg: Any) -> Any:
        """An argument of the aten graph as the lifted graph sees it (nodes, constants, lists)."""
        if isinstance(arg, fx.Node):
            found = self.env[arg]
            if isinstance(found, _Constant):
                return self.buffer(found)
            return found
        if isinstance(arg, (list, tuple)):
            return type(arg)(self.value(a) for a in arg)
        return arg

    def tensor(self, arg: Any) -> torch.Tensor | None:
        """The constant tensor behind `arg` (a weight), or None."""
        if arg is None:
            return None
        found = self.env.get(arg) if isinstance(arg, fx.Node) else None
        if not isinstance(found, _Constant):
            raise FrontendError(f"expected a weight, got {arg}")
        return found.tensor.detach()

    def unique(self, base: str) -> str:
        name, i = base.replace(".", "_"), 1
        while name in self.names:
            name, i = f"{base}_{i}", i + 1
        self.names.add(name)
        return name

    def buffer(self, constant: _Constant) -> fx.Node:
        name = self.unique(f"const_{constant.name}")
        self.root.register_buffer(name, constant.tensor.detach().clone())
        return self.graph.get_attr(name)

    def module(self, node: fx.Node, module: nn.Module, x: Any) -> fx.Node:
        name = self.unique(node.name)
        self.root.add_module(name, module.eval())
        return self.graph.call_module(name, (self.value(x),))

    def function(self, target: Callable[..., Any], *args: Any, **kwargs: Any) -> fx.Node:
        return self.graph.call_function(target, tuple(self.value(a) for a in args),
                                        {k: self.value(v) for k, v in kwargs.items()})

    # -- the walk ----------------------------------------------------------------------------------
    def run(self) -> fx.GraphModule:
        signature = self.program.graph_signature
        sources = {**signature.inputs_to_parameters, **signature.inputs_to_buffers,
                   **signature.inputs_to_lifted_tensor_constants}
        weights = {**self.program.state_dict, **self.program.constants}
        user_inputs = [name for name in signature.user_inputs]
        if len(user_inputs) != 1:
            raise FrontendError(f"the program takes {len(user_inputs)} inputs; a segmentation model takes one image")
        for node in self.program.graph.nodes:
            if node.op == "placeholder":
                if node.name in sources:
                    self.env[node] = _Constant(weights[sources[node.name]], sources[node.name])
                else:
                    self.env[node] = self._guarded_input(node)
            elif node.op == "call_function":
                self.env[node] = self.lift(node)
            elif node.op == "output":
                outputs = node.args[0]
                if len(outputs) != 1:
                    raise FrontendError(f"the program returns {len(outputs)} values; expected one logits tensor")
                self.graph.output(self.value(outputs[0]))
        graph_module = fx.GraphModule(self.root, self.graph)
        graph_module.graph.eliminate_dead_code()
        graph_module.delete_all_unused_submodules()
        graph_module.recompile()
        return graph_module

    def _guarded_input(self, node: fx.Node) -> fx.Node:
        """The image placeholder; where the program holds only for some sizes, a check_size node after it."""
        x = self.graph.placeholder("x")
        value = node.meta.get("val")
        if value is None or value.dim() != 4:
            return x
        ranges, multiples = [], []
        for extent in value.shape[2:]:
            if isinstance(extent, int):
                ranges.append((extent, extent))  # specialised to the example's size
                multiples.append(1)
                continue
            bounds = self.program.range_constraints.get(extent.node.expr)
            low = _bound(bounds.lower, 1) if bounds is not None else 1
            high = _bound(bounds.upper, 2**31 - 1) if bounds is not None else 2**31 - 1
            ranges.append((low, high))
            multiples.append(_multiple(extent.node.expr))  # exported as 32 * Dim: holds for multiples of 32 only
        if all(low <= 2 and high >= 2**30 for low, high in ranges) and multiples == [1, 1]:  # export's 0/1 rule
            return x  # puts the floor at 2
        if multiples == [1, 1]:
            return self.graph.call_function(check_size, (x, ranges[0], ranges[1]))
        return self.graph.call_function(check_size, (x, ranges[0], ranges[1], tuple(multiples)))

    def lift(self, node: fx.Node) -> Any:
        target = node.target
        rule = _RULES.get(target)  # type: ignore[arg-type]
        if rule is not None:
            return rule(self, node)
        if target in _IDENTITY:
            return self.value(node.args[0])
        if target in _SKIPPED:
            return None
        if target in (operator.add, operator.sub, operator.mul, operator.floordiv, operator.truediv,
                      operator.getitem):
            return self.getitem(node) if target is operator.getitem else self.function(target, *node.args)
        # Anything else runs as the aten call it is (eager; the plan lists it as unknown).
        return self.function(target, *node.args, **node.kwargs)  # type: ignore[arg-type]

    def getitem(self, node: fx.Node) -> Any:
        source, index = node.args
        lifted = self.env[source]  # type: ignore[index]
        if isinstance(lifted, tuple):  # an op that returned (out, saved...) lifted to a tuple of values
            return lifted[index]  # type: ignore[index]
        return self.function(operator.getitem, source, index)


def _conv(lifter: _Lifter, node: fx.Node) -> fx.Node:
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


def _conv_transpose(lifter: _Lifter, node: fx.Node, x: Any, weight: Any, bias: Any, stride: Any, padding: Any,
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


def _batch_norm(lifter: _Lifter, node: fx.Node) -> Any:
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


def _group_norm(lifter: _Lifter, node: fx.Node) -> fx.Node:
    x, groups, weight, bias, eps = (list(node.args) + [None, None, 1e-5])[:5]
    w = lifter.tensor(weight)
    channels = int(w.numel()) if w is not None else int(node.meta["val"].shape[1])
    norm = nn.GroupNorm(int(groups), channels, eps=float(eps), affine=w is not None)  # type: ignore[arg-type]
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
    def lift(lifter: _Lifter, node: fx.Node) -> fx.Node:
        a, b = node.args[:2]
        alpha = node.kwargs.get("alpha", 1)
        if alpha != 1:
            b = lifter.function(operator.mul, b, alpha)
        return lifter.function(op, a, b)
    return lift


def _cat(lifter: _Lifter, node: fx.Node) -> fx.Node:
    tensors = node.args[0]
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
    return lifter.function(torch.cat, list(tensors), dim)  # type: ignore[arg-type]


def _upsample(mode: str) -> Lift:
    def lift(lifter: _Lifter, node: fx.Node) -> fx.Node:
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


def _max_pool(lifter: _Lifter, node: fx.Node) -> fx.Node:
    args = list(node.args) + [None] * 6
    x, kernel = args[0], args[1]
    stride, padding, dilation = args[2] or kernel, args[3] or 0, args[4] or 1
    pool = nn.MaxPool2d(tuple(_pair(kernel)), tuple(_pair(stride)), tuple(_pair(padding)), tuple(_pair(dilation)),
                        ceil_mode=bool(args[5]))
    return lifter.module(node, pool, x)


def _avg_pool(lifter: _Lifter, node: fx.Node) -> fx.Node:
    args = list(node.args) + [None] * 7
    x, kernel, stride = args[0], args[1], args[2] or args[1]
    padding, ceil_mode, count_include_pad = args[3] or [0, 0], bool(args[4]), args[5] if args[5] is not None else True
    if args[6] is not None:
        return lifter.function(node.target, *node.args, **node.kwargs)  # type: ignore[arg-type]
    pool = nn.AvgPool2d(tuple(_pair(kernel)), tuple(_pair(stride)), tuple(_pair(padding)), ceil_mode=ceil_mode,
                        count_include_pad=bool(count_include_pad))
    return lifter.module(node, pool, x)


def _adaptive_avg_pool(lifter: _Lifter, node: fx.Node) -> fx.Node:
    return lifter.module(node, nn.AdaptiveAvgPool2d(tuple(node.args[1])), node.args[0])  # type: ignore[arg-type]


def _mean(lifter: _Lifter, node: fx.Node) -> fx.Node:
    x, dims = node.args[0], node.args[1]
    keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    rank = len(node.args[0].meta["val"].shape)  # type: ignore[union-attr]
    if keepdim and rank == 4 and sorted(d % 4 for d in dims) == [2, 3]:  # type: ignore[union-attr]
        return lifter.module(node, nn.AdaptiveAvgPool2d(1), x)
    return lifter.function(torch.mean, x, list(dims), bool(keepdim))  # type: ignore[arg-type]


def _pad(lifter: _Lifter, node: fx.Node) -> fx.Node:
    x, pad = node.args[0], node.args[1]
    value = node.args[2] if len(node.args) > 2 else node.kwargs.get("value", 0.0)
    return lifter.function(F.pad, x, list(pad), value=float(value or 0.0))  # type: ignore[arg-type]


def _sum_of_stack(lifter: _Lifter, node: fx.Node) -> Any:
    """sum(stack(xs), dim=0) (smp's FPN merge) as a chain of adds: no stacked copy of every map."""
    source, dims = node.args[0], node.args[1]
    if (isinstance(source, fx.Node) and source.target is aten.stack.default and list(dims) == [0]  # type: ignore[arg-type]
            and (source.args[1] if len(source.args) > 1 else 0) == 0 and len(node.args) < 3):
        parts = list(source.args[0])  # type: ignore[arg-type]
        total = lifter.function(operator.add, parts[0], parts[1])
        for part in parts[2:]:
            total = lifter.graph.call_function(operator.add, (total, lifter.value(part)))
        return total
    return lifter.function(node.target, *node.args, **node.kwargs)  # type: ignore[arg-type]


def _stack(lifter: _Lifter, node: fx.Node) -> Any:
    if all(user.target is aten.sum.dim_IntList for user in node.users):
        return None  # read by the sum rule from the aten graph directly
    return lifter.function(node.target, *node.args, **node.kwargs)  # type: ignore[arg-type]


def _sym_size(lifter: _Lifter, node: fx.Node) -> fx.Node:
    return lifter.function(dim_size, node.args[0], node.args[1])


def _bound(value: Any, unbounded: int) -> int:
    """A range constraint's bound as an int (sympy's infinities: `unbounded`)."""
    try:
        return int(value)
    except (TypeError, ValueError, AttributeError, OverflowError):
        return unbounded


def _multiple(expr: Any) -> int:
    """The integer factor of a symbolic size (32 for `32*s0`), 1 when there is none."""
    try:
        coefficient = expr.as_coeff_Mul()[0]
        return int(coefficient) if coefficient.is_Integer and int(coefficient) > 1 else 1
    except (AttributeError, TypeError, ValueError):
        return 1


def _pair(value: Any) -> list[int]:
    values = [int(v) for v in (value if isinstance(value, (list, tuple)) else [value])]
    return values * 2 if len(values) == 1 else values


_RULES: dict[Any, Lift] = {
    aten.conv2d.default: _conv,
    aten.convolution.default: _conv,
    aten.batch_norm.default: _batch_norm,
    aten._native_batch_norm_legit_no_training.default: _batch_norm,
    aten.group_norm.default: _group_norm,
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
}
# Ops that are the identity at inference (eval-mode dropout, copies that only change the layout).
_IDENTITY = {aten.dropout.default, aten.dropout_.default, aten.feature_dropout.default,
             aten.feature_dropout_.default, aten.clone.default, aten.contiguous.default, aten.alias.default,
             aten.detach.default, aten.detach_.default}
# Checks torch.export inserts for the symbolic shapes; the lifted graph serves every size anyway.
_SKIPPED = {aten._assert_scalar.default, aten.sym_constrain_range_for_size.default,
            aten._assert_tensor_metadata.default, aten.sym_constrain_range.default}


def lift_exported_program(program: torch.export.ExportedProgram) -> fx.GraphModule:
    """The engine IR of an ExportedProgram (eval mode, one image in, one logits tensor out)."""
    program = program.run_decompositions({}) if _has_training_ops(program) else program
    return _Lifter(program).run()


def _has_training_ops(program: torch.export.ExportedProgram) -> bool:
    return any(node.target is aten._native_batch_norm_legit_functional.default for node in program.graph.nodes)
