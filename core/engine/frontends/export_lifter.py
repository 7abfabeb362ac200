# mypy: disable-error-code="arg-type,operator"
# (aten node arguments are typed as any fx Argument; each rule reads them by the op's schema)
"""The walk over a `torch.export` program's aten graph that builds the engine IR: weights become module
parameters or buffers, the image placeholder gets its size check, and each aten op is lifted by its rule
(`export_rules.py`) or kept as the aten call it is."""
from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
from torch import fx, nn

from .ir import FrontendError, check_size

Lift = Callable[["Lifter", fx.Node], Any]  # how one aten node becomes lifted graph values


class _Constant:
    """A weight or buffer of the program: becomes a module's parameter, or a buffer read by get_attr."""

    def __init__(self, tensor: torch.Tensor, name: str) -> None:
        self.tensor, self.name = tensor, name


class _Empty:
    """A tensor with no elements (timm encoders' zero-channel feature for a stride they lack): nothing to
    compute; a concatenation drops it, anything else that reads it is refused."""

    def __init__(self, name: str) -> None:
        self.name = name


def is_empty(value: Any) -> bool:
    return isinstance(value, _Empty)


class Lifter:
    def __init__(self, program: torch.export.ExportedProgram, rules: dict[Any, Lift], source: str | None = "") -> None:
        self.program = program
        self.source = source  # check_size's `program`: the file's name ("" unnamed), None for leanseg's own capture
        self.rules = rules  # aten op -> how it is lifted (export_rules.RULES); others stay aten calls
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
            if isinstance(found, _Empty):
                raise FrontendError(f"{found.name}: an empty tensor (a zero-size dimension) is read by an op that "
                                    "is not a concatenation; unsupported")
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
        if value is None:
            return x
        if value.dim() != 4 or not isinstance(value.shape[1], int):
            shown = [d if isinstance(d, int) else str(d) for d in value.shape]
            raise FrontendError(f"input {node.name!r} has shape {shown}; leanseg needs (N, C, H, W) with a fixed "
                                "channel count C")
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
        named = {} if self.source is None else {"program": self.source}
        return self.graph.call_function(check_size, (x, ranges[0], ranges[1], tuple(multiples)), named)

    def lift(self, node: fx.Node) -> Any:
        target = node.target
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor) and any(isinstance(d, int) and d == 0 for d in value.shape):
            return _Empty(node.name)  # computes nothing: its readers see no value
        rule = self.rules.get(target)
        if rule is not None:
            return rule(self, node)
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
